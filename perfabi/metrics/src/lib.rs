//! A [`metrics`] 0.24 recorder that writes perfabi: a program that uses
//! `metrics::counter!`, `gauge!` and `histogram!` writes a perfabi segment
//! after one line of setup, and every perfabi reader sees its metrics.
//!
//! ```no_run
//! perfabi_metrics::install()?;
//! metrics::describe_histogram!("http.latency", metrics::Unit::Seconds, "Request latency");
//! let requests = metrics::counter!("http.requests", "method" => "GET");
//! requests.increment(1); // one perfabi Counter::adjust: no lookup, no lock
//! metrics::histogram!("http.latency").record(0.0031);
//! # Ok::<(), perfabi_metrics::BuildError>(())
//! ```
//!
//! The rules, in one place each:
//!
//! * names and labels → families and members: [`series`];
//! * units, and how a gauge's or histogram's `f64` becomes perfabi's
//!   integer: [`units`] (times in nanoseconds, sizes in bytes, rounded to
//!   the nearest);
//! * what the recorder does when perfabi refuses something (the `metrics`
//!   API returns no errors): it says so once on stderr and counts the
//!   dropped updates in its own family [`DROPPED`], by [`Reason`]; it
//!   never panics.
//!
//! Descriptions (`describe_counter!` …) give a family its help and unit
//! when they come before the metric's first use; a later, different one
//! is dropped (reason `description`). Counters: `increment` adds, `absolute` raises
//! the total to the largest value given. Gauges: `increment`, `decrement`
//! and `set` change an `f64` kept by the handle, and the perfabi member
//! holds it scaled and rounded. Histograms: `record` is one perfabi
//! observation into `LOG2` buckets, or the explicit ones given to
//! [`PerfabiBuilder::buckets_for_metric`]; a negative value is dropped
//! (reason `value`).

#![forbid(unsafe_code)]

mod builder;
mod dropped;
mod handles;
mod recorder;
pub mod series;
pub mod units;

pub use builder::{BuildError, PerfabiBuilder};
pub use dropped::{Reason, DROPPED};
pub use recorder::PerfabiRecorder;

/// Installs a recorder with the defaults of [`PerfabiBuilder::new`] as the
/// process's global `metrics` recorder; returns its writer.
pub fn install() -> Result<&'static perfabi_shm::writer::Writer, BuildError> {
    PerfabiBuilder::new().install()
}
