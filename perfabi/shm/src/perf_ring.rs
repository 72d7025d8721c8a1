//! A tracepoint opened with `perf_event_open` on every CPU, and its ring
//! buffers read the way `include/uapi/linux/perf_event.h` spells out: load
//! `data_head` with acquire, read the records between our tail and the
//! head, then store `data_tail` with release so the kernel may reuse them.
//!
//! The mapping is shared with the kernel, which keeps writing past the
//! head while we read, so every word of it is read with an atomic load
//! (records are 8-byte aligned and sized): there is no data race.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
const FLAG_WATERMARK: u64 = 1 << 14;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// Offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes).
#[repr(C)]
#[derive(Default)]
struct Attr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_watermark: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}
const _: () = assert!(std::mem::size_of::<Attr>() == 112);

/// What a ring buffer held.
#[derive(Debug, PartialEq, Eq)]
pub enum Record {
    /// One tracepoint hit.
    Sample {
        /// CLOCK_MONOTONIC nanoseconds.
        ts_ns: u64,
        /// The thread that hit the tracepoint.
        tid: u32,
        /// The event's raw record (decode it with its `format` file).
        raw: Vec<u8>,
    },
    /// The kernel dropped this many records: the buffer was full.
    Lost(u64),
}

/// One CPU's event and its mapped ring buffer.
pub struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
    tail: u64,
}

// SAFETY: the mapping is owned by the Ring and only touched through
// atomics; nothing ties it to the thread that created it.
unsafe impl Send for Ring {}

impl Ring {
    /// Opens tracepoint `id` on `cpu` (all tasks) with `1 << pages_log2`
    /// data pages, timestamps on CLOCK_MONOTONIC.
    pub fn open(id: u64, cpu: u32, pages_log2: u32) -> io::Result<Ring> {
        let page = rustix::param::page_size();
        let data = page << pages_log2;
        let attr = Attr {
            type_: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<Attr>() as u32,
            config: id,
            sample_period: 1,
            sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_RAW,
            flags: FLAG_WATERMARK | FLAG_USE_CLOCKID,
            wakeup_watermark: (data / 4) as u32,
            clockid: libc::CLOCK_MONOTONIC,
            ..Attr::default()
        };
        // SAFETY: perf_event_open reads `attr` (a valid perf_event_attr of
        // the size it says) and returns a new descriptor or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const Attr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by the kernel and is owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let len = page + data;
        // SAFETY: a new shared mapping of the event's buffer; the kernel
        // sizes it (1 + 2^n pages). Writable so that data_tail can be set.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = Ring {
            fd,
            base: base.cast(),
            len,
            data_offset: page,
            data_size: data,
            tail: 0,
        };
        // Kernels since 4.1 say where the data area is; older ones put it
        // right after the first page.
        let (off, size) = (ring.meta(DATA_OFFSET), ring.meta(DATA_SIZE));
        if size != 0 {
            if !(off as usize).is_multiple_of(8)
                || (off + size) as usize > len
                || !size.is_power_of_two()
            {
                return Err(io::Error::other(format!(
                    "perf mmap page: data area {off}+{size} outside the {len}-byte mapping"
                )));
            }
            ring.data_offset = off as usize;
            ring.data_size = size as usize;
        }
        ring.tail = ring.meta(DATA_TAIL);
        Ok(ring)
    }

    /// The event's descriptor, for poll().
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: offset is 8-aligned and inside the live mapping (page
        // aligned, `len` bytes), which outlives &self; the kernel writes it
        // concurrently, so it is only ever accessed as an atomic.
        unsafe { &*self.base.add(offset).cast::<AtomicU64>() }
    }

    fn meta(&self, offset: usize) -> u64 {
        self.word(offset).load(Ordering::Acquire)
    }

    /// Reads the 8-byte-aligned word at `pos` of the data area (wrapping).
    fn data_word(&self, pos: u64) -> u64 {
        let off = (pos as usize) & (self.data_size - 1);
        self.word(self.data_offset + off).load(Ordering::Relaxed)
    }

    /// Hands every record written so far to `f`, then releases them to the
    /// kernel. Returns the number of records.
    pub fn drain(&mut self, f: &mut dyn FnMut(Record)) -> io::Result<usize> {
        let head = self.meta(DATA_HEAD);
        let mut n = 0;
        let mut words = Vec::new();
        while self.tail < head {
            let hdr = self.data_word(self.tail);
            let (type_, size) = (hdr as u32, (hdr >> 48) & 0xffff);
            if size < 8 || size % 8 != 0 || self.tail + size > head {
                // A record we cannot walk past: give the rest back.
                self.tail = head;
                self.word(DATA_TAIL).store(head, Ordering::Release);
                return Err(io::Error::other(format!(
                    "perf ring buffer: malformed record header {hdr:#x}"
                )));
            }
            words.clear();
            words.extend((1..size / 8).map(|i| self.data_word(self.tail + 8 * i)));
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
            match type_ {
                PERF_RECORD_SAMPLE if bytes.len() >= 20 => {
                    let u32_at = |o: usize| u32::from_ne_bytes(bytes[o..o + 4].try_into().unwrap());
                    let tid = u32_at(4);
                    let ts_ns = u64::from_ne_bytes(bytes[8..16].try_into().unwrap());
                    let raw_len = u32_at(16) as usize;
                    let raw = bytes.get(20..20 + raw_len).unwrap_or(&[]).to_vec();
                    f(Record::Sample { ts_ns, tid, raw });
                }
                PERF_RECORD_LOST if bytes.len() >= 16 => {
                    f(Record::Lost(u64::from_ne_bytes(
                        bytes[8..16].try_into().unwrap(),
                    )));
                }
                _ => {}
            }
            n += 1;
            self.tail += size;
        }
        self.word(DATA_TAIL).store(self.tail, Ordering::Release);
        Ok(n)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/len is the mapping made in open(), unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// Opens tracepoint `id` on every CPU of `cpus` that is online.
pub fn open_all(id: u64, cpus: &[u32], pages_log2: u32) -> Result<Vec<Ring>, String> {
    let mut rings = Vec::new();
    for &cpu in cpus {
        match Ring::open(id, cpu, pages_log2) {
            Ok(r) => rings.push(r),
            // An offline CPU.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "?".into());
                return Err(format!(
                    "perf_event_open on the tracepoint (CPU {cpu}): {e}: run as root or with CAP_PERFMON \
                     (kernel.perf_event_paranoid is {paranoid})"
                ));
            }
            Err(e) => {
                return Err(format!(
                    "perf_event_open on the tracepoint (CPU {cpu}): {e}"
                ))
            }
        }
    }
    if rings.is_empty() {
        return Err("perf_event_open: no online CPU accepted the event".into());
    }
    Ok(rings)
}
