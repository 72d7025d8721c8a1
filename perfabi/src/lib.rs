//! perfabi: a counter ABI for very cheap, very frequent observation.
//!
//! A writer lays out one shared segment — a versioned header, an instance
//! table, and page-aligned per-CPU blocks of 64-bit counters and DAMON region
//! records behind an update sequence word — and any number of readers read it
//! with plain memory loads. The normative contract is `spec/PERFABI.md`.
//!
//! * [`layout`]: the byte layout (mirrored by `spec/perfabi.h`);
//! * [`validate()`]: every offset and length checked against the mapped size;
//! * [`protocol`]: the sequence and generation protocol, written once against
//!   the [`sync`] facade so that loom checks the code that runs;
//! * [`view`]: reading a live segment through that protocol;
//! * [`damon`]: rebuilding complete DAMON aggregations;
//! * [`trust`]: what a reader may believe about the writer;
//! * `writer` (feature `std`, Linux): the userspace segment writer.
//!
//! The core is `#![no_std]` (it needs `alloc`).
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod damon;
pub mod error;
pub mod layout;
pub mod name;
pub mod protocol;
pub mod sync;
pub mod trust;
pub mod validate;
pub mod view;

#[cfg(all(feature = "std", target_os = "linux", not(loom)))]
pub mod host;
#[cfg(all(feature = "std", not(loom)))]
pub mod record;
#[cfg(all(feature = "std", target_os = "linux", not(loom)))]
pub mod safe_open;
#[cfg(all(feature = "std", target_os = "linux", not(loom)))]
pub mod sigbus;
#[cfg(all(feature = "std", target_os = "linux", not(loom)))]
pub mod writer;

pub use error::{EntryField, Error, Section};
pub use layout::{Semantics, ValueType};
pub use validate::{validate, validate_header, Geometry, Layout, WriterIdentity};
pub use view::{Info, Instance, SegmentView, Snapshot};
