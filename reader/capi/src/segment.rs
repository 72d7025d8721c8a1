//! Opening a segment: options, the segment object, its header and writer.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use perfabi_reader::{Liveness, Options, Origin, Segment, Trust};

use crate::error::{guard, guard_value, perfabi_error, Failure};
use crate::ptr;

/// An open segment: the Rust reader's `Segment`, mapped read-only, which
/// follows a writer that restarts at the same path.
///
/// Thread safety: one thread at a time (calls that take a segment change
/// its state); it may move between threads. Give each thread its own
/// segment (open the path again) to read from several at once.
pub struct perfabi_segment {
    pub(crate) seg: Segment,
    /// Tells this segment's handles from another's.
    pub(crate) id: u64,
}

/// Whose segment files to believe (`perfabi_options.trust`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum perfabi_trust {
    /// Only files of the reader's own user and of root (the default).
    PERFABI_TRUST_OWNER_OR_ROOT = 0,
    /// Those, and files of `perfabi_options.trust_uid`.
    PERFABI_TRUST_UID = 1,
    /// Files of any user. A writer still counts as alive only if its
    /// process runs as the file's owner.
    PERFABI_TRUST_ANYONE = 2,
}

/// How perfabi_open() opens and reads a segment. Start from
/// perfabi_options_default() and change the fields you need.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct perfabi_options {
    /// Whose files to believe: a `perfabi_trust` value.
    pub trust: u32,
    /// With `PERFABI_TRUST_UID`: the other uid to trust.
    pub trust_uid: u32,
    /// How long a read keeps trying while the writer keeps the segment
    /// busy, before it fails with `PERFABI_E_BUSY` (default 200).
    pub busy_timeout_ms: u32,
    /// Non-zero (the default): reads fail with `PERFABI_E_STALE` or
    /// `PERFABI_E_CLOSED` when the writer is gone; 0: they return its last
    /// values.
    pub require_live: c_int,
    /// Largest segment to map, in bytes (default 4 GiB); a larger one is
    /// refused with `PERFABI_E_TOO_LARGE`.
    pub max_segment_bytes: u64,
}

/// perfabi_options_default() - the options perfabi_open() uses when given
/// NULL: trust the own user and root, 200 ms busy timeout, require a live
/// writer, 4 GiB size limit.
///
/// Context: any thread.
/// Return: the default options.
#[no_mangle]
pub extern "C" fn perfabi_options_default() -> perfabi_options {
    let d = Options::default();
    perfabi_options {
        trust: perfabi_trust::PERFABI_TRUST_OWNER_OR_ROOT as u32,
        trust_uid: 0,
        busy_timeout_ms: u32::try_from(d.busy_timeout.as_millis()).unwrap_or(u32::MAX),
        require_live: c_int::from(d.require_live),
        max_segment_bytes: d.max_segment_bytes,
    }
}

impl perfabi_options {
    /// The reader's options these ask for.
    pub(crate) fn to_rust(self, func: &str) -> Result<Options, Failure> {
        let trust = match self.trust {
            t if t == perfabi_trust::PERFABI_TRUST_OWNER_OR_ROOT as u32 => Trust::OwnerOrRoot,
            t if t == perfabi_trust::PERFABI_TRUST_UID as u32 => Trust::Also(vec![self.trust_uid]),
            t if t == perfabi_trust::PERFABI_TRUST_ANYONE as u32 => Trust::Anyone,
            t => {
                return Err(Failure::invalid(
                    func,
                    format_args!("options->trust is {t}, not a perfabi_trust"),
                ))
            }
        };
        Ok(Options {
            trust,
            busy_timeout: Duration::from_millis(u64::from(self.busy_timeout_ms)),
            require_live: self.require_live != 0,
            max_segment_bytes: self.max_segment_bytes,
            ..Options::default()
        })
    }
}

