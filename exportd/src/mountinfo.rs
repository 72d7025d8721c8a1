//! The parser of `/proc/self/mountinfo` (the filesystem collector's
//! mounts, and where the cgroup v2 hierarchy is mounted).
//!
//! A line is `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] -
//! FSTYPE SOURCE SUPEROPTIONS` (proc(5)); the kernel writes a space, tab,
//! newline or backslash in a path as `\040`, `\011`, `\012`, `\134`. A line
//! without the ` - ` separator or too few fields is skipped, never guessed.

use crate::procfs::MAX_LINES;

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted, unescaped.
    pub mountpoint: String,
    /// The filesystem type (`ext4`, `tmpfs`, `fuse.sshfs`).
    pub fstype: String,
    /// The source (`/dev/vda1`, `tmpfs`), unescaped.
    pub device: String,
    /// The filesystem is read-only: `ro` in its superblock's options (the
    /// last field). Not the mount's own options: a service under
    /// systemd's `ProtectSystem=strict` sees every mount of the host
    /// read-only in its own namespace, while the filesystems stay
    /// writable to everyone else.
    pub readonly: bool,
}

/// `\NNN` octal escapes made bytes again; a malformed escape is kept as
/// it is.
pub fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0')))
            .filter(|&n| n <= 0xff);
        match octal {
            Some(n) => {
                out.push(n as u8);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mounts of a `/proc/self/mountinfo` text, in its order (a later
/// mount on a mount point hides the earlier ones).
pub fn mounts(text: &str) -> impl Iterator<Item = Mount> + '_ {
    text.lines().take(MAX_LINES).filter_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').take(6).collect();
        let mut right = right.split(' ');
        let (fstype, device) = (right.next()?, right.next()?);
        let superblock = right.next().unwrap_or("");
        if left.len() < 6 || fstype.is_empty() {
            return None;
        }
        Some(Mount {
            mountpoint: unescape(left[4]),
            fstype: unescape(fstype),
            device: unescape(device),
            readonly: superblock.split(',').any(|o| o == "ro"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_lines_escapes_and_junk() {
        let t = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                 29 27 254:1 / /boot ro,relatime shared:5 master:1 - ext4 /dev/vda1 ro\n\
                 30 27 0:40 / /mnt/my\\040disk rw - fuse.sshfs me@host:/x\\134y rw\n\
                 junk\n31 27 0:1 / /x rw -  \n1 2 3 - tmpfs t rw\n";
        let m: Vec<Mount> = mounts(t).collect();
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(
            m[1],
            Mount {
                mountpoint: "/boot".into(),
                fstype: "ext4".into(),
                device: "/dev/vda1".into(),
                readonly: true
            }
        );
        assert_eq!(m[2].mountpoint, "/mnt/my disk");
        assert_eq!(m[2].device, "me@host:/x\\y");
        assert!(!m[0].readonly);
        assert_eq!(unescape("a\\0b\\999\\"), "a\\0b\\999\\");
    }

    /// Under `ProtectSystem=strict` every mount is `ro` in the service's
    /// namespace, its filesystem still writable: read-only is the
    /// superblock's word, not the mount's.
    #[test]
    fn read_only_is_the_superblocks() {
        let t = "40 1 254:1 / / ro,relatime - ext4 /dev/vda1 rw,errors=remount-ro\n\
                 41 40 254:2 / /data rw,relatime - ext4 /dev/vdb ro,errors=remount-ro\n";
        let m: Vec<Mount> = mounts(t).collect();
        assert!(!m[0].readonly, "{m:?}");
        assert!(m[1].readonly, "{m:?}");
    }

    #[test]
    fn this_machines_mountinfo_parses_every_line() {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert_eq!(mounts(&text).count(), text.lines().count());
        assert!(mounts(&text).any(|m| m.mountpoint == "/"));
    }
}
