//! The heatmap's numbers: access frequency over a time × address grid.
//!
//! Row `r` covers addresses `addrs[r]..addrs[r + 1]` (row 0 the lowest),
//! column `c` times `times[c]..times[c + 1]` (ns since the window's
//! first aggregation). An aggregation covers the time from when it was
//! seen until the next one of its timeline, if that comes within two
//! aggregation intervals (kdamond's real cadence is slower than the
//! nominal interval: 116 ms for 100 ms in the shipped record, which would
//! otherwise leave a gap after every aggregation and stripes of empty
//! columns in a wide heatmap), else for one aggregation interval (a
//! missed aggregation stays a visible gap); a cell holds the mean access
//! frequency (0..=1) of what covers it, weighted by bytes × time, or
//! `None` where nothing monitored covers it (unmonitored addresses, or a
//! time without an aggregation). The renderers (terminal, SVG, PNG) draw
//! this grid and nothing else, so that what a test checks in the grid is
//! what a person sees.

use perfabi_reader::Aggregation;

use super::timeline::{aggr_ns, Timeline};

/// Access frequency over time and address.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// Column edges, ns since the window's start: `cols + 1` ascending
    /// values.
    pub times: Vec<u64>,
    /// Row edges, addresses: `rows + 1` ascending values.
    pub addrs: Vec<u64>,
    /// `rows × cols` cells, row-major, row 0 the lowest addresses: access
    /// frequency 0..=1, `None` where nothing covers the cell.
    pub cells: Vec<Option<f64>>,
}

impl Grid {
    /// Number of address rows.
    pub fn rows(&self) -> usize {
        self.addrs.len().saturating_sub(1)
    }

    /// Number of time columns.
    pub fn cols(&self) -> usize {
        self.times.len().saturating_sub(1)
    }

    /// The cell of address row `r` and time column `c`.
    pub fn get(&self, r: usize, c: usize) -> Option<f64> {
        self.cells[r * self.cols() + c]
    }
}

/// `n + 1` edges from `lo` to `hi`, as even as integers allow.
fn edges(lo: u64, hi: u64, n: usize) -> Vec<u64> {
    let span = u128::from(hi - lo);
    (0..=n as u128)
        .map(|k| lo + (span * k / n as u128) as u64)
        .collect()
}

/// The length of the overlap of `a0..a1` and `b0..b1`.
fn overlap(a0: u64, a1: u64, b0: u64, b1: u64) -> u64 {
    a1.min(b1).saturating_sub(a0.max(b0))
}

/// The grid of `tl` over addresses `addr` and times `time` (ns since the
/// window's start; both half-open, non-empty), `rows × cols` cells
/// (each at least 1). Rows narrower than a byte or columns shorter than a
/// nanosecond are not made: their number shrinks to the span.
pub fn build(tl: &Timeline, addr: (u64, u64), time: (u64, u64), rows: usize, cols: usize) -> Grid {
    let rows = rows.clamp(
        1,
        usize::try_from(addr.1 - addr.0)
            .unwrap_or(usize::MAX)
            .max(1),
    );
    let cols = cols.clamp(
        1,
        usize::try_from(time.1 - time.0)
            .unwrap_or(usize::MAX)
            .max(1),
    );
    let addrs = edges(addr.0, addr.1.max(addr.0 + 1), rows);
    let times = edges(time.0, time.1.max(time.0 + 1), cols);
    // Sums of weight × frequency and of weight, per cell.
    let mut heat = vec![0f64; rows * cols];
    let mut weight = vec![0f64; rows * cols];
    for (k, (t, a)) in tl.points.iter().enumerate() {
        let (t0, t1) = (*t, t.saturating_add(covered_ns(tl, k, *t, a)));
        let Some((c0, c1)) = span_of(&times, t0, t1) else {
            continue;
        };
        for reg in &a.regions {
            let Some((r0, r1)) = span_of(&addrs, reg.start, reg.end) else {
                continue;
            };
            let f = a.frequency(reg);
            for r in r0..r1 {
                let bytes = overlap(reg.start, reg.end, addrs[r], addrs[r + 1]) as f64;
                for c in c0..c1 {
                    let w = bytes * overlap(t0, t1, times[c], times[c + 1]) as f64;
                    heat[r * cols + c] += w * f;
                    weight[r * cols + c] += w;
                }
            }
        }
    }
    let cells = heat
        .iter()
        .zip(&weight)
        .map(|(&h, &w)| (w > 0.0).then(|| (h / w).clamp(0.0, 1.0)))
        .collect();
    Grid {
        times,
        addrs,
        cells,
    }
}

