//! Working set size over time and its percentiles, as damo's `report wss`
//! computes them: in each aggregation, the bytes of the regions accessed
//! in at least `min_accesses` samples (damo's `--thres`, default 1) that
//! are at least `min_size` bytes large (damo's `--sz_thres`, default 1);
//! the percentiles of those sizes over the window (sorted, the value at
//! index ⌊len × p / 100⌋, the last one for p = 100).

use perfabi_reader::Aggregation;

use super::timeline::Timeline;

/// What counts as working set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threshold {
    /// Minimum `nr_accesses` of a region (samples that found it accessed).
    pub min_accesses: u32,
    /// Minimum size of a region, bytes.
    pub min_size: u64,
}

impl Default for Threshold {
    /// damo's defaults: accessed at least once, any size.
    fn default() -> Self {
        Threshold {
            min_accesses: 1,
            min_size: 1,
        }
    }
}

/// The working set size of one aggregation, bytes, counting only what lies
/// in `addr` (half-open).
pub fn of(a: &Aggregation, th: Threshold, addr: (u64, u64)) -> u64 {
    a.regions
        .iter()
        .filter(|r| r.nr_accesses >= th.min_accesses && r.len() >= th.min_size)
        .map(|r| r.end.min(addr.1).saturating_sub(r.start.max(addr.0)))
        .sum()
}

/// `(t_ns, wss)` of every aggregation of `tl` seen in `time` (half-open,
/// ns since the window's start), in time order.
pub fn series(tl: &Timeline, th: Threshold, addr: (u64, u64), time: (u64, u64)) -> Vec<(u64, u64)> {
    tl.points
        .iter()
        .filter(|(t, _)| (time.0..time.1).contains(t))
        .map(|(t, a)| (*t, of(a, th, addr)))
        .collect()
}

/// The `p`-th percentile (0..=100) of `values`, damo's way: sorted, the
/// value at index ⌊len × p / 100⌋ (the last for 100). `None` if empty.
pub fn percentile(sorted: &[u64], p: u32) -> Option<u64> {
    let last = sorted.len().checked_sub(1)?;
    let k = (sorted.len() * p as usize / 100).min(last);
    Some(sorted[k])
}

/// The percentiles `ps` of the sizes in `series`, with the mean:
/// `(percentiles, mean)`; empty and `None` if the series is.
pub fn distribution(series: &[(u64, u64)], ps: &[u32]) -> (Vec<(u32, u64)>, Option<f64>) {
    let mut sizes: Vec<u64> = series.iter().map(|&(_, s)| s).collect();
    sizes.sort_unstable();
    let out = ps
        .iter()
        .filter_map(|&p| percentile(&sizes, p).map(|v| (p, v)))
        .collect();
    let mean = (!sizes.is_empty())
        .then(|| sizes.iter().map(|&s| s as f64).sum::<f64>() / sizes.len() as f64);
    (out, mean)
}

#[cfg(test)]
mod tests {
    use super::super::timeline::{from_record, tests::agg};
    use super::*;

    #[test]
    fn wss_counts_accessed_bytes_in_range_and_percentiles_are_damos() {
        let aggs: Vec<(u64, Aggregation)> = (0..5u32)
            .map(|i| {
                // Accessed: the first (i + 1) × 1 MiB; the rest idle.
                let hot = u64::from(i + 1) << 20;
                (
                    u64::from(i) * 100_000_000,
                    agg(u64::from(i) + 1, &[(0, hot, 2 + i), (hot, 64 << 20, 0)]),
                )
            })
            .collect();
        let tl = &from_record(&aggs).unwrap()[0];
        let all = (0, u64::MAX);
        let s = series(tl, Threshold::default(), all, (0, u64::MAX));
        let sizes: Vec<u64> = s.iter().map(|&(_, w)| w >> 20).collect();
        assert_eq!(sizes, [1, 2, 3, 4, 5]);
        let (p, mean) = distribution(&s, &[0, 25, 50, 75, 100]);
        let mib: Vec<(u32, u64)> = p.iter().map(|&(p, v)| (p, v >> 20)).collect();
        assert_eq!(mib, [(0, 1), (25, 2), (50, 3), (75, 4), (100, 5)]);
        assert_eq!(mean, Some(3.0 * (1 << 20) as f64));
        // A threshold above the first aggregations' accesses, an address
        // range cutting the hot bytes, a time range of the middle three.
        let strict = Threshold {
            min_accesses: 4,
            min_size: 1,
        };
        let s = series(tl, strict, (0, 2 << 20), (100_000_000, 400_000_000));
        assert_eq!(
            s,
            [
                (100_000_000, 0),
                (200_000_000, 2 << 20),
                (300_000_000, 2 << 20)
            ]
        );
        assert_eq!(distribution(&[], &[50]), (vec![], None));
    }
}
