//! perfabi shared memory: everything that touches a segment's memory or its
//! file, and the userspace writer.
//!
//! The core crate (`perfabi`) reads and writes a segment as a safe slice of
//! atomic words ([`perfabi::Word`]) and knows nothing of files. This crate
//! makes that slice:
//!
//! * [`safe_open`]: opening paths in world-writable folders without
//!   following links or blocking, and checking type and owner;
//! * `mapping`: `Mapping`, the one owner of a mapped segment (the file,
//!   the mapping and its SIGBUS guard), used by readers and writers alike.
//!   It stays private: a writable mapping's words reach users only through
//!   the writer, a read-only one's only through [`SegmentMap::view`] (an
//!   atomic store to read-only memory would fault);
//! * [`directory`]: segment directories (the default one, file names,
//!   what a reader lists), shared by writers and readers;
//! * [`bpf_pin`]: opening a segment held in a frozen BPF map pinned in
//!   bpffs (the eBPF writer's), with the checks that make it trusted;
//! * [`segment_map`]: a reader's validated, read-only mapping of a segment,
//!   whose cost is bounded by what the writer really allocated;
//! * [`pair_loads`]: copying runs of value words with one 16-byte atomic
//!   load per aligned pair, where the processor guarantees those;
//! * [`sigbus`]: surviving a truncated file;
//! * [`writer`]: the userspace segment writer (rseq per-CPU counters, the
//!   heartbeat, repair of a damaged file);
//! * [`host`]: the heartbeat clock, process start times, possible CPUs;
//! * [`perf_ring`]: the kernel's perf ring buffer (another shared mapping),
//!   read the way `perf_event.h` spells out.
//!
//! All `unsafe` code of the workspace outside `kmod/` and the PCP FFI lives
//! in this crate, each block with a `SAFETY` note.
#![cfg(target_os = "linux")]

pub mod bpf_pin;
pub mod directory;
pub mod host;
mod mapping;
pub mod pair_loads;
pub mod perf_ring;
pub mod safe_open;
pub mod segment_map;
pub mod sigbus;
pub mod writer;

pub use segment_map::{MapError, SegmentMap};
