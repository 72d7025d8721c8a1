//! What the agent exports: every metric's name, identifier, descriptor and
//! help text. The fixed ones are here; those of the segment's metric
//! families are made by [`crate::family_metrics`]. Pure Rust, no PCP
//! library needed: tested on its own.
//!
//! Namespace (domain `D`):
//!
//! | cluster | metrics |
//! |---|---|
//! | 0 | `perfabi.segment.*`: the segment and its writer |
//! | 1 | `perfabi.damon.*`: DAMON aggregations and their regions |
//! | 16… | `perfabi.percpu.<family>`: a family's values on each CPU |
//! | 2048… | `perfabi.<family>`: a family's values (a histogram: `.bucket`, `.count`, `.sum`) |
//!
//! A family keeps its identifiers for good, across writer restarts and
//! agent restarts ([`crate::counter_names::CounterNames`] is saved), so
//! that rates and archives stay continuous.

use std::ffi::c_int;

use crate::ffi::{
    self, pmUnits, PM_SEM_COUNTER, PM_SEM_DISCRETE, PM_SEM_INSTANT, PM_TYPE_DOUBLE, PM_TYPE_STRING,
    PM_TYPE_U32, PM_TYPE_U64,
};

/// The agent's instance domains (their serial numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Indom {
    /// CPUs of the segment: `cpu0`, `cpu1`, …
    Cpu = 0,
    /// DAMON (kdamond, target) pairs: `kdamond<PID>/target<N>`.
    Stream = 1,
    /// Regions of each pair's latest aggregation: `kdamond<PID>/target<N>/region<I>`.
    Region = 2,
}

/// All instance domains, in serial order.
pub const INDOMS: [Indom; 3] = [Indom::Cpu, Indom::Stream, Indom::Region];

impl Indom {
    /// One-line and long help.
    pub fn help(self) -> (&'static str, &'static str) {
        match self {
            Indom::Cpu => (
                "CPUs of the perfabi segment",
                "One instance per per-CPU block of the segment, named cpuN (label\n\
                 \"cpu\": N): the instances of perfabi.percpu.NAME for a family\n\
                 without dimension (a single value).",
            ),
            Indom::Stream => (
                "DAMON monitoring streams: (kdamond thread, target) pairs",
                "One instance per DAMON kdamond thread and target whose latest\n\
                 complete aggregation is in the segment, named kdamond<PID>/target<N>.\n\
                 A name keeps its instance id across restarts of the agent (the ids\n\
                 are saved with pmdaCache) until the stream has been absent for an\n\
                 hour; no id is ever given to two names.",
            ),
            Indom::Region => (
                "Regions of the latest DAMON aggregation of each stream",
                "One instance per region of the latest complete aggregation of each\n\
                 (kdamond, target) pair, in address order, named\n\
                 kdamond<PID>/target<N>/region<I>. The set changes with every\n\
                 aggregation: DAMON splits and merges regions as it adapts. Ids are\n\
                 kept as for the streams' instances.",
            ),
        }
    }
}

/// What a metric's values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// 1 while a valid segment is mapped.
    Available,
    /// ABI version, "major.minor".
    AbiVersion,
    /// Writer incarnation.
    Epoch,
    /// Metadata generation.
    Generation,
    /// 1 while the writer is alive (or is the kernel).
    WriterAlive,
    /// Writer process id (0: the kernel).
    WriterPid,
    /// Reads that found the writer mid-update past the retry bound.
    BusyReads,
    /// Reads that found the writer gone.
    StaleReads,
    /// 1 while the last good values are held over a transient error.
    Held,
    /// Requests answered with held values.
    HeldReads,
    /// Segments mapped anew (restarts, growth) since the agent started.
    Remaps,
    /// Per-CPU blocks.
    NrCpus,
    /// Live ABI 1.0 counters.
    NrCounters,
    /// Metric families (the 1.0 counters among them).
    NrFamilies,
    /// Path of the segment.
    Path,
    /// Owner (uid) of the segment file or device.
    OwnerUid,
    /// Regions in a stream's latest aggregation.
    NrRegions,
    /// A stream's aggregation index.
    Aggregation,
    /// A stream's sampling interval.
    SampleUs,
    /// A stream's aggregation interval.
    AggrUs,
    /// Region start address.
    RegionStart,
    /// Region end address.
    RegionEnd,
    /// Region size.
    RegionSize,
    /// Samples that saw an access.
    RegionNrAccesses,
    /// Aggregations the region kept its access level.
    RegionAge,
    /// `nr_accesses` over the samples in an aggregation.
    RegionFrequency,
    /// Regions the writer could not publish.
    DroppedRegions,
    /// DAMON streams in the segment.
    NrStreams,
    /// Segment files merged (1 for a segment).
    NrSegments,
    /// Problems of the last directory read.
    NrProblems,
    /// Those problems' messages, in one line.
    Problems,
    /// A value of the family at this index of the snapshot's families.
    Family {
        /// Index in `Snapshot::families`.
        family: usize,
        /// Which of the family's values.
        part: Part,
        /// One value per CPU, not the total.
        per_cpu: bool,
    },
}

