//! DAMON regions of the latest aggregations: a table and a one-line heatmap
//! of access frequency over the monitored bytes (`perfabi-cat --damon`, in
//! the spirit of damo's `report heats`).

use std::fmt::Write as _;

use perfabi_reader::Aggregation;

use super::palette::{self, RAMP};
use crate::human;

/// `n` bytes as a short human size (the formatter of every view).
fn size(n: u64) -> String {
    human::bytes(n as f64)
}

/// The heatmap of one aggregation: `width` cells over the monitored bytes,
/// regions laid end to end (the gaps between them, which for a process's
/// address space span terabytes, are left out); a cell shows the
/// byte-weighted mean access frequency of what it covers.
pub fn heatmap(a: &Aggregation, width: usize) -> String {
    let total: u64 = a.regions.iter().map(|r| r.len()).sum();
    if total == 0 {
        return String::new();
    }
    let width = width.max(1);
    let cell = total as f64 / width as f64;
    let mut heat = vec![0f64; width];
    let mut offset = 0f64;
    for r in &a.regions {
        let (lo, hi) = (offset, offset + r.len() as f64);
        offset = hi;
        let f = a.frequency(r);
        let first = (lo / cell) as usize;
        let last = ((hi / cell).ceil() as usize).min(width);
        for (c, h) in heat.iter_mut().enumerate().take(last).skip(first) {
            let overlap = (hi.min((c + 1) as f64 * cell) - lo.max(c as f64 * cell)).max(0.0);
            *h += f * overlap;
        }
    }
    heat.iter().map(|&h| palette::char_of(h / cell)).collect()
}

/// Table and heatmap of every aggregation.
pub fn report(aggs: &[Aggregation], width: usize) -> String {
    let mut out = String::new();
    if aggs.is_empty() {
        out.push_str("(no complete DAMON aggregation in the segment)\n");
    }
    for a in aggs {
        let total: u64 = a.regions.iter().map(|r| r.len()).sum();
        let _ = writeln!(
            out,
            "monitor {} target {} aggregation {}: {} regions, {} monitored, sample {}, aggregation {}",
            a.monitor_id,
            a.target_id,
            a.aggregation,
            a.regions.len(),
            size(total),
            human::time_ns(a.intervals.sample_us as f64 * 1e3),
            human::time_ns(a.intervals.aggr_us as f64 * 1e3)
        );
        let _ = writeln!(
            out,
            "{:>4}  {:>18}  {:>18}  {:>10}  {:>11}  {:>5}  {:>6}",
            "#", "START", "END", "SIZE", "NR_ACCESSES", "FREQ", "AGE"
        );
        for (i, r) in a.regions.iter().enumerate() {
            let _ = writeln!(
                out,
                "{i:>4}  {:#18x}  {:#18x}  {:>10}  {:>11}  {:>4.0}%  {:>6}",
                r.start,
                r.end,
                size(r.len()),
                r.nr_accesses,
                a.frequency(r) * 100.0,
                r.age
            );
        }
        let first = a.regions.first().map_or(0, |r| r.start);
        let last = a.regions.last().map_or(0, |r| r.end);
        let _ = writeln!(out, "heat |{}|", heatmap(a, width));
        let _ = writeln!(
            out,
            "     {first:#x}{:>w$}",
            format!("{last:#x}"),
            w = width.saturating_sub(format!("{first:#x}").len()) + 2
        );
        if a.regions.windows(2).any(|w| w[0].end < w[1].start) {
            let _ = writeln!(
                out,
                "     (monitored bytes end to end; gaps between regions left out)"
            );
        }
        let _ = writeln!(out, "     scale: '{RAMP}' = 0% .. 100% access frequency");
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi_reader::{Intervals, Region};

    #[test]
    fn hot_band_shows_where_it_is() {
        let r = |s: u64, e: u64, n| Region {
            start: s,
            end: e,
            nr_accesses: n,
            age: 0,
        };
        let a = Aggregation {
            monitor_id: 1,
            target_id: 1,
            aggregation: 1,
            intervals: Intervals {
                sample_us: 5000,
                aggr_us: 100_000,
            },
            regions: vec![r(0, 100, 0), r(100, 200, 20), r(200, 400, 0)],
        };
        let h = heatmap(&a, 40);
        assert_eq!(h.len(), 40);
        assert_eq!(&h[..10], " ".repeat(10));
        assert_eq!(&h[10..20], "@".repeat(10));
        assert_eq!(&h[20..], " ".repeat(20));
        assert!(report(&[a], 40).contains("100%"));
    }
}
