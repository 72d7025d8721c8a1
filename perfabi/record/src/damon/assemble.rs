//! Rebuilding complete aggregations from a stream of `damon_aggregated`
//! events, whatever carried them (trace text, the perf ring buffer).
//!
//! DAMON emits the regions of one aggregation of one (kdamond, target) in
//! address order, `nr_regions` of them, from one kdamond thread. An
//! aggregation is complete when that many regions arrived in increasing
//! address order; a region at or below the previous one, or a different
//! region count, starts a new one and the unfinished one is counted as
//! dropped. A gap in the stream (lost events) drops every unfinished one.

use std::collections::BTreeMap;

use perfabi::damon::{Aggregation, Intervals, Region};

/// One `damon_aggregated` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Timestamp, nanoseconds (the source's clock).
    pub ts_ns: u64,
    /// kdamond thread id, 0 if unknown.
    pub monitor: u64,
    /// Target id.
    pub target: u64,
    /// Regions in the aggregation.
    pub nr_regions: u32,
    /// The region.
    pub region: Region,
}

struct Partial {
    ts_ns: u64,
    nr_regions: u32,
    regions: Vec<Region>,
}

/// Rebuilds aggregations per (kdamond, target).
#[derive(Default)]
pub struct Assembler {
    partial: BTreeMap<(u64, u64), Partial>,
    /// Unfinished aggregations given up so far.
    pub dropped: u64,
}

impl Assembler {
    /// Feeds one event; returns the aggregation it completes, if any, with
    /// the timestamp of its first event. `intervals` tells, when one
    /// completes, the intervals of its monitor (events do not carry them).
    pub fn push(
        &mut self,
        e: Event,
        intervals: impl FnOnce(u64) -> Intervals,
    ) -> Option<(u64, Aggregation)> {
        let key = (e.monitor, e.target);
        let p = self.partial.entry(key).or_insert(Partial {
            ts_ns: e.ts_ns,
            nr_regions: e.nr_regions,
            regions: Vec::new(),
        });
        let starts_anew = p.nr_regions != e.nr_regions
            || p.regions.last().is_some_and(|r| e.region.start < r.end);
        if starts_anew {
            if !p.regions.is_empty() {
                self.dropped += 1;
            }
            p.regions.clear();
            p.nr_regions = e.nr_regions;
        }
        if p.regions.is_empty() {
            p.ts_ns = e.ts_ns;
        }
        p.regions.push(e.region);
        if p.regions.len() < e.nr_regions as usize {
            return None;
        }
        Some((
            p.ts_ns,
            Aggregation {
                monitor_id: key.0,
                target_id: key.1,
                aggregation: 0,
                intervals: intervals(key.0),
                regions: std::mem::take(&mut p.regions),
            },
        ))
    }

    /// The stream lost events: every unfinished aggregation is dropped.
    pub fn gap(&mut self) {
        for p in self.partial.values_mut() {
            if !p.regions.is_empty() {
                self.dropped += 1;
                p.regions.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IV: Intervals = Intervals {
        sample_us: 5000,
        aggr_us: 100_000,
    };

    fn ev(ts_ns: u64, target: u64, nr: u32, start: u64) -> Event {
        Event {
            ts_ns,
            monitor: 7,
            target,
            nr_regions: nr,
            region: Region {
                start,
                end: start + 4096,
                nr_accesses: 1,
                age: 2,
            },
        }
    }

    #[test]
    fn completes_interleaved_targets_and_drops_cut_ones() {
        let mut a = Assembler::default();
        // Target 0's first aggregation is cut (its region 0 is missing).
        assert_eq!(a.push(ev(1, 0, 2, 8192), |_| IV), None);
        assert_eq!(a.push(ev(2, 1, 2, 0), |_| IV), None);
        // Target 0 starts anew at a lower address: the cut one is dropped.
        assert_eq!(a.push(ev(3, 0, 2, 0), |_| IV), None);
        let (ts1, t1) = a.push(ev(4, 1, 2, 4096), |_| IV).unwrap();
        assert_eq!((ts1, t1.target_id, t1.regions.len()), (2, 1, 2));
        assert_eq!((t1.intervals, t1.aggregation), (IV, 0));
        let (ts0, t0) = a.push(ev(5, 0, 2, 4096), |_| IV).unwrap();
        assert_eq!((ts0, t0.target_id), (3, 0));
        assert_eq!(a.dropped, 1);
        // A gap drops what is unfinished.
        assert_eq!(a.push(ev(6, 0, 3, 0), |_| IV), None);
        a.gap();
        assert_eq!(a.dropped, 2);
        assert_eq!(a.push(ev(7, 0, 3, 4096), |_| IV), None);
        assert_eq!(a.push(ev(8, 0, 3, 8192), |_| IV), None);
        // A different count starts anew too.
        assert_eq!(a.push(ev(9, 0, 1, 0), |_| IV).unwrap().1.regions.len(), 1);
        assert_eq!(a.dropped, 3);
    }
}
