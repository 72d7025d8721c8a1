//! perfabi-cat's DAMON views.
//!
//! * [`regions`]: the regions of the latest aggregations (`--damon`).
//! * Over time, from a live segment or a record: [`timeline`] keeps the
//!   aggregations of each (monitor, target) in time order, [`grid`] turns
//!   them into a time × address grid of access frequency (the heatmap),
//!   [`wss`] into the working set size over time and its percentiles, and
//!   [`range`] reads the `--address-range` and `--time-range` a person
//!   types.
//! * [`plot`] draws the heatmap and the working set size as SVG or PNG.

pub mod grid;
pub mod plot;
pub mod range;
pub mod regions;
pub mod timeline;
pub mod wss;

pub use regions::report;
