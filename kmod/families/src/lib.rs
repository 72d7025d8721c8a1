//! The families the kernel-side writers publish (README.md, "Families out
//! of the box"), defined once.
//!
//! * [`table`]: the definition: each family's name, help, kind, unit,
//!   dimension and buckets, its subsystem and which writers publish it.
//! * [`c_header`]: the C header generated from it,
//!   `kmod/include/perfabi_families.h`, checked in and included by the
//!   kernel module (its descriptor table) and the eBPF programs (family
//!   indices, bucket layout). `perfabi-families --check` (and this
//!   crate's tests) fail when it is not current; `perfabi-families
//!   --write` regenerates it.
//! * [`readme`]: the README's table, parsed, and checked against the
//!   definition.
//!
//! `perfabi-exportd` registers the families it shares with the kernel
//! sources from [`table`] ([`Family::spec`]).
//!
//! ```
//! use perfabi_families::table::{self, Writer};
//! let f = table::find("disk.dev.request_latency").unwrap();
//! assert_eq!(f.kind, perfabi::Kind::Histogram);
//! assert!(f.published_by(Writer::Module) && !f.published_by(Writer::Exportd));
//! assert_eq!(table::DISK_READ.spec().dimension, "device");
//! ```

pub mod c_header;
pub mod readme;
pub mod table;

pub use table::{Family, Group, Writer, FAMILIES};
