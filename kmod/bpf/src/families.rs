//! The families the BPF writer publishes: the scheduler source of
//! `perfabi_sources.ko` (`kmod/perfabi_src_main.c`'s table: the same names,
//! help, kinds, units and buckets).
//!
//! This is the one list of the BPF writer. It is to come from the shared
//! definition of the families that branch `families` introduces (one table,
//! generated into C for the module and the BPF programs, used by
//! exportd); the lead reconciles the two at merge.

use perfabi::{Buckets, FamilySpec, Kind, Unit};

/// Exponent of the first bound of the latency histograms: 2^10 ns
/// (`SRC_HIST_LOG2_FIRST` of `kmod/perfabi_src.h`).
pub const HIST_LOG2_FIRST: u32 = 10;

/// Buckets of the latency histograms, `+Inf` included (`SRC_HIST_BUCKETS`).
pub const HIST_BUCKETS: u32 = 24;

/// The families, in the order of their family table slots. Each has one
/// member with an empty instance (no dimension).
pub fn specs() -> [FamilySpec; 4] {
    let counter =
        |name: &str, help: &str| FamilySpec::new(name, help, "", Kind::Counter, Unit::COUNT);
    [
        counter("kernel.all.pswitch", "Context switches"),
        counter("kernel.sched.wakeups", "Task wakeups, new tasks included"),
        counter("kernel.sched.migrations", "Task migrations between CPUs"),
        FamilySpec::histogram(
            "kernel.sched.wakeup_latency",
            "Time from a task's wakeup to its switch onto a CPU",
            "",
            Unit::NS,
            Buckets::Log2 {
                first: HIST_LOG2_FIRST,
                n: HIST_BUCKETS,
            },
        ),
    ]
}

/// Indexes into [`specs`], as the BPF programs' read-only globals name
/// them (`w_pswitch`, ...).
pub const PSWITCH: usize = 0;
/// `kernel.sched.wakeups`.
pub const WAKEUPS: usize = 1;
/// `kernel.sched.migrations`.
pub const MIGRATIONS: usize = 2;
/// `kernel.sched.wakeup_latency`.
pub const WAKEUP_LATENCY: usize = 3;
