//! The families the BPF writer publishes: every family of the one
//! definition (`perfabi_families`, `kmod/families`) that names this
//! writer, with the same names, help, kinds, units and buckets as
//! `perfabi_sources.ko`'s. Family slot `i` of the segment is
//! [`FAMILIES`]`[i]`.

use perfabi_families::table::{self, Family, Group, Writer};

/// Every family this writer publishes, in the definition's order: their
/// family table slots.
pub static FAMILIES: std::sync::LazyLock<Vec<&'static Family>> =
    std::sync::LazyLock::new(|| table::published_by(Writer::Bpf).collect());

/// The scheduler group's families (no dimension, one member each), as
/// indexes into [`FAMILIES`].
pub static SCHED: std::sync::LazyLock<Vec<usize>> = std::sync::LazyLock::new(|| {
    FAMILIES
        .iter()
        .enumerate()
        .filter(|(_, f)| f.group == Group::Sched)
        .map(|(i, _)| i)
        .collect()
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_publishes_every_group_and_the_scheduler_has_no_dimension() {
        assert_eq!(FAMILIES.len(), table::FAMILIES.len());
        let sched: Vec<&str> = SCHED.iter().map(|&i| FAMILIES[i].name).collect();
        assert_eq!(
            sched,
            [
                "kernel.all.pswitch",
                "kernel.sched.wakeups",
                "kernel.sched.migrations",
                "kernel.sched.wakeup_latency"
            ]
        );
        assert!(SCHED.iter().all(|&i| FAMILIES[i].dimension.is_empty()));
    }
}
