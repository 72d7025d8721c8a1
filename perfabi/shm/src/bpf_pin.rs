//! Opening a segment held in a pinned BPF map (`spec/PERFABI.md` §9.1,
//! §11.2 step 7): the eBPF writer's `BPF_F_MMAPABLE` array map, frozen and
//! pinned in bpffs.
//!
//! A pin is a file on a bpffs mount that cannot be `open`ed; the map behind
//! it is reached with `BPF_OBJ_GET` (the `bpf(2)` system call, made here
//! directly: a reader does not link libbpf). What is checked, in order:
//!
//! 1. the folder is on bpffs (`fstatfs` magic `BPF_FS_MAGIC`) and others
//!    cannot replace its entries (root's or the caller's, not writable by
//!    group or others unless sticky): `BPF_OBJ_GET` follows a last symbolic
//!    link, so the name must not be swappable between the checks and it;
//! 2. the pin's `lstat` (judged by the caller: a regular file, its owner,
//!    its mode, one link) — and again after `BPF_OBJ_GET`, the same inode;
//! 3. the object is a map (`/proc/self/fd/N` reads `anon_inode:bpf-map`),
//!    and `BPF_OBJ_GET_INFO_BY_FD` says: an array, `BPF_F_MMAPABLE`, 4-byte
//!    keys, 4096-byte values (element `i` is page `i` of the segment);
//! 4. the map is frozen: a shared writable mapping of its first page is
//!    refused with `EPERM`, which `bpf_map_mmap` (kernel/bpf/syscall.c)
//!    answers for a frozen map and nothing else (its other refusals are
//!    `ENOTSUPP`, `EINVAL` and, for `BPF_F_RDONLY_PROG` or a read-only
//!    descriptor, `EACCES`). Had the map not been frozen, the probe's
//!    mapping is unmapped at once, never written. The map's `fdinfo` also
//!    shows `frozen:`, but needs `/proc` and is text; the probe asks the
//!    kernel the very question (can a process write it?).
//!
//! The descriptor asks for read and write access (`BPF_OBJ_GET` with no
//! flags): the kernel refuses a `PROT_READ` shared mapping of a read-only
//! map descriptor (`EINVAL`), so a reader needs a pin mode that lets it
//! open the map read-write, which a frozen map makes harmless (no process
//! can write it: updates and writable mappings get `EPERM`).

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::safe_open::Folder;

/// `BPF_FS_MAGIC` of `include/uapi/linux/magic.h`.
pub const BPF_FS_MAGIC: u64 = 0xcafe_4a11;

/// The value size of a segment map: one element per 4 KiB page.
pub const SEGMENT_MAP_VALUE_SIZE: u32 = 4096;

