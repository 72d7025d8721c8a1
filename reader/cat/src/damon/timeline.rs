//! The aggregations of one (monitor, target) in time order: what a heatmap
//! or a working-set report is drawn from, kept from a live segment or read
//! from a record.

use std::collections::{BTreeMap, VecDeque};

use perfabi::damon::check_regions;
use perfabi_reader::Aggregation;

/// The aggregations of one (monitor, target), oldest first, each with its
/// time: nanoseconds since the first aggregation seen of any target (so
/// that the timelines of one source share a time axis).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The kdamond (thread id, or the index a record gives it).
    pub monitor_id: u64,
    /// The target of that kdamond.
    pub target_id: u64,
    /// `(t_ns, aggregation)`, in time order.
    pub points: VecDeque<(u64, Aggregation)>,
}

impl Timeline {
    /// When the window starts (the first aggregation) and ends (the end of
    /// the last one's aggregation interval, at least 1 ns), in ns; `None`
    /// if empty.
    pub fn span(&self) -> Option<(u64, u64)> {
        let (first, _) = self.points.front()?;
        let (last, a) = self.points.back()?;
        Some((*first, last.saturating_add(aggr_ns(a).max(1))))
    }

    /// The lowest start and highest end of any region, `None` if there is
    /// none.
    pub fn extent(&self) -> Option<(u64, u64)> {
        let regions = self.points.iter().flat_map(|(_, a)| &a.regions);
        let lo = regions.clone().map(|r| r.start).min()?;
        let hi = regions.map(|r| r.end).max()?;
        Some((lo, hi))
    }

    /// The default address range of a heatmap: the largest (in bytes) run
    /// of regions laid end to end, over the whole window. A process's
    /// address space has gaps of terabytes (between the heap, the mappings
    /// and the stack) that DAMON leaves unmonitored; drawn to scale they
    /// would squeeze what was monitored into a few rows (damo's heatmap
    /// picks such a range too). `None` if there is no region.
    pub fn busiest_range(&self) -> Option<(u64, u64)> {
        let mut spans: Vec<(u64, u64)> = self
            .points
            .iter()
            .flat_map(|(_, a)| a.regions.iter().map(|r| (r.start, r.end)))
            .collect();
        spans.sort_unstable();
        let mut best: Option<(u64, u64)> = None;
        let mut run: Option<(u64, u64)> = None;
        for (s, e) in spans {
            run = match run {
                Some((rs, re)) if s <= re => Some((rs, re.max(e))),
                _ => {
                    if let Some(r) = run {
                        best = wider(best, r);
                    }
                    Some((s, e))
                }
            };
        }
        match run {
            Some(r) => wider(best, r),
            None => best,
        }
    }
}

/// The wider of `best` and `r` (the first of two as wide).
fn wider(best: Option<(u64, u64)>, r: (u64, u64)) -> Option<(u64, u64)> {
    match best {
        Some(b) if b.1 - b.0 >= r.1 - r.0 => Some(b),
        _ => Some(r),
    }
}

/// The aggregation interval of `a`, in ns.
pub fn aggr_ns(a: &Aggregation) -> u64 {
    u64::from(a.intervals.aggr_us) * 1000
}

/// Timelines of every (monitor, target) of a record: its aggregations,
/// each with its time (ns since the record's first event), in any order.
/// Times are made relative to the earliest; points are sorted by time.
/// A record is untrusted: an aggregation whose regions are not DAMON's
/// (none, an empty one, unsorted or overlapping) or whose intervals are
/// zero is refused, in one line.
pub fn from_record(aggs: &[(u64, Aggregation)]) -> Result<Vec<Timeline>, String> {
    if let Some((t, a)) = aggs
        .iter()
        .find(|(_, a)| check_regions(&a.regions, a.intervals, usize::MAX).is_err())
    {
        return Err(format!(
            "the aggregation of monitor {} target {} at {t} ns has regions that are not DAMON's (none, an empty one, unsorted or overlapping) or a zero interval",
            a.monitor_id, a.target_id
        ));
    }
    let mut w = Window::new(usize::MAX);
    let t0 = aggs.iter().map(|(t, _)| *t).min().unwrap_or(0);
    let mut sorted: Vec<&(u64, Aggregation)> = aggs.iter().collect();
    sorted.sort_by_key(|(t, a)| (*t, a.monitor_id, a.target_id));
    for (t, a) in sorted {
        w.push_at(t - t0, a.clone());
    }
    Ok(w.into_timelines())
}

/// A window of aggregations from a live segment: the latest `max` of each
/// (monitor, target), each once (a segment shows the latest aggregation
/// until the next one replaces it, so reads see it many times).
#[derive(Debug)]
pub struct Window {
    max: usize,
    by_target: BTreeMap<(u64, u64), Timeline>,
}

impl Window {
    /// An empty window of at most `max` aggregations per target (at least
    /// one).
    pub fn new(max: usize) -> Window {
        Window {
            max: max.max(1),
            by_target: BTreeMap::new(),
        }
    }

