//! perfabi's record formats.
//!
//! * [`recording`]: the recording format `perfabi-cat --record` writes,
//!   timestamped snapshots of a segment as JSON lines (its items are
//!   re-exported here: [`Snapshot`], [`to_line`], [`aggregations`]).
#![forbid(unsafe_code)]

pub mod recording;

pub use recording::{aggregations, to_line, Snapshot};