/// Numbers the segments opened, so that a handle knows its own.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// perfabi_default_path() - where a reader looks for the segment when it
/// is given no path: `$PERFABI_SEGMENT` if set, else the kernel module's
/// `/dev/perfabi` if it exists, else the eBPF writer's pin
/// `/sys/fs/bpf/perfabi/kernel` if it exists, else `/dev/shm/perfabi.seg`
/// (the same order as perfabi-cat, pmdaperfabi, perfabi-prometheus and the
/// Python module).
/// @buf: where the path goes, NUL-terminated (cut to fit); NULL to ask
///       only its length.
/// @len: bytes at @buf.
///
/// Context: any thread.
/// Return: the path's length in bytes, without the NUL (as snprintf():
/// the path was cut if this is @len or more).
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn perfabi_default_path(buf: *mut c_char, len: usize) -> usize {
    // SAFETY: the caller's promise, forwarded.
    unsafe { copy_path(&perfabi_reader::default_path(), buf, len) }
}

/// Copies `path` to `buf` as snprintf() would (`len` bytes, cut to fit,
/// NUL-terminated; nothing if `buf` is NULL); its length.
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
pub(crate) unsafe fn copy_path(path: &std::path::Path, buf: *mut c_char, len: usize) -> usize {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    if !buf.is_null() && len > 0 {
        let n = bytes.len().min(len - 1);
        // SAFETY: `buf` points to `len` writable bytes (the caller's
        // promise) and `n + 1 <= len`; `bytes` is a separate Rust buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
            *buf.add(n) = 0;
        }
    }
    bytes.len()
}