impl Kind {
    /// Whether the values are read from the DAMON regions (which a fetch
    /// reads only when it serves one of these).
    pub fn is_damon(self) -> bool {
        use Kind::*;
        matches!(
            self,
            NrRegions
                | Aggregation
                | SampleUs
                | AggrUs
                | RegionStart
                | RegionEnd
                | RegionSize
                | RegionNrAccesses
                | RegionAge
                | RegionFrequency
                | DroppedRegions
                | NrStreams
        )
    }
}

/// Which value of a family a metric serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// A counter's, gauge's or peak's value.
    Value,
    /// A histogram's observations per bucket.
    Bucket,
    /// A histogram's number of observations.
    Count,
    /// A histogram's sum of observations.
    Sum,
}

/// One exported metric.
#[derive(Clone, Debug)]
pub struct Metric {
    /// Full PCP name.
    pub name: String,
    /// Identifier.
    pub pmid: ffi::pmID,
    /// `PM_TYPE_*`.
    pub type_: c_int,
    /// Serial number of its instance domain, if any (an [`Indom`], or a
    /// family's, [`crate::family_metrics::FIRST_FAMILY_INDOM`] on).
    pub indom: Option<u32>,
    /// `PM_SEM_*`.
    pub sem: c_int,
    /// Units.
    pub units: pmUnits,
    /// Its help text.
    pub text: Text,
    /// Its values.
    pub kind: Kind,
}

/// Where a metric's help text comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    /// Fixed one-line and long help.
    Fixed(&'static str, &'static str),
    /// A family's, written from the family (see [`Metric::kind`]) when
    /// asked for: 65,536 families need no 262,144 strings made at start.
    Family,
}

impl Metric {
    /// One-line and long help of a metric whose text is fixed; `None` for a
    /// family's (see [`crate::family_metrics::metric_help`]).
    pub fn fixed_help(&self) -> Option<(&'static str, &'static str)> {
        match self.text {
            Text::Fixed(one, long) => Some((one, long)),
            Text::Family => None,
        }
    }
}

const NONE: pmUnits = pmUnits::new(0, 0, 0, 0, 0, 0);
const COUNT: pmUnits = pmUnits::new(0, 0, 1, 0, 0, 0);
const BYTES: pmUnits = pmUnits::new(1, 0, 0, 0, 0, 0);
const USEC: pmUnits = pmUnits::new(0, 1, 0, 0, 1, 0);

