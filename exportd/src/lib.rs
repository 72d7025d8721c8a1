//! perfabi-exportd's parts, one concern each; `main.rs` parses the
//! arguments and runs them.
//!
//! * [`procfs`]: parsers of the `/proc` text the exporter publishes;
//! * [`collectors`]: the collector registry's types and the selection
//!   (`--collector.NAME`); [`filter`]: include and exclude patterns;
//! * [`sources`]: every collector together (the registry, and the table
//!   of what each publishes), of which [`host`] (per-CPU times, context
//!   switches, softirqs, vmstat), [`disks`], [`netdev`], [`interrupts`],
//!   [`pressure`], [`meminfo`], [`filesystem`] (with [`mountinfo`] and
//!   [`statfs`]), [`loadavg`], [`netstat`] and [`cgroups`], and
//!   [`proc_source`], what they share;
//! * [`follow`]: instances that come and go with the devices;
//! * [`damon`]: the DAMON sources (tracepoint, sysfs, replay of a record)
//!   and the exporter's own counters of what it published;
//! * [`lock`]: one daemon per segment path;
//! * [`cpu`]: the daemon's own CPU use, from `/proc/self/stat`;
//! * [`stop`]: the stop flag, and sleeps that end when it is set.
//!
//! The families it shares with the kernel sources are defined once, in
//! `perfabi-families` (kmod/families): the sources register those specs.
#![forbid(unsafe_code)]
#![cfg(target_os = "linux")]

pub mod cgroups;
pub mod collectors;
pub mod cpu;
pub mod damon;
pub mod disks;
pub mod filesystem;
pub mod filter;
pub mod follow;
pub mod host;
pub mod interrupts;
pub mod loadavg;
pub mod lock;
pub mod meminfo;
pub mod mountinfo;
pub mod netdev;
pub mod netstat;
pub mod pressure;
pub mod proc_source;
pub mod procfs;
pub mod sources;
pub mod statfs;
pub mod stop;
