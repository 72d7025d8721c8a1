//! perfabi-cat's DAMON views.
//!
//! * [`regions`]: the regions of the latest aggregations (`--damon`).
//! * Over time, from a live segment or a record: [`timeline`] keeps the
//!   aggregations of each (monitor, target) in time order, [`grid`] turns
//!   them into a time × address grid of access frequency (the heatmap),
//!   [`wss`] into the working set size over time and its percentiles, and
//!   [`range`] reads the `--address-range` and `--time-range` a person
//!   types.
//! * [`palette`]: the character ramp and colour map of access frequency
//!   that every view draws with.
//! * [`plot`] draws the heatmap and the working set size as SVG or PNG.
//! * The views over time (`--heatmap`, `--wss`): [`options`] checks the
//!   command line, [`collect`] fills a window from a live segment,
//!   [`section`] resolves what each (monitor, target) shows, [`term`]
//!   draws a heatmap and [`wss_text`] a working set as text (on the axes
//!   of [`axis`]), [`report`](mod@report) puts the sections together as
//!   text or JSON, [`layout`] sizes them and [`draw`] draws a window's
//!   report (or its image); [`view`] runs it all, [`watch`] with
//!   `--watch`, and [`problem`] says why it could not.

pub mod axis;
pub mod collect;
pub mod draw;
pub mod grid;
pub mod layout;
pub mod options;
pub mod palette;
pub mod plot;
pub mod problem;
pub mod range;
pub mod regions;
pub mod report;
pub mod section;
pub mod term;
pub mod timeline;
pub mod view;
pub mod watch;
pub mod wss;
pub mod wss_text;

pub use regions::report;
