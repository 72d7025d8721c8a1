//! Segment directories (`spec/PERFABI.md` §15): where writers put their
//! segments so that one reader sees them all, and which names in such a
//! directory are segments.
//!
//! One home for the rules writers and readers share:
//!
//! * the default directory: `$PERFABI_DIR` if set and not empty, else
//!   `/dev/shm/perfabi-<euid>` ([`default_dir`]);
//! * how a writer prepares it ([`prepare`]: created `0755` if absent, then it
//!   must be owned by root or the writer's user and not replaceable by
//!   others, §11.1);
//! * segment file names, unique per process and per creation
//!   (`<name>.<pid>.<nonce>.perfabi`, [`SegmentName`]), so a restarted worker
//!   never reuses a dead one's file;
//! * what a reader lists ([`SegmentName::parse`]): every other entry (the
//!   writers' temporary files, the lock and kept files, anything else) is
//!   not a segment and is ignored.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::safe_open::{euid, Folder, PathError};

/// The environment variable naming the directory writers use by default.
pub const ENV_DIR: &str = "PERFABI_DIR";

/// The suffix of every segment file name in a directory.
pub const SEGMENT_SUFFIX: &str = ".perfabi";

/// The longest writer name in a segment file name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

pub mod lock;

pub use lock::{LOCK_NAME, OWNER_LOCK_NAME};

/// The directory's kept file: a segment holding dead writers' counts
/// (§15.5). Not a segment name: readers open it on its own.
pub const KEPT_NAME: &str = "kept.perfabi-kept";

/// The family of a kept file listing the folded segments' identities
/// (`<pid>.<nonce>`, one member each); not presented to users.
pub const FOLDED_FAMILY: &str = "perfabi.folded";

/// The most entries a reader lists in one directory: past it, the rest are
/// not read and the reader says so (cost bounded by a stated limit, §11.4).
pub const MAX_ENTRIES: usize = 65_536;

/// The default directory of segments: `$PERFABI_DIR` if set and not empty,
/// else `/dev/shm/perfabi-<euid>` (a folder per user, so one user's writers
/// never need another's folder).
pub fn default_dir() -> PathBuf {
    match std::env::var_os(ENV_DIR) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(format!("/dev/shm/perfabi-{}", euid())),
    }
}

/// Opens the directory `dir` for a writer, creating it (mode `0755` less
/// the umask) if it is absent (its parent must exist), and checks it as
/// §11.1 wants a writer's folder: owned by root or the caller, and sticky
/// if group or others may write it. A directory squatted by another user
/// (say `/dev/shm/perfabi-1000` made by uid 1001) is refused.
pub fn prepare(dir: &Path) -> Result<Folder, PathError> {
    match Folder::open(dir) {
        Ok(f) => {
            f.check_private()?;
            Ok(f)
        }
        Err(e) if e.not_found() => {
            let parent = crate::safe_open::folder_of(dir);
            let name = dir.file_name().ok_or_else(|| {
                PathError::new(
                    dir,
                    crate::safe_open::Problem::Io(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "names no directory: give a path such as /dev/shm/myapp",
                    )),
                )
            })?;
            let p = Folder::open(parent)?;
            p.mkdir(name, 0o755)
                .map_err(|e| PathError::new(dir, crate::safe_open::Problem::Io(e)))?;
            let f = Folder::open(dir)?;
            f.check_private()?;
            Ok(f)
        }
        Err(e) => Err(e),
    }
}

/// Whether `name` may name a writer in a segment file name: 1 to
/// [`MAX_NAME_LEN`] bytes of ASCII letters, digits, `_` and `-`.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `name` made valid ([`valid_name`]): other bytes become `_`, cut to
/// [`MAX_NAME_LEN`] bytes; an empty name becomes `perfabi`.
pub fn sanitize_name(name: &str) -> String {
    let s: String = name
        .bytes()
        .take(MAX_NAME_LEN)
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                b as char
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "perfabi".into()
    } else {
        s
    }
}

/// This program's name, made valid for a segment file name (the file name
/// of `/proc/self/exe`'s link as the process was started, `argv[0]`'s last
/// component).
pub fn program_name() -> String {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let base = Path::new(&arg0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    sanitize_name(&base)
}

/// The name of a segment file in a directory:
/// `<name>.<pid>.<nonce>.perfabi`, the nonce 16 lowercase hex digits drawn
/// at random for each creation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentName {
    /// The writer's name ([`valid_name`]).
    pub name: String,
    /// The creating process's pid.
    pub pid: u32,
    /// Random per creation, never 0.
    pub nonce: u64,
}