/// `BPF_MAP_TYPE_ARRAY` (`include/uapi/linux/bpf.h`).
const BPF_MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_F_MMAPABLE`.
pub const BPF_F_MMAPABLE: u32 = 1 << 10;
/// `BPF_OBJ_GET` (command 7) and `BPF_OBJ_GET_INFO_BY_FD` (15).
const BPF_OBJ_GET: libc::c_int = 7;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
/// `BPF_F_PATH_FD` (Linux 6.5): `path_fd` names the folder to resolve from.
const BPF_F_PATH_FD: u32 = 1 << 14;

/// `union bpf_attr` as `BPF_OBJ_GET` reads it.
#[repr(C)]
#[derive(Default)]
struct ObjGetAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
    path_fd: i32,
    _pad: u32,
}

/// `union bpf_attr` as `BPF_OBJ_GET_INFO_BY_FD` reads it.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `struct bpf_map_info` up to `map_extra` (the kernel copies at most the
/// size given, and zero-fills nothing past it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RawMapInfo {
    kind: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: [u8; 16],
    ifindex: u32,
    btf_vmlinux_value_type_id: u32,
    netns_dev: u64,
    netns_ino: u64,
    btf_id: u32,
    btf_key_type_id: u32,
    btf_value_type_id: u32,
    btf_vmlinux_id: u32,
    map_extra: u64,
}

/// What the kernel says of a pinned segment map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapInfo {
    /// The map's id (`bpftool map show id N`).
    pub id: u32,
    /// Elements (pages of the segment).
    pub max_entries: u32,
    /// Bytes the map holds (and a mapping of it may cover).
    pub bytes: u64,
}

/// Why a pin is not a segment map.
#[derive(Debug)]
pub enum PinProblem {
    /// The object pinned is not a map (a program, a link).
    NotAMap,
    /// A map, but not an mmapable array of 4 KiB values.
    WrongMap {
        /// `bpf_map_info.type`.
        kind: u32,
        /// `bpf_map_info.map_flags`.
        flags: u32,
        /// `bpf_map_info.key_size`.
        key_size: u32,
        /// `bpf_map_info.value_size`.
        value_size: u32,
    },
    /// The map is not frozen: a process may still write it.
    NotFrozen,
    /// The pin changed between the checks and `BPF_OBJ_GET`.
    Changed,
    /// A system call failed.
    Io(io::Error),
}

impl std::fmt::Display for PinProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAMap => write!(f, "the object pinned there is not a BPF map"),
            Self::WrongMap {
                kind,
                flags,
                key_size,
                value_size,
            } => write!(
                f,
                "a BPF map of type {kind}, flags {flags:#x}, key size {key_size}, value size \
                 {value_size}, not a BPF_F_MMAPABLE array of 4096-byte values"
            ),
            Self::NotFrozen => write!(
                f,
                "the BPF map is not frozen, so a process may still write it \
                 (a segment map is frozen before it is pinned)"
            ),
            Self::Changed => write!(f, "the pin was replaced while being opened"),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Whether `folder` is on a bpffs mount.
pub fn on_bpffs(folder: &Folder) -> io::Result<bool> {
    let st = rustix::fs::fstatfs(folder.fd())?;
    // `f_type`'s integer type differs between targets.
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as u64 == BPF_FS_MAGIC)
}

/// The map pinned as `name` in `folder` (which the caller found on bpffs
/// and whose entry it judged), checked to be a frozen segment map: its
/// descriptor, read-write, and what the kernel says of it.
pub fn open_map(folder: &Folder, name: &OsStr) -> Result<(File, MapInfo), PinProblem> {
    let fd = obj_get(folder, name).map_err(PinProblem::Io)?;
    let link = rustix::fs::readlinkat(
        rustix::fs::CWD,
        format!("/proc/self/fd/{}", fd.as_raw_fd()),
        Vec::new(),
    )
    .map_err(|e| PinProblem::Io(e.into()))?;
    if link.as_bytes() != b"anon_inode:bpf-map" {
        return Err(PinProblem::NotAMap);
    }
    let raw = map_info(&fd).map_err(PinProblem::Io)?;
    if raw.kind != BPF_MAP_TYPE_ARRAY
        || raw.map_flags & BPF_F_MMAPABLE == 0
        || raw.key_size != 4
        || raw.value_size != SEGMENT_MAP_VALUE_SIZE
    {
        return Err(PinProblem::WrongMap {
            kind: raw.kind,
            flags: raw.map_flags,
            key_size: raw.key_size,
            value_size: raw.value_size,
        });
    }
    if !frozen(&fd).map_err(PinProblem::Io)? {
        return Err(PinProblem::NotFrozen);
    }
    let info = MapInfo {
        id: raw.id,
        max_entries: raw.max_entries,
        bytes: u64::from(raw.max_entries) * u64::from(SEGMENT_MAP_VALUE_SIZE),
    };
    Ok((File::from(fd), info))
}

/// `BPF_OBJ_GET` of `name` in `folder`, read-write: from the folder's
/// descriptor (`BPF_F_PATH_FD`, Linux 6.5), else through
/// `/proc/self/fd/N/NAME`, which resolves from the same folder.
fn obj_get(folder: &Folder, name: &OsStr) -> io::Result<OwnedFd> {
    let dir = folder.fd().as_raw_fd();
    let cname = CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
    let mut attr = ObjGetAttr {
        pathname: cname.as_ptr() as u64,
        file_flags: BPF_F_PATH_FD,
        path_fd: dir,
        ..Default::default()
    };
    match bpf(BPF_OBJ_GET, &mut attr) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        Err(e) => return Err(e),
    }
    let mut via_proc = format!("/proc/self/fd/{dir}/").into_bytes();
    via_proc.extend_from_slice(name.as_bytes());
    let cpath = CString::new(via_proc)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
    let mut attr = ObjGetAttr {
        pathname: cpath.as_ptr() as u64,
        ..Default::default()
    };
    bpf(BPF_OBJ_GET, &mut attr)
}

/// `bpf(cmd, attr)` for a command that returns a new descriptor.
fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, exclusively borrowed `repr(C)` prefix of
    // `union bpf_attr` for `cmd` and its size is passed with it (the kernel
    // reads no further and zero-extends); any pointer inside it points to
    // a buffer the caller keeps alive across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(r).map_err(|_| io::Error::other("bpf(2) returned no fd"))?;
    // SAFETY: a non-negative return of BPF_OBJ_GET is a new descriptor that
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn map_info(fd: &OwnedFd) -> io::Result<RawMapInfo> {
    let mut info = RawMapInfo::default();
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<RawMapInfo>() as u32,
        info: &mut info as *mut RawMapInfo as u64,
    };
    // SAFETY: `attr` is BPF_OBJ_GET_INFO_BY_FD's prefix of `union
    // bpf_attr`, its size passed with it; `info` points to a live, writable
    // `RawMapInfo` of `info_len` bytes, which the kernel fills (at most
    // that many bytes) from a map descriptor (checked by the caller).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr as *mut libc::c_void,
            std::mem::size_of::<InfoAttr>() as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// Whether the map is frozen: the kernel refuses a shared writable mapping
/// of a frozen map with `EPERM` (and of an mmapable array for no other
/// reason with it). A mapping that succeeds is unmapped at once.
fn frozen(fd: &OwnedFd) -> io::Result<bool> {
    use rustix::mm::{MapFlags, ProtFlags};
    let len = SEGMENT_MAP_VALUE_SIZE as usize;
    // SAFETY: a new mapping at an address the kernel chooses (null hint),
    // so no existing memory is replaced; it is never read or written
    // through, and unmapped below before anything else runs.
    let r = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd.as_fd(),
            0,
        )
    };
    match r {
        Err(rustix::io::Errno::PERM) => Ok(true),
        Err(e) => Err(e.into()),
        Ok(p) => {
            // SAFETY: `p` is the mapping of `len` bytes just made, which
            // nothing else knows of.
            unsafe { rustix::mm::munmap(p, len) }?;
            Ok(false)
        }
    }
}

/// Whether unprivileged BPF is enabled (`kernel.unprivileged_bpf_disabled`
/// is 0): then any user holding a map's read-write descriptor can load a
/// socket filter program that writes the map, frozen or not, so a pin
/// whose mode lets others open it read-write is writable by them.
/// Unreadable (no `/proc`): assumed enabled.
pub fn unprivileged_bpf_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map(|s| s.trim() == "0")
        .unwrap_or(true)
}
