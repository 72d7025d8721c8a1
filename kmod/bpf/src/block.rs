//! The block group's instances: the whole disks `/sys/block` lists, as
//! `perfabi_sources.ko` finds them (`kmod/perfabi_src_block.c`): a disk
//! with a medium (`size` not 0) and request-based (an `mq` folder: only
//! those pass `block_rq_*`), keyed by `(dev_t, diskseq)` so that a disk
//! removed and another made with the same number is a new instance.

use std::path::{Path, PathBuf};

use perfabi_families::table::Group;

use crate::error::Error;
use crate::groups::{Found, Source};

/// The folder scanned.
const SYS_BLOCK: &str = "/sys/block";

/// The disks of a `/sys/block` folder.
#[derive(Debug)]
pub struct Disks {
    root: PathBuf,
}

impl Default for Disks {
    fn default() -> Self {
        Self {
            root: PathBuf::from(SYS_BLOCK),
        }
    }
}

/// A disk's key in the BPF map `disks` (`struct disk_key` of
/// `block.bpf.h`): the kernel's `dev_t` (`major << 20 | minor`), 4 bytes of
/// padding, `diskseq` (0 where the kernel has none).
pub fn disk_key(major: u32, minor: u32, diskseq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    k.extend_from_slice(&((major << 20) | (minor & 0xf_ffff)).to_ne_bytes());
    k.extend_from_slice(&0u32.to_ne_bytes());
    k.extend_from_slice(&diskseq.to_ne_bytes());
    k
}

/// The bit of `RQF_FLUSH_SEQ` in `struct request`'s `rq_flags` on the
/// running kernel: `1 << __RQF_FLUSH_SEQ` where the flags are an enum's
/// bits (an anonymous enum in 6.12, `enum rqf_flags` later: found by its
/// enumerator in the kernel's BTF, named or not, which a CO-RE enum
/// relocation cannot do), else 4, the macro's `(1 << 4)` of older kernels
/// (6.1), or where there is no BTF.
pub fn rqf_flush_seq_bit(btf: Option<&libbpf_rs::btf::Btf<'_>>) -> u32 {
    use libbpf_rs::btf::types::Enum;
    let Some(btf) = btf else {
        return 4;
    };
    let bit = btf
        .type_by_kind::<Enum<'_>>()
        .find_map(|e| {
            e.iter()
                .find(|m| m.name.is_some_and(|n| n == "__RQF_FLUSH_SEQ"))
                .and_then(|m| u32::try_from(m.value).ok())
        })
        .filter(|&b| b < 32)
        .unwrap_or(4);
    bit
}

/// A small sysfs file's text, trimmed.
fn small(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The disk `dir` (`/sys/block/NAME`) as an instance, or `None` if it is
/// none (no medium, bio-based, gone while read).
fn disk(dir: &Path, name: &[u8]) -> Option<Found> {
    if small(&dir.join("size"))? == "0" || !dir.join("mq").is_dir() {
        return None;
    }
    let dev = small(&dir.join("dev"))?;
    let (maj, min) = dev.split_once(':')?;
    let (maj, min) = (maj.parse().ok()?, min.parse().ok()?);
    let seq = match small(&dir.join("diskseq")) {
        Some(s) => s.parse().ok()?,
        None => 0,
    };
    Some(Found {
        key: disk_key(maj, min, seq),
        instance: perfabi::name::instance_from(name),
    })
}

impl Source for Disks {
    fn group(&self) -> Group {
        Group::Block
    }

    fn map_name(&self) -> &'static str {
        "disks"
    }

    fn scan(&mut self) -> Result<Vec<Found>, Error> {
        let dir = std::fs::read_dir(&self.root)
            .map_err(|e| Error::Io(format!("cannot list {}", self.root.display()), e))?;
        let mut found: Vec<Found> = dir
            .filter_map(Result::ok)
            .filter_map(|e| {
                use std::os::unix::ffi::OsStrExt;
                disk(&e.path(), e.file_name().as_bytes())
            })
            .collect();
        found.sort_by(|a, b| a.instance.cmp(&b.instance));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's 6.18 names the flag's bit in `enum rqf_flags`: 1.
    #[test]
    fn the_flush_sequence_flag_is_read_from_the_kernel() {
        if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            let btf = libbpf_rs::btf::Btf::from_vmlinux().ok();
            let b = rqf_flush_seq_bit(btf.as_ref());
            assert!(b == 1 || b == 4, "{b}");
        }
    }

    #[test]
    fn keys_are_the_kernel_dev_t_and_diskseq() {
        let k = disk_key(7, 3, 42);
        assert_eq!(&k[..4], &((7u32 << 20) | 3).to_ne_bytes());
        assert_eq!(&k[4..8], &[0; 4]);
        assert_eq!(&k[8..], &42u64.to_ne_bytes());
    }

    #[test]
    fn a_disk_needs_a_medium_and_a_request_queue() {
        let t = tempfile::tempdir().unwrap();
        let mk = |name: &str, size: &str, mq: bool, seq: Option<&str>| {
            let d = t.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("size"), size).unwrap();
            std::fs::write(d.join("dev"), "7:1\n").unwrap();
            if mq {
                std::fs::create_dir(d.join("mq")).unwrap();
            }
            if let Some(s) = seq {
                std::fs::write(d.join("diskseq"), s).unwrap();
            }
        };
        mk("loop1", "2048\n", true, Some("9\n"));
        mk("loop2", "0\n", true, Some("10\n"));
        mk("dm-0", "2048\n", false, Some("11\n"));
        mk("old", "8\n", true, None);
        let mut d = Disks {
            root: t.path().to_path_buf(),
        };
        let found = d.scan().unwrap();
        let names: Vec<&str> = found.iter().map(|f| f.instance.as_str()).collect();
        assert_eq!(names, ["loop1", "old"]);
        assert_eq!(found[0].key, disk_key(7, 1, 9));
        assert_eq!(found[1].key, disk_key(7, 1, 0));
    }
}
