//! perfabi's eBPF writer: BPF programs (C, CO-RE, `src/bpf/`) that write a
//! perfabi segment held in a `BPF_F_MMAPABLE` array map, frozen and pinned
//! in bpffs (`spec/PERFABI.md` §9.1), and the loader that lays the segment
//! out, loads, attaches and pins them (`perfabi-bpfd`).
//!
//! * [`families`]: the families published (the one definition's);
//! * [`image`]: the segment laid out with the core's geometry and encoders;
//! * [`groups`]: the groups with a dimension and how their instances are
//!   found ([`block`]: the disks, [`net`]: the network devices, [`irq`]:
//!   the IRQs);
//! * [`damon`]: which form of `damon:damon_aggregated` the kernel has;
//! * [`tables`]: the member and value tables of instances that come and go;
//! * [`system`]: what the kernel must offer (BTF, capabilities, lockdown,
//!   bpffs), checked before loading;
//! * [`pin`]: the pin's folder, lock, mode and atomic placement;
//! * [`control`]: the `BPF_PROG_TYPE_SYSCALL` program that changes the
//!   header and tables after freezing (heartbeat, close, instances);
//! * [`writer`]: the writer's life, [`Running`].
#![cfg(target_os = "linux")]

pub mod block;
pub mod control;
pub mod damon;
pub mod error;
pub mod families;
pub mod groups;
pub mod image;
pub mod irq;
pub mod net;
pub mod pin;
pub mod system;
pub mod tables;
pub mod writer;

pub use error::Error;
pub use writer::{Attach, Flavour, Options, Running, Stats};

/// The libbpf-rs skeleton generated from `src/bpf/perfabi.bpf.c` by
/// `build.rs`.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/perfabi.skel.rs"));
}
