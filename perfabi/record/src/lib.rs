//! perfabi's record formats.
//!
//! * [`recording`]: the recording format `perfabi-cat --record` writes,
//!   timestamped snapshots of a segment as JSON lines (its items are
//!   re-exported here: [`Snapshot`], [`to_line`], [`aggregations`]);
//! * [`damon`]: DAMON records in any format the exporter replays and
//!   perfabi-cat draws (trace text, damo's record files, recordings), read
//!   into one [`damon::Record`].
#![forbid(unsafe_code)]

pub mod damon;
pub mod recording;

pub use recording::{aggregations, to_line, Snapshot};
