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
    // Sums of weight × frequency and of weight, per cell. A cell's weight
    // from one aggregation is bytes (of its row) × time (of its column):
    // the row part is summed once per aggregation, and the columns it
    // covers whole get it through a difference array over the columns (one
    // add where the covered run starts, one subtract where it ends), so
    // that the cost is aggregations × rows touched + rows × columns, not
    // their product (200,000 aggregations at one time, each covering every
    // column of a 400 × 640 grid, were 5 × 10^10 steps). Columns covered
    // in part get their share directly.
    let mut heat = vec![0f64; rows * cols];
    let mut weight = vec![0f64; rows * cols];
    let mut d_heat = vec![0f64; rows * (cols + 1)];
    let mut d_weight = vec![0f64; rows * (cols + 1)];
    // How many aggregations cover each cell whole (difference array too):
    // where none does, the running sums restart at exactly 0, so that
    // rounding left by a subtraction never makes an empty cell look
    // covered.
    let mut d_count = vec![0i64; rows * (cols + 1)];
    let mut touched: Vec<(usize, f64, f64)> = Vec::new();
    for (k, (t, a)) in tl.points.iter().enumerate() {
        let (t0, t1) = (*t, t.saturating_add(covered_ns(tl, k, *t, a)));
        let Some((c0, c1)) = span_of(&times, t0, t1) else {
            continue;
        };
        // The rows this aggregation covers: bytes × frequency and bytes.
        touched.clear();
        for reg in &a.regions {
            let Some((r0, r1)) = span_of(&addrs, reg.start, reg.end) else {
                continue;
            };
            let f = a.frequency(reg);
            for r in r0..r1 {
                let bytes = overlap(reg.start, reg.end, addrs[r], addrs[r + 1]) as f64;
                match touched.last_mut() {
                    Some((last, h, w)) if *last == r => {
                        *h += bytes * f;
                        *w += bytes;
                    }
                    _ => touched.push((r, bytes * f, bytes)),
                }
            }
        }
        // The columns it covers whole, [whole0, whole1), and the others.
        let whole0 = if times[c0] >= t0 { c0 } else { c0 + 1 };
        let whole1 = if times[c1] <= t1 { c1 } else { c1 - 1 }.max(whole0);
        for &(r, h, w) in &touched {
            if whole0 < whole1 {
                let (i0, i1) = (r * (cols + 1) + whole0, r * (cols + 1) + whole1);
                d_heat[i0] += h;
                d_heat[i1] -= h;
                d_weight[i0] += w;
                d_weight[i1] -= w;
                d_count[i0] += 1;
                d_count[i1] -= 1;
            }
            // At most two: the first and the last, when covered in part.
            let first = (c0 < whole0).then_some(c0);
            let last = (c1 > whole1 && first != Some(c1 - 1)).then_some(c1 - 1);
            for c in first.into_iter().chain(last) {
                let part = overlap(t0, t1, times[c], times[c + 1]) as f64;
                heat[r * cols + c] += h * part;
                weight[r * cols + c] += w * part;
            }
        }
    }
    for r in 0..rows {
        let (mut h, mut w, mut n) = (0f64, 0f64, 0i64);
        for c in 0..cols {
            let i = r * (cols + 1) + c;
            h += d_heat[i];
            w += d_weight[i];
            n += d_count[i];
            if n == 0 {
                (h, w) = (0.0, 0.0);
                continue;
            }
            let width = (times[c + 1] - times[c]) as f64;
            heat[r * cols + c] += h * width;
            weight[r * cols + c] += w * width;
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

    /// The grid as the definition says it, cell by cell: every aggregation
    /// × region × row × column (what `build` computes faster).
    fn by_definition(tl: &Timeline, addrs: &[u64], times: &[u64]) -> Vec<Option<f64>> {
        let (rows, cols) = (addrs.len() - 1, times.len() - 1);
        let mut heat = vec![0f64; rows * cols];
        let mut weight = vec![0f64; rows * cols];
        for (k, (t, a)) in tl.points.iter().enumerate() {
            let (t0, t1) = (*t, t.saturating_add(covered_ns(tl, k, *t, a)));
            for reg in &a.regions {
                for r in 0..rows {
                    let bytes = overlap(reg.start, reg.end, addrs[r], addrs[r + 1]) as f64;
                    for c in 0..cols {
                        let w = bytes * overlap(t0, t1, times[c], times[c + 1]) as f64;
                        heat[r * cols + c] += w * a.frequency(reg);
                        weight[r * cols + c] += w;
                    }
                }
            }
        }
        heat.iter()
            .zip(&weight)
            .map(|(&h, &w)| (w > 0.0).then(|| (h / w).clamp(0.0, 1.0)))
            .collect()
    }

    #[test]
    fn the_fast_sums_equal_the_definition() {
        // Aggregations of uneven spacing (some overlapping in time, one
        // after a gap), regions of every size, grids of several shapes.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut aggs = Vec::new();
        let mut t = 0u64;
        for i in 0..40u64 {
            let mut regions = Vec::new();
            let mut start = next(1 << 12);
            for _ in 0..1 + next(6) {
                let end = start + 1 + next(3 << 20);
                regions.push((start, end, next(21) as u32));
                start = end + next(1 << 20);
            }
            aggs.push((t, agg(i + 1, &regions)));
            t += [
                30_000_000,
                100_000_000,
                100_000_000,
                170_000_000,
                450_000_000,
            ][next(5) as usize];
        }
        let tl = &from_record(&aggs).unwrap()[0];
        let (lo, hi) = tl.extent().unwrap();
        let (t0, t1) = tl.span().unwrap();
        for (rows, cols) in [(1, 1), (7, 13), (32, 100), (5, 400)] {
            for time in [(t0, t1), (t0 + 123_456_789, t1 / 2)] {
                let g = build(tl, (lo, hi), time, rows, cols);
                let want = by_definition(tl, &g.addrs, &g.times);
                for (i, (got, want)) in g.cells.iter().zip(&want).enumerate() {
                    match (got, want) {
                        (Some(a), Some(b)) => {
                            assert!((a - b).abs() < 1e-9, "{rows}x{cols} cell {i}: {a} vs {b}")
                        }
                        (None, None) => {}
                        _ => panic!("{rows}x{cols} cell {i}: {got:?} vs {want:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn many_aggregations_at_one_time_cost_rows_plus_columns() {
        // A hostile record: 20,000 aggregations seen at the same time, each
        // one region over everything, on the largest image grid. By the
        // definition this is 5 × 10^9 steps; the sums take a blink.
        let aggs: Vec<(u64, Aggregation)> = (0..20_000u64)
            .map(|i| (1_000_000_000, agg(i + 1, &[(0, 1 << 40, (i % 21) as u32)])))
            .collect();
        let tl = &from_record(&aggs).unwrap()[0];
        let started = std::time::Instant::now();
        let g = build(tl, (0, 1 << 40), tl.span().unwrap(), 400, 640);
        let took = started.elapsed();
        let mean = (0..20_000u64).map(|i| (i % 21) as f64 / 20.0).sum::<f64>() / 20_000.0;
        assert!(g
            .cells
            .iter()
            .all(|c| c.is_some_and(|v| (v - mean).abs() < 1e-9)));
        // Generous even for a debug build on a loaded machine; the product
        // took minutes.
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }
}
