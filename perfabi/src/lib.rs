//! perfabi: a counter ABI for very cheap, very frequent observation — the
//! core.
//!
//! A writer lays out one shared segment — a versioned header, an instance
//! table, and page-aligned per-CPU blocks of 64-bit counters and DAMON region
//! records behind an update sequence word — and any number of readers read it
//! with plain memory loads. The normative contract is `spec/PERFABI.md`.
//!
//! This crate is the part every writer and reader shares, with no operating
//! system in it: `no_std` (it needs `alloc`) and free of `unsafe`.
//!
//! * [`layout`]: the byte layout (mirrored by `spec/perfabi.h`);
//! * [`geometry`]: where a writer puts every section ([`Geometry::sizes`]);
//! * [`validate()`]: every offset and length checked against the mapped size;
//! * [`protocol`]: the sequence and generation protocol, written once against
//!   a private atomics facade so that loom checks the code that runs;
//! * [`view`]: reading a live segment through that protocol;
//! * [`damon`]: the one DAMON aggregation type, and the rule that rebuilds
//!   complete aggregations from a segment's records;
//! * [`family`]: metric families and their instances (ABI 1.1), and the one
//!   view readers present; [`mod@unit`]: units with dimension and scale;
//! * [`name`]: the naming rules; [`trust`]: what a reader may believe about
//!   the writer; [`error`]: every error, with its stable code;
//! * [`text`]: untrusted bytes escaped for a log line or a terminal;
//! * [`dead`]: reading a segment whose writer is gone for sure (a block its
//!   death left busy).
//!
//! Shared memory reaches this crate as a slice of [`Word`]s. Making that
//! slice — opening, mapping and guarding a segment file — and the userspace
//! writer live in `perfabi-shm` (`perfabi/shm/`).
#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

extern crate alloc;

pub mod damon;
pub mod dead;
pub mod entry;
pub mod error;
pub mod family;
pub mod geometry;
pub mod layout;
pub mod name;
pub mod protocol;
mod sync;
pub mod text;
pub mod trust;
pub mod unit;
pub mod validate;
pub mod values;
pub mod view;

pub use error::{EntryField, Error, FamilyField, MemberField, Named, Section};
pub use family::{Buckets, Family, FamilySpec, Histogram, HistogramPlace, Member, Reading};
pub use geometry::{Geometry, Sizes, WriterIdentity};
pub use layout::{GaugeMode, Kind, Semantics, Unit, ValueType};
pub use validate::{validate, validate_header, validate_prefix, FamilyTables, Layout};
pub use values::{Blocks, Values};
pub use view::{
    load_family_header, load_header, CopyWords, Info, Instance, InstanceTable, SegmentView,
    Snapshot,
};

/// One 64-bit word of a segment as the core reads and writes it: an
/// `AtomicU64` (`core::sync::atomic::AtomicU64`; loom's under `cfg(loom)`).
/// Every access to shared memory is an atomic access to a `Word`
/// (`spec/PERFABI.md` §7), so a segment is a `&[Word]`.
pub type Word = sync::AtomicU64;
