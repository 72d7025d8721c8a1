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
//! * [`palette`]: the character ramp and colour map of access frequency
//!   that every view draws with.
//! * The views over time (`--heatmap`, `--wss`): [`options`] checks the
//!   command line, [`collect`] fills a window from a live segment,
//!   [`section`] resolves what each (monitor, target) shows, [`term`]
//!   draws a heatmap and [`wss_text`] a working set as text (on the axes
//!   of [`axis`]), [`report`] puts the sections together as text or JSON
//!   and [`view`] runs it all.

pub mod axis;
pub mod collect;
pub mod grid;
pub mod options;
pub mod palette;
pub mod plot;
pub mod range;
pub mod regions;
pub mod report;
pub mod section;
pub mod term;
pub mod timeline;
pub mod view;
pub mod wss;
pub mod wss_text;

pub use regions::report;
