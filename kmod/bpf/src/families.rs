//! The families the BPF writer publishes today: the scheduler group of the
//! one definition (`perfabi_families`, `kmod/families`), the same names,
//! help, kinds, units and buckets as `perfabi_sources.ko`'s. The block,
//! network and IRQ groups, which the definition also gives this writer
//! (README's table: "planned"), are not written yet.

use perfabi::FamilySpec;
use perfabi_families::table::{
    Family, Writer, SCHED_LATENCY, SCHED_MIGRATIONS, SCHED_PSWITCH, SCHED_WAKEUPS,
};

/// Exponent of the first bound of the latency histograms (the definition's
/// `HIST_NS`: 2^10 ns).
pub const HIST_LOG2_FIRST: u32 = perfabi_families::table::HIST_NS.first;

/// Buckets of the latency histograms, `+Inf` included (`HIST_NS`).
pub const HIST_BUCKETS: u32 = perfabi_families::table::HIST_NS.n;

/// The families, in the order of their family table slots (each has one
/// member with an empty instance: no dimension).
pub const FAMILIES: [&Family; 4] = [
    &SCHED_PSWITCH,
    &SCHED_WAKEUPS,
    &SCHED_MIGRATIONS,
    &SCHED_LATENCY,
];

/// Their specs, as the segment's family table holds them.
pub fn specs() -> [FamilySpec; 4] {
    FAMILIES.map(|f| {
        debug_assert!(f.published_by(Writer::Bpf), "{}", f.name);
        f.spec()
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_here_is_one_the_definition_gives_this_writer() {
        for f in FAMILIES {
            assert!(f.published_by(Writer::Bpf), "{}", f.name);
        }
        assert_eq!(FAMILIES[PSWITCH].name, "kernel.all.pswitch");
        assert_eq!(FAMILIES[WAKEUPS].name, "kernel.sched.wakeups");
        assert_eq!(FAMILIES[MIGRATIONS].name, "kernel.sched.migrations");
        assert_eq!(FAMILIES[WAKEUP_LATENCY].name, "kernel.sched.wakeup_latency");
    }
}