/// The metrics that do not depend on the segment's contents.
pub fn fixed(domain: u32) -> Vec<Metric> {
    use Kind::*;
    /// cluster, item, name, type, indom, semantics, units, kind, one-line, help.
    type Row = (
        u32,
        u32,
        &'static str,
        c_int,
        Option<Indom>,
        c_int,
        pmUnits,
        Kind,
        &'static str,
        &'static str,
    );
    #[rustfmt::skip]
    let table: [Row; 31] = [
        (0, 0, "segment.available", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, Available,
         "1 while the agent serves values of a valid perfabi segment, else 0",
         "1 while the agent serves values of a valid segment at its path (read\n\
          now, or held from the last good read, see perfabi.segment.held); 0 while\n\
          the path is missing, not a valid segment, or unreadable for longer than\n\
          the hold. The agent logs why and retries at every request; meanwhile\n\
          the metrics read from the segment answer PM_ERR_AGAIN (try again),\n\
          and the families and DAMON instances are gone. With --directory, 1\n\
          while the directory's last read succeeded (or is held), 0 while the\n\
          directory is missing or refused as a whole."),
        (0, 1, "segment.abi_version", PM_TYPE_STRING, None, PM_SEM_DISCRETE, NONE, AbiVersion,
         "perfabi ABI version of the segment, major.minor",
         "The ABI version in the segment header. The agent reads major version 1."),
        (0, 2, "segment.epoch", PM_TYPE_U64, None, PM_SEM_DISCRETE, NONE, Epoch,
         "incarnation id of the segment's writer",
         "A random id chosen when the writer created the segment: it changes when\n\
          the writer restarts, and counters may then start again from zero."),
        (0, 3, "segment.generation", PM_TYPE_U64, None, PM_SEM_INSTANT, NONE, Generation,
         "metadata generation of the segment",
         "Incremented twice by every change of the instance, family or member\n\
          tables (a counter, family or instance added or removed)."),
        (0, 4, "segment.writer_alive", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, WriterAlive,
         "1 while the segment's writer is alive",
         "1 while the writer's process exists and its heartbeat is fresh (or the\n\
          writer is the kernel module), 0 when it closed the segment, died or went\n\
          silent. Values of a closed segment are its final values."),
        (0, 5, "segment.writer_pid", PM_TYPE_U32, None, PM_SEM_DISCRETE, NONE, WriterPid,
         "process id of the segment's writer (0: the kernel)",
         "The writer's process id, as written in the segment header."),
        (0, 6, "segment.busy_reads", PM_TYPE_U64, None, PM_SEM_COUNTER, COUNT, BusyReads,
         "reads that found the writer mid-update beyond the retry bound",
         "A read retries while a per-CPU block or the instance table is being\n\
          updated; past its bound it is reported busy and counted here, and for\n\
          a few seconds the request is answered with the last good values (see\n\
          perfabi.segment.held).\n\
          A writer that died mid-update shows as a growing count."),
        (0, 7, "segment.stale_reads", PM_TYPE_U64, None, PM_SEM_COUNTER, COUNT, StaleReads,
         "requests that found the writer gone",
         "Requests served while the writer was dead or silent: their values are the\n\
          last ones the writer published."),
        (0, 8, "segment.remaps", PM_TYPE_U64, None, PM_SEM_COUNTER, COUNT, Remaps,
         "times the agent mapped the segment anew",
         "Counts writer restarts (a new file or epoch at the path), growth of the\n\
          segment and recoveries after it went missing."),
        (0, 9, "segment.nr_cpus", PM_TYPE_U32, None, PM_SEM_DISCRETE, NONE, NrCpus,
         "number of per-CPU blocks in the segment", "The segment's per-CPU block count."),
        (0, 10, "segment.nr_counters", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, NrCounters,
         "number of live ABI 1.0 counters in the segment",
         "Live entries of the segment's ABI 1.0 instance table. Each is a metric\n\
          family of one value: exported as perfabi.NAME (summed over CPUs) and\n\
          perfabi.percpu.NAME (per CPU); see perfabi.segment.nr_families."),
        (0, 15, "segment.nr_families", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, NrFamilies,
         "number of metric families in the segment, its 1.0 counters included",
         "Live metric families (ABI 1.1) plus live 1.0 counters (families of one\n\
          value). Each is exported as perfabi.NAME (a histogram as\n\
          perfabi.NAME.bucket, .count and .sum) and per CPU below perfabi.percpu;\n\
          a family whose name falls among the agent's own metrics\n\
          (perfabi.segment, perfabi.damon, perfabi.percpu) or is no valid PCP name\n\
          is left out, and the agent's log says so."),
        (0, 11, "segment.path", PM_TYPE_STRING, None, PM_SEM_DISCRETE, NONE, Path,
         "path of the segment (or segment directory) the agent reads",
         "The segment path given to the agent (-s/--segment), or the directory\n\
          (--directory)."),
        (0, 12, "segment.owner_uid", PM_TYPE_U32, None, PM_SEM_DISCRETE, NONE, OwnerUid,
         "user id owning the segment file the agent reads",
         "The uid that owns the segment file (0 for root or the kernel module's\n\
          device). The agent reads only segments of its own user or root unless\n\
          told to trust others (-t UID); see the Security section of perfabi's\n\
          README."),
        (0, 13, "segment.held", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, Held,
         "1 while the values served are the last good ones, held over a transient error",
         "A read that fails for a reason that clears by itself (the writer busy\n\
          past the retry bound, or the segment file the agent maps truncated,\n\
          overwritten or replaced while it was being opened, which a live writer\n\
          repairs at its next heartbeat) does not drop the values: the agent\n\
          answers with the values of the last good read, for at most 5 seconds\n\
          after it, and this is 1. Past that, or on any other error (no file at\n\
          the path, another file there that is not a segment, an owner not\n\
          trusted), the agent serves no values (perfabi.segment.available is 0)\n\
          until a read succeeds."),
        (0, 14, "segment.held_reads", PM_TYPE_U64, None, PM_SEM_COUNTER, COUNT, HeldReads,
         "requests answered with held values after a transient read error",
         "Requests the agent answered with the last good values because the read\n\
          failed for a transient reason (see perfabi.segment.held)."),
        (0, 16, "segment.nr_segments", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, NrSegments,
         "segment files the values are merged from (1 for a segment)",
         "With --directory, the segment files of the directory (one per writer\n\
          process) whose families the last read merged, the kept counts of writers\n\
          already folded not counted (spec/PERFABI.md section 15). Files refused\n\
          are not counted: see perfabi.segment.problems. 1 for a single segment."),
        (0, 17, "segment.nr_problems", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, NrProblems,
         "problems of the last read of the directory (0 for a segment)",
         "With --directory, what the last read left out, each spoiling only\n\
          itself: a file refused (a symbolic link, another user's, writable by\n\
          others, truncated or with a hole) or unreadable, a family whose\n\
          metadata differ between two files (refused whole, both files named),\n\
          or a limit reached. Every other family is served. The messages are\n\
          perfabi.segment.problems, and the agent's log has each once."),
        (0, 18, "segment.problems", PM_TYPE_STRING, None, PM_SEM_INSTANT, NONE, Problems,
         "messages of the last directory read's problems, \"; \" between two",
         "The messages counted by perfabi.segment.nr_problems, in one line, \"; \"\n\
          between two, each naming its file (paths escaped); empty when there is\n\
          none, and for a single segment."),
        (1, 0, "damon.nr_regions", PM_TYPE_U32, Some(Indom::Stream), PM_SEM_INSTANT, NONE, NrRegions,
         "regions in the latest DAMON aggregation of each stream",
         "Number of regions of the latest complete aggregation of each (kdamond,\n\
          target) pair."),
        (1, 1, "damon.aggregation", PM_TYPE_U64, Some(Indom::Stream), PM_SEM_INSTANT, NONE, Aggregation,
         "index of the latest DAMON aggregation of each stream",
         "The writer's sequence number of the aggregation the perfabi.damon.region\n\
          values come from; it grows by one per aggregation interval."),
        (1, 2, "damon.sample_us", PM_TYPE_U32, Some(Indom::Stream), PM_SEM_DISCRETE, USEC, SampleUs,
         "DAMON sampling interval of each stream",
         "The interval between DAMON's access checks of a region."),
        (1, 3, "damon.aggr_us", PM_TYPE_U32, Some(Indom::Stream), PM_SEM_DISCRETE, USEC, AggrUs,
         "DAMON aggregation interval of each stream",
         "The interval over which DAMON counts accesses before it reports regions."),
        (1, 4, "damon.dropped_regions", PM_TYPE_U64, None, PM_SEM_COUNTER, COUNT, DroppedRegions,
         "DAMON regions the writer could not publish",
         "Regions dropped because a per-CPU DAMON area was full or an aggregation\n\
          was larger than it."),
        (1, 10, "damon.region.start", PM_TYPE_U64, Some(Indom::Region), PM_SEM_INSTANT, NONE, RegionStart,
         "start address of each DAMON region",
         "First address of the region (virtual for vaddr targets, physical for paddr)."),
        (1, 11, "damon.region.end", PM_TYPE_U64, Some(Indom::Region), PM_SEM_INSTANT, NONE, RegionEnd,
         "end address (exclusive) of each DAMON region", "One past the region's last address."),
        (1, 12, "damon.region.size", PM_TYPE_U64, Some(Indom::Region), PM_SEM_INSTANT, BYTES, RegionSize,
         "size of each DAMON region", "end - start, in bytes."),
        (1, 13, "damon.region.nr_accesses", PM_TYPE_U32, Some(Indom::Region), PM_SEM_INSTANT, COUNT, RegionNrAccesses,
         "samples of the last aggregation that saw each region accessed",
         "How many of the aggregation's samples (aggr_us / sample_us of them) found\n\
          the region accessed."),
        (1, 14, "damon.region.age", PM_TYPE_U32, Some(Indom::Region), PM_SEM_INSTANT, NONE, RegionAge,
         "aggregations each DAMON region has kept its access level",
         "DAMON's age of the region: aggregation intervals since its access\n\
          frequency last changed notably."),
        (1, 15, "damon.region.frequency", PM_TYPE_DOUBLE, Some(Indom::Region), PM_SEM_INSTANT, NONE, RegionFrequency,
         "access frequency of each DAMON region, 0 to 1",
         "nr_accesses divided by the samples per aggregation (aggr_us / sample_us):\n\
          1 means every sample saw the region accessed."),
        (1, 16, "damon.streams", PM_TYPE_U32, None, PM_SEM_INSTANT, NONE, NrStreams,
         "number of DAMON streams in the segment",
         "(kdamond, target) pairs with a complete aggregation in the segment."),
    ];
    table
        .into_iter()
        .map(
            |(cluster, item, name, type_, indom, sem, units, kind, oneline, help)| Metric {
                name: format!("perfabi.{name}"),
                pmid: ffi::pmid(domain, cluster, item),
                type_,
                indom: indom.map(|d| d as u32),
                sem,
                units,
                text: Text::Fixed(oneline, help),
                kind,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fetch reads the DAMON regions only for these: every metric of
    /// the DAMON cluster, and no other.
    #[test]
    fn the_damon_metrics_are_those_of_the_damon_cluster() {
        for m in fixed(502) {
            let cluster = (m.pmid >> 10) & 0xfff;
            assert_eq!(m.kind.is_damon(), cluster == 1, "{}", m.name);
        }
        let f = Kind::Family {
            family: 0,
            part: Part::Value,
            per_cpu: false,
        };
        assert!(!f.is_damon());
    }

    #[test]
    fn fixed_metrics_have_distinct_ids_names_below_perfabi_and_help() {
        let all = fixed(502);
        let mut ids: Vec<_> = all.iter().map(|m| m.pmid).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "pmids are unique");
        for m in &all {
            assert!(
                matches!(m.text, Text::Fixed(one, long) if !one.is_empty() && !long.is_empty()),
                "{}",
                m.name
            );
            assert!(m.fixed_help().is_some());
        }
    }

    #[test]
    fn the_help_states_the_hold_the_agent_uses() {
        let held = fixed(502)
            .into_iter()
            .find(|m| m.kind == Kind::Held)
            .unwrap();
        let Text::Fixed(_, help) = held.text else {
            panic!("fixed help")
        };
        let secs = crate::source::HOLD.as_secs();
        assert!(help.contains(&format!("at most {secs} seconds")), "{help}");
        let hour = crate::damon_instances::FORGET_AFTER.as_secs();
        assert_eq!(hour, 3600, "the instance domains' help says an hour");
    }
}