    /// Adds `a`, seen at `t_ns`, unless it is the one already last for its
    /// target (the same aggregation index; index 0, an aggregation no
    /// writer numbered, is always new). Returns whether it was added.
    pub fn push_at(&mut self, t_ns: u64, a: Aggregation) -> bool {
        let key = (a.monitor_id, a.target_id);
        let tl = self.by_target.entry(key).or_insert_with(|| Timeline {
            monitor_id: a.monitor_id,
            target_id: a.target_id,
            points: VecDeque::new(),
        });
        if let Some((_, last)) = tl.points.back() {
            if a.aggregation != 0 && last.aggregation == a.aggregation {
                return false;
            }
        }
        tl.points.push_back((t_ns, a));
        while tl.points.len() > self.max {
            tl.points.pop_front();
        }
        true
    }

    /// Whether no aggregation is kept.
    pub fn is_empty(&self) -> bool {
        self.by_target.values().all(|t| t.points.is_empty())
    }

    /// The timelines, by (monitor, target) (borrowed: a window of a live
    /// segment is read again for every report).
    pub fn timelines(&self) -> Vec<&Timeline> {
        self.by_target.values().collect()
    }

    /// The timelines, by (monitor, target), the window given up for them.
    pub fn into_timelines(self) -> Vec<Timeline> {
        self.by_target.into_values().collect()
    }

    /// The timeline of one (monitor, target), if it has any aggregation.
    #[cfg(test)]
    pub fn get(&self, monitor_id: u64, target_id: u64) -> Option<&Timeline> {
        self.by_target.get(&(monitor_id, target_id))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use perfabi_reader::{Intervals, Region};

    /// An aggregation of `regions` (start, end, nr_accesses), sampled every
    /// 5 ms for 100 ms (20 samples: nr_accesses 20 is 100 %).
    pub fn agg(index: u64, regions: &[(u64, u64, u32)]) -> Aggregation {
        Aggregation {
            monitor_id: 7,
            target_id: 0,
            aggregation: index,
            intervals: Intervals {
                sample_us: 5000,
                aggr_us: 100_000,
            },
            regions: regions
                .iter()
                .map(|&(start, end, nr_accesses)| Region {
                    start,
                    end,
                    nr_accesses,
                    age: 0,
                })
                .collect(),
        }
    }

    /// Ten aggregations 100 ms apart of 64 MiB from address 0, the first
    /// 4 MiB accessed in every sample (20 of 20), the rest never.
    pub fn hot_band() -> Vec<(u64, Aggregation)> {
        (0..10)
            .map(|i| {
                (
                    i * 100_000_000,
                    agg(i + 1, &[(0, 4 << 20, 20), (4 << 20, 64 << 20, 0)]),
                )
            })
            .collect()
    }

    #[test]
    fn the_busiest_range_skips_the_address_space_gaps() {
        let a = agg(
            1,
            &[
                (0x1000, 0x3000, 0),
                (0x7000_0000, 0x7100_0000, 20),
                (0x7100_0000, 0x7400_0000, 0),
                (0x7fff_0000, 0x7fff_8000, 3),
            ],
        );
        let tl = &from_record(&[(5, a)]).unwrap()[0];
        assert_eq!(tl.busiest_range(), Some((0x7000_0000, 0x7400_0000)));
        assert_eq!(tl.extent(), Some((0x1000, 0x7fff_8000)));
        assert_eq!(tl.span(), Some((0, 100_000_000)));
    }

    #[test]
    fn a_record_of_regions_not_damons_is_refused_and_times_never_overflow() {
        for bad in [
            &[][..],
            &[(8192, 4096, 1)],
            &[(0, 0, 1)],
            &[(0, 8192, 1), (4096, 9000, 0)],
        ] {
            let e = from_record(&[(0, agg(1, bad))]).unwrap_err();
            assert!(e.contains("monitor 7 target 0 at 0 ns"), "{e}");
        }
        let mut zero = agg(1, &[(0, 4096, 1)]);
        zero.intervals.aggr_us = 0;
        assert!(from_record(&[(0, zero)]).is_err());
        // Times as far apart as a u64 allows.
        let far = [
            (0, agg(1, &[(0, 4096, 1)])),
            (u64::MAX, agg(2, &[(0, 4096, 1)])),
        ];
        let tl = &from_record(&far).unwrap()[0];
        assert_eq!(tl.span(), Some((0, u64::MAX)));
    }

    #[test]
    fn a_window_keeps_each_aggregation_once_and_the_latest_max() {
        let mut w = Window::new(2);
        assert!(w.push_at(0, agg(1, &[(0, 4096, 1)])));
        assert!(!w.push_at(10, agg(1, &[(0, 4096, 1)])));
        assert!(w.push_at(100, agg(2, &[(0, 4096, 2)])));
        assert!(w.push_at(200, agg(3, &[(0, 4096, 3)])));
        let tl = w.get(7, 0).unwrap();
        let kept: Vec<u64> = tl.points.iter().map(|(t, _)| *t).collect();
        assert_eq!(kept, [100, 200]);
    }
}
