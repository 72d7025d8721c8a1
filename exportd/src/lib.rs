//! perfabi-exportd's parts, one concern each; `main.rs` parses the
//! arguments and runs them.
//!
//! * [`procfs`]: parsers of the `/proc` text the exporter publishes;
//! * [`host`]: the host statistics source (per-CPU times, softirqs, vmstat);
//! * [`damon`]: the DAMON sources (tracepoint, sysfs, replay of a record)
//!   and the exporter's own counters of what it published;
//! * [`lock`]: one daemon per segment path.
#![forbid(unsafe_code)]
#![cfg(target_os = "linux")]

pub mod damon;
pub mod host;
pub mod lock;
pub mod procfs;