/// perfabi_open() - open and map the segment at a path: a writer's tmpfs
/// file (`/dev/shm/perfabi.seg`), the kernel module's `/dev/perfabi`, or
/// the eBPF writer's pin in bpffs (`/sys/fs/bpf/perfabi/kernel`);
/// perfabi_default_path() gives the one to use when none is given.
/// @path: the path, NUL-terminated UTF-8. Its last component is never
///        followed if it is a symbolic link; nothing blocks (a FIFO is
///        refused); only a regular file of a trusted owner, the kernel
///        module's device or a frozen BPF map pinned by root is read
///        (`spec/PERFABI.md` §11).
/// @options: NULL for perfabi_options_default().
/// @out: receives the segment (NULL on failure); close it with
///       perfabi_close().
///
/// Context: any thread. The segment is then used by one thread at a time.
/// Return: `PERFABI_OK`; `PERFABI_E_NOT_FOUND`, `PERFABI_E_SYMLINK`,
/// `PERFABI_E_UNTRUSTED_OWNER`, `PERFABI_E_UNSUPPORTED_MAJOR`,
/// `PERFABI_E_MALFORMED`... (perfabi_last_error_message() says why).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `options` is NULL or points
/// to a `perfabi_options`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_open(
    path: *const c_char,
    options: *const perfabi_options,
    out: *mut *mut perfabi_segment,
) -> perfabi_error {
    const F: &str = "perfabi_open";
    guard(F, || {
        let make = || -> Result<perfabi_segment, Failure> {
            // SAFETY: the caller promises a NUL-terminated `path`.
            let path = unsafe { ptr::text(F, "path", path) }?;
            // SAFETY: the caller promises `options` is NULL or a
            // `perfabi_options`.
            let opts = match unsafe { options.as_ref() } {
                Some(o) => o.to_rust(F)?,
                None => Options::default(),
            };
            let seg = Segment::open_with(path, opts)?;
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            Ok(perfabi_segment { seg, id })
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_close() - unmap and free a segment.
/// @seg: a segment from perfabi_open(), or NULL (nothing happens).
///
/// Context: the thread using the segment. Handles looked up on it must
/// not be used with it afterwards (free them too); snapshots and DAMON
/// reads stay valid (they are copies).
///
/// # Safety
/// `seg` is NULL or a segment from perfabi_open(), not closed before.
#[no_mangle]
pub unsafe extern "C" fn perfabi_close(seg: *mut perfabi_segment) {
    // SAFETY: the caller gives back a segment of perfabi_open() once.
    unsafe { ptr::release("perfabi_close", seg) }
}

/// perfabi_nr_cpus() - the number of per-CPU values a read of one counter
/// fills: the size of the array perfabi_read() needs.
/// @seg: the segment.
///
/// Context: the thread using the segment. It can change when a writer
/// restarts with another CPU count (then perfabi_read() fails with
/// `PERFABI_E_BUFFER_TOO_SMALL` if the array is too small).
/// Return: the number of CPUs of the segment; 0 if `seg` is NULL.
///
/// # Safety
/// `seg` is NULL or an open segment.
#[no_mangle]
pub unsafe extern "C" fn perfabi_nr_cpus(seg: *const perfabi_segment) -> usize {
    const F: &str = "perfabi_nr_cpus";
    guard_value(F, 0, || {
        // SAFETY: the caller promises an open segment.
        Ok(unsafe { ptr::obj(F, "seg", seg) }?.seg.nr_cpus())
    })
}

/// perfabi_refresh() - look at the path and the writer now: map the
/// segment again if the file was replaced (a writer restarted), grew, was
/// truncated or had its header changed. Every call but perfabi_read() and
/// perfabi_family_read() does so by itself at most once a second; a loop
/// of those reads calls this from time to time to follow a restarted
/// writer.
/// @seg: the segment.
///
/// Context: the thread using the segment. Makes system calls (`stat`,
/// perhaps `open` and `mmap`).
/// Return: `PERFABI_OK`, or why the segment cannot be used now.
///
/// # Safety
/// `seg` is NULL or an open segment.
#[no_mangle]
pub unsafe extern "C" fn perfabi_refresh(seg: *mut perfabi_segment) -> perfabi_error {
    const F: &str = "perfabi_refresh";
    guard(F, || {
        // SAFETY: the caller promises an open segment, used by this thread.
        let s = unsafe { ptr::obj_mut(F, "seg", seg) }?;
        Ok(s.seg.refresh()?)
    })
}

/// What a reader knows about its writer (`perfabi_segment_info.liveness`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum perfabi_liveness {
    /// The writer's process runs (as the file's owner) and its heartbeat
    /// is recent.
    PERFABI_LIVENESS_ALIVE = 0,
    /// The kernel module writes the segment.
    PERFABI_LIVENESS_KERNEL = 1,
    /// The writer closed the segment; its values are final.
    PERFABI_LIVENESS_CLOSED = 2,
    /// No heartbeat for longer than allowed (`silent_for_ns`).
    PERFABI_LIVENESS_SILENT = 3,
    /// The writer's process is gone (or is not the one the header names).
    PERFABI_LIVENESS_DEAD = 4,
}

/// Where a segment was found (`perfabi_segment_info.origin`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum perfabi_origin {
    /// A regular file (a userspace writer's).
    PERFABI_ORIGIN_FILE = 0,
    /// The kernel module's device.
    PERFABI_ORIGIN_DEVICE = 1,
    /// The eBPF writer's frozen BPF map, pinned by root on bpffs.
    PERFABI_ORIGIN_BPF_MAP = 2,
}

/// A segment's header fields and what the reader knows of its writer
/// (perfabi_info()).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct perfabi_segment_info {
    /// ABI major version.
    pub abi_major: u16,
    /// ABI minor version.
    pub abi_minor: u16,
    /// Number of per-CPU blocks.
    pub nr_cpus: u32,
    /// Incarnation id: changes when a writer creates the segment again.
    pub epoch: u64,
    /// Metadata generation: changes when counters or families come or go.
    pub generation: u64,
    /// A metadata change is in progress.
    pub metadata_busy: bool,
    /// The writer's state.
    pub liveness: perfabi_liveness,
    /// Time since the last heartbeat, for `PERFABI_LIVENESS_SILENT` and
    /// `PERFABI_LIVENESS_DEAD`; else 0.
    pub silent_for_ns: u64,
    /// The writer's process id (0: the kernel).
    pub writer_pid: u64,
    /// The writer's start (`CLOCK_BOOTTIME`, ns).
    pub writer_start_ns: u64,
    /// The last heartbeat (`CLOCK_BOOTTIME`, ns).
    pub heartbeat_ns: u64,
    /// The heartbeat interval the writer promised (0: none).
    pub heartbeat_interval_ns: u64,
    /// The header's `flags` (bit 0: closed, bit 1: kernel).
    pub flags: u64,
    /// Instance table capacity.
    pub max_instances: u64,
    /// DAMON ring slots per CPU.
    pub damon_capacity: u64,
    /// The segment's size, bytes.
    pub segment_size: u64,
    /// Bytes mapped.
    pub mapped_bytes: u64,
    /// The owner (uid) of the file or device.
    pub owner_uid: u32,
    /// A file or the kernel module's device.
    pub origin: perfabi_origin,
}

/// perfabi_info() - the segment's header fields and its writer's state,
/// checked now (as perfabi_refresh() does).
/// @seg: the segment.
/// @out: receives the information.
///
/// Context: the thread using the segment. Makes system calls.
/// Return: `PERFABI_OK`, or why the segment cannot be read now. A gone
/// writer is not an error here: it is `out->liveness`.
///
/// # Safety
/// `seg` is NULL or an open segment; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_info(
    seg: *mut perfabi_segment,
    out: *mut perfabi_segment_info,
) -> perfabi_error {
    const F: &str = "perfabi_info";
    guard(F, || {
        // SAFETY: the caller promises an open segment, used by this thread.
        let s = unsafe { ptr::obj_mut(F, "seg", seg) }?;
        let out = ptr::out(F, "out", out)?;
        let i = s.seg.info()?;
        let h = i.header;
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let (liveness, silent_for_ns) = match i.liveness {
            Liveness::Alive => (perfabi_liveness::PERFABI_LIVENESS_ALIVE, 0),
            Liveness::Kernel => (perfabi_liveness::PERFABI_LIVENESS_KERNEL, 0),
            Liveness::Closed => (perfabi_liveness::PERFABI_LIVENESS_CLOSED, 0),
            Liveness::Silent { silent_for } => {
                (perfabi_liveness::PERFABI_LIVENESS_SILENT, ns(silent_for))
            }
            Liveness::Dead { silent_for } => {
                (perfabi_liveness::PERFABI_LIVENESS_DEAD, ns(silent_for))
            }
        };
        let info = perfabi_segment_info {
            abi_major: h.abi_major,
            abi_minor: h.abi_minor,
            nr_cpus: h.nr_cpus as u32,
            epoch: h.epoch,
            generation: h.generation,
            metadata_busy: h.metadata_busy,
            liveness,
            silent_for_ns,
            writer_pid: h.writer_pid,
            writer_start_ns: h.writer_start_ns,
            heartbeat_ns: h.heartbeat_ns,
            heartbeat_interval_ns: h.heartbeat_interval_ns,
            flags: h.flags,
            max_instances: h.max_instances as u64,
            damon_capacity: h.damon_capacity as u64,
            segment_size: h.segment_size as u64,
            mapped_bytes: i.mapped as u64,
            owner_uid: i.owner,
            origin: match i.origin {
                Origin::KernelDevice => perfabi_origin::PERFABI_ORIGIN_DEVICE,
                Origin::KernelMap => perfabi_origin::PERFABI_ORIGIN_BPF_MAP,
                Origin::File => perfabi_origin::PERFABI_ORIGIN_FILE,
            },
        };
        // SAFETY: `out` is writable (the caller's promise).
        unsafe { ptr::put(out, info) };
        Ok(())
    })
}

