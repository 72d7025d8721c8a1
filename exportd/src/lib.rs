//! perfabi-exportd's parts, one concern each; `main.rs` parses the
//! arguments and runs them.
//!
//! * [`procfs`]: parsers of the `/proc` text the exporter publishes;
//! * [`catalog`]: the README's table of the families both writers publish,
//!   parsed, for tests that compare a writer with it;
//! * [`host`]: the host statistics source (per-CPU times, softirqs, vmstat);
//! * [`damon`]: the DAMON sources (tracepoint, sysfs, replay of a record)
//!   and the exporter's own counters of what it published;
//! * [`lock`]: one daemon per segment path.
#![forbid(unsafe_code)]
#![cfg(target_os = "linux")]

pub mod catalog;
pub mod damon;
pub mod host;
pub mod lock;
pub mod procfs;