/// How long the aggregation `a`, point `k` of `tl` seen at `t`, covers:
/// until the next point if it comes within two aggregation intervals,
/// else one interval (at least 1 ns).
fn covered_ns(tl: &Timeline, k: usize, t: u64, a: &Aggregation) -> u64 {
    let aggr = aggr_ns(a).max(1);
    match tl.points.get(k + 1) {
        Some((next, _)) if *next > t && next - t < 2 * aggr => next - t,
        _ => aggr,
    }
}

/// The cells `first..last` of `edges` that `lo..hi` overlaps, `None` if
/// none.
fn span_of(edges: &[u64], lo: u64, hi: u64) -> Option<(usize, usize)> {
    let n = edges.len() - 1;
    if hi <= edges[0] || lo >= edges[n] {
        return None;
    }
    // The last edge at or below lo, and the first edge at or above hi.
    let first = edges.partition_point(|&e| e <= lo).saturating_sub(1);
    let last = edges.partition_point(|&e| e < hi).min(n);
    (first < last).then_some((first, last))
}

/// The mean frequency of `a` over `lo..hi` (byte-weighted), `None` if no
/// region covers any of it; for tests.
#[cfg(test)]
pub fn mean_frequency(a: &Aggregation, lo: u64, hi: u64) -> Option<f64> {
    let (mut h, mut w) = (0f64, 0f64);
    for r in &a.regions {
        let b = overlap(r.start, r.end, lo, hi) as f64;
        h += b * a.frequency(r);
        w += b;
    }
    (w > 0.0).then(|| h / w)
}

#[cfg(test)]
mod tests {
    use super::super::timeline::{
        from_record,
        tests::{agg, hot_band},
    };
    use super::*;

    #[test]
    fn a_hot_band_fills_its_rows_over_the_whole_time() {
        let aggs = hot_band();
        let tl = &from_record(&aggs).unwrap()[0];
        let g = build(tl, (0, 64 << 20), tl.span().unwrap(), 16, 10);
        assert_eq!((g.rows(), g.cols()), (16, 10));
        for c in 0..10 {
            assert_eq!(g.get(0, c), Some(1.0), "column {c}");
            for r in 1..16 {
                assert_eq!(g.get(r, c), Some(0.0), "row {r} column {c}");
            }
        }
        assert_eq!(mean_frequency(&aggs[0].1, 0, 8 << 20), Some(0.5));
    }

    #[test]
    fn cells_nothing_covers_are_empty_and_partial_rows_are_weighted() {
        // One region, hot, over a quarter of the range plus half a row.
        let tl = &from_record(&[(0, agg(1, &[(0, 6, 20)]))]).unwrap()[0];
        let g = build(tl, (0, 16), (0, 100_000_000), 4, 2);
        assert_eq!(g.get(0, 0), Some(1.0));
        // Row 1 (4..8) is half covered: the covered half is all hot.
        assert_eq!(g.get(1, 1), Some(1.0));
        assert_eq!(g.get(2, 0), None);
        assert_eq!(g.get(3, 1), None);
        // A time range after the aggregation: nothing.
        let later = build(tl, (0, 16), (200_000_000, 300_000_000), 4, 2);
        assert!(later.cells.iter().all(Option::is_none));
    }

    #[test]
    fn a_slower_cadence_leaves_no_gaps_and_a_missed_aggregation_does() {
        // kdamond's cadence in the shipped record: every 116 ms for a
        // 100 ms interval; then one aggregation missing (348 ms).
        let aggs: Vec<(u64, Aggregation)> = [0u64, 116, 232, 580]
            .iter()
            .enumerate()
            .map(|(i, &ms)| (ms * 1_000_000, agg(i as u64 + 1, &[(0, 64, 20)])))
            .collect();
        let tl = &from_record(&aggs).unwrap()[0];
        // 10 ms columns over the first three: every one covered.
        let g = build(tl, (0, 64), (0, 340_000_000), 1, 34);
        assert!(g.cells.iter().all(|c| *c == Some(1.0)), "{g:?}");
        // The missed one: 332..580 ms is a gap.
        let g = build(tl, (0, 64), (340_000_000, 580_000_000), 1, 24);
        assert!(g.cells.iter().all(Option::is_none), "{g:?}");
    }

    #[test]
    fn more_rows_than_bytes_shrink_to_the_span() {
        let tl = &from_record(&[(0, agg(1, &[(0, 3, 10)]))]).unwrap()[0];
        let g = build(tl, (0, 3), (0, 100), 50, 500);
        assert_eq!((g.rows(), g.cols()), (3, 100));
        assert!(g.cells.iter().all(|c| *c == Some(0.5)));
    }
}
