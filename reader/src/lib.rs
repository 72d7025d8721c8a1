//! The perfabi reader: map a segment read-only and read any counter at memory
//! speed — no system call, no copy through the kernel, no lock — and never a
//! torn value, whatever the writer does.
//!
//! ```no_run
//! use perfabi_reader::Segment;
//!
//! let mut seg = Segment::open("/dev/shm/myapp.perfabi")?;
//! let rx = seg.counter("net.rx_bytes")?;
//! println!("{} bytes ({:?} per CPU)", rx.total, rx.per_cpu);
//! let snap = seg.snapshot()?; // every counter, one generation
//!
//! // Metric families (ABI 1.1): instances, units, help, labels; a 1.0
//! // counter is a family of one instance.
//! let mut lat = seg.family_handle("disk.latency")?;
//! let mut values = perfabi_reader::FamilyValues::default();
//! seg.read_family(&mut lat, &mut values)?; // one family, one generation
//! for (k, m) in lat.family().members.iter().enumerate() {
//!     println!("{}: {:?}", m.instance, values.reading(lat.family(), k));
//! }
//! # Ok::<(), perfabi_reader::Error>(())
//! ```
//!
//! * Every read goes through `perfabi::protocol`: 8-byte relaxed atomic loads
//!   and acquire fences on a read-only mapping, never a reference to shared
//!   data.
//! * A writer that restarts (new file or new epoch at the same path) is
//!   followed without re-opening; a grown file is mapped again.
//! * A busy writer is retried with back-off for [`Options::busy_timeout`];
//!   then bounded retries give [`Error::Busy`]; a dead or silent writer gives
//!   [`Error::Stale`]; a clean close gives [`Error::Closed`].
//! * If the file is truncated under the reader, the process survives
//!   (a SIGBUS guard) and the read reports [`Error::Truncated`].
//! * Paths are untrusted (`spec/PERFABI.md` §11): no symbolic link is
//!   followed, nothing blocks in `open`, only a regular file of a trusted
//!   owner ([`Trust`]) or the kernel module's device is read, and a reader's
//!   cost is bounded by what the writer really allocated.
//!
//! Where things live: the protocol, validation and decoding are the core's
//! (`perfabi`); opening, mapping and SIGBUS-guarding a segment file are
//! `perfabi-shm`'s ([`perfabi_shm::SegmentMap`]); this crate is the policy
//! on top — trust, liveness, retries, following a writer that restarts —
//! and contains no `unsafe` code.
#![forbid(unsafe_code)]

pub mod decimal;
pub mod directory;
mod error;
pub mod exposition;
pub mod liveness;
mod segment;
mod trust;
pub mod view;

pub use error::Error;
pub use liveness::Liveness;
pub use perfabi::damon::{Aggregation, DamonRead, Intervals, Region};
pub use perfabi::trust::Origin;
pub use perfabi::{Buckets, Family, Histogram, Kind, Member, Reading, Unit};
pub use perfabi::{Info, Instance, Semantics, Snapshot, ValueType};
pub use segment::{
    Counter, FamilyHandle, FamilyValues, Handle, Options, ReadStats, Segment, SegmentInfo,
    DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_SEGMENT_BYTES,
};
pub use trust::Trust;

/// The path `perfabi-cat` and the PCP agent read when given none:
/// `$PERFABI_SEGMENT` if set, else `/dev/perfabi` if the kernel module is
/// loaded, else [`DEFAULT_BPF_PIN`] if the eBPF writer pinned its segment
/// there, else `/dev/shm/perfabi.seg` if it exists (where
/// `perfabi-exportd` writes), else the default segment directory
/// ([`perfabi_shm::directory::default_dir`], where programs' own writers
/// put their segments) if it exists, else `/dev/shm/perfabi.seg`. A front
/// end given a directory reads it as one ([`directory::Directory`]).
pub fn default_path() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("PERFABI_SEGMENT") {
        return p.into();
    }
    let dev = std::path::Path::new("/dev/perfabi");
    if dev.exists() {
        return dev.to_path_buf();
    }
    let pin = std::path::Path::new(DEFAULT_BPF_PIN);
    if pin.exists() {
        return pin.to_path_buf();
    }
    let exportd = std::path::PathBuf::from("/dev/shm/perfabi.seg");
    if exportd.exists() {
        return exportd;
    }
    let dir = perfabi_shm::directory::default_dir();
    if dir.is_dir() {
        return dir;
    }
    exportd
}

/// Where the eBPF writer (`perfabi-bpfd`) pins its segment by default
/// (`spec/PERFABI.md` §9.1).
pub const DEFAULT_BPF_PIN: &str = "/sys/fs/bpf/perfabi/kernel";