impl SegmentName {
    /// A new name for a segment of the writer `name` in this process; an
    /// invalid `name` is refused with a message that says what is allowed.
    pub fn new(name: &str) -> io::Result<Self> {
        if !valid_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "invalid writer name \"{}\": use 1 to {MAX_NAME_LEN} ASCII letters, digits, '_' or '-'",
                    perfabi::text::escape(name.as_bytes())
                ),
            ));
        }
        let mut nonce = [0u8; 8];
        rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())?;
        Ok(Self {
            name: name.to_owned(),
            pid: std::process::id(),
            nonce: u64::from_ne_bytes(nonce) | 1,
        })
    }

    /// The segment this directory entry names, if it names one. Only names
    /// of exactly the form `<name>.<pid>.<nonce>.perfabi` are segments
    /// (pid in decimal without a leading zero, nonce 16 lowercase hex
    /// digits, not 0); temporary files (starting with `.`), the lock and
    /// kept files and anything else are not.
    pub fn parse(entry: &OsStr) -> Option<Self> {
        let s = std::str::from_utf8(entry.as_bytes()).ok()?;
        let rest = s.strip_suffix(SEGMENT_SUFFIX)?;
        let mut parts = rest.rsplitn(3, '.');
        let nonce = parts.next()?;
        let pid = parts.next()?;
        let name = parts.next()?;
        if !valid_name(name)
            || nonce.len() != 16
            || !nonce
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            || pid.is_empty()
            || pid.len() > 10
            || !pid.bytes().all(|b| b.is_ascii_digit())
            || (pid.len() > 1 && pid.starts_with('0'))
        {
            return None;
        }
        let nonce = u64::from_str_radix(nonce, 16).ok().filter(|&n| n != 0)?;
        let pid = pid.parse::<u32>().ok()?;
        Some(Self {
            name: name.to_owned(),
            pid,
            nonce,
        })
    }
}

impl SegmentName {
    /// The identity a kept file lists for it: `<pid>.<nonce>` (16 hex
    /// digits).
    pub fn identity(&self) -> String {
        format!("{}.{:016x}", self.pid, self.nonce)
    }
}

/// What [`list`] found in a directory.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// Segment names, sorted.
    pub names: std::collections::BTreeSet<SegmentName>,
    /// Every other entry's name (`.` and `..` left out).
    pub others: Vec<std::ffi::OsString>,
    /// More than [`MAX_ENTRIES`] entries: the rest were not looked at.
    pub truncated: bool,
}

/// Lists the open directory `folder`: at most [`MAX_ENTRIES`] entries are
/// looked at; names are only parsed, nothing is opened.
pub fn list(folder: &Folder) -> io::Result<Listing> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        folder.fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut out = Listing::default();
    let mut seen = 0usize;
    let mut entries = rustix::fs::Dir::read_from(&fd)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        seen += 1;
        if seen > MAX_ENTRIES {
            out.truncated = true;
            break;
        }
        match SegmentName::parse(name) {
            Some(n) => {
                out.names.insert(n);
            }
            None => out.others.push(name.to_os_string()),
        }
    }
    Ok(out)
}

impl fmt::Display for SegmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{:016x}{SEGMENT_SUFFIX}",
            self.name, self.pid, self.nonce
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_not_segments() {
        let n = SegmentName::new("web-worker_1").unwrap();
        let s = n.to_string();
        assert_eq!(SegmentName::parse(OsStr::new(&s)), Some(n.clone()));
        assert_eq!(n.pid, std::process::id());
        for bad in [
            "",
            ".perfabi",
            "a.1.0000000000000000.perfabi",
            "a.01.00000000000000ff.perfabi",
            "a.1.00000000000000FF.perfabi",
            "a.1.00000000000000ff.perfabi.tmp",
            ".a.1.00000000000000ff.perfabi.5.0123456789abcdef.tmp",
            "a.b.1.00000000000000ff.perfabi",
            "a.99999999999.00000000000000ff.perfabi",
            "fold.lock",
            "fold.owner.lock",
            ".fold.lock.1.00000000000000ff.tmp",
            "kept.perfabi-kept",
        ] {
            assert_eq!(SegmentName::parse(OsStr::new(bad)), None, "{bad}");
        }
        assert!(SegmentName::parse(OsStr::new("a.1.00000000000000ff.perfabi")).is_some());
        assert!(SegmentName::new("a.b").is_err());
        assert!(SegmentName::new(&"x".repeat(65)).is_err());
        assert_eq!(sanitize_name("my app.py"), "my_app_py");
        assert_eq!(sanitize_name(""), "perfabi");
    }

    #[test]
    fn two_creations_never_share_a_name() {
        let a = SegmentName::new("w").unwrap();
        let b = SegmentName::new("w").unwrap();
        assert_ne!(a.to_string(), b.to_string());
    }
}