/// The reader's segment behind `p`, checked to be open, for `func`.
///
/// # Safety
/// `p` is NULL or an open segment used by this thread only.
#[inline]
pub(crate) unsafe fn segment<'a>(
    func: &str,
    p: *mut perfabi_segment,
) -> Result<&'a mut perfabi_segment, Failure> {
    // SAFETY: the caller's promise, forwarded.
    unsafe { ptr::obj_mut(func, "seg", p) }
}

// A segment may move between threads (one at a time).
const _: () = {
    const fn send<T: Send>() {}
    send::<perfabi_segment>();
};

#[cfg(test)]
mod default_path_tests {
    use super::*;

    #[test]
    fn the_default_path_is_the_readers_and_is_cut_to_fit() {
        let want = perfabi_reader::default_path();
        let want = want.to_str().unwrap();
        let mut buf = [0x55 as c_char; 64];
        // SAFETY: a NULL buffer is allowed; `buf` has 64 bytes.
        let n = unsafe { perfabi_default_path(std::ptr::null_mut(), 0) };
        assert_eq!(n, want.len());
        // SAFETY: as above.
        let m = unsafe { perfabi_default_path(buf.as_mut_ptr(), 4) };
        assert_eq!(m, want.len());
        // SAFETY: the function wrote a NUL within the 4 bytes.
        let cut = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(cut.to_str().unwrap(), &want[..3]);
        assert_eq!(buf[4], 0x55, "nothing written past len");
    }
}
