//! What one section of a report shows: a (monitor, target) chosen, its
//! address and time ranges resolved (as given, or the defaults), and the
//! numbers its views draw (the heatmap's grid; the working set's series,
//! percentiles and mean), times counted from the start of the window.
//! A range that does not fit the data is refused here, in one line.

use perfabi_reader::Intervals;

use super::grid::{self, Grid};
use super::options::Config;
use super::timeline::Timeline;
use super::wss::{self, Threshold};
use crate::human;

/// The heatmap of a section.
#[derive(Clone, Debug, PartialEq)]
pub struct Heat {
    /// Addresses drawn (half-open).
    pub addr: (u64, u64),
    /// Whether `--address-range` chose them (else the busiest run of
    /// regions).
    pub given: bool,
    /// The grid, its times from the window's start.
    pub grid: Grid,
}

/// The working set size of a section.
#[derive(Clone, Debug, PartialEq)]
pub struct Wss {
    /// Addresses counted (half-open).
    pub addr: (u64, u64),
    /// Whether `--address-range` chose them (else the whole address
    /// space, as damo counts).
    pub given: bool,
    /// What counted as working set.
    pub threshold: Threshold,
    /// `(t_ns from the window's start, bytes)` of each aggregation.
    pub series: Vec<(u64, u64)>,
    /// `(percentile, bytes)`.
    pub percentiles: Vec<(u32, u64)>,
    /// The mean size, bytes.
    pub mean: Option<f64>,
}

/// One (monitor, target) of a report.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// The kdamond.
    pub monitor_id: u64,
    /// Its target.
    pub target_id: u64,
    /// The intervals of its latest aggregation.
    pub intervals: Intervals,
    /// Aggregations that start in the time range.
    pub aggregations: usize,
    /// Length of the window, ns.
    pub window_ns: u64,
    /// Times drawn, ns from the window's start (half-open).
    pub time: (u64, u64),
    /// Whether `--time-range` chose them (else the whole window).
    pub time_given: bool,
    /// The heatmap, if asked for.
    pub heat: Option<Heat>,
    /// The working set size, if asked for.
    pub wss: Option<Wss>,
}

/// The timelines `--monitor` and `--target` choose (every one without
/// them), or why none.
pub fn select<'a>(
    timelines: &[&'a Timeline],
    monitor: Option<u64>,
    target: Option<u64>,
) -> Result<Vec<&'a Timeline>, String> {
    let chosen: Vec<&Timeline> = timelines
        .iter()
        .copied()
        .filter(|t| monitor.is_none_or(|m| m == t.monitor_id))
        .filter(|t| target.is_none_or(|g| g == t.target_id))
        .collect();
    if !chosen.is_empty() {
        return Ok(chosen);
    }
    let asked = match (monitor, target) {
        (Some(m), Some(g)) => format!("monitor {m} target {g}"),
        (Some(m), None) => format!("monitor {m}"),
        (None, Some(g)) => format!("target {g}"),
        (None, None) => return Err("no DAMON aggregation".into()),
    };
    let there: Vec<String> = timelines
        .iter()
        .take(8)
        .map(|t| format!("monitor {} target {}", t.monitor_id, t.target_id))
        .collect();
    Err(format!(
        "no aggregation of {asked} (there are: {}{})",
        there.join(", "),
        if timelines.len() > 8 { ", …" } else { "" }
    ))
}

/// Seconds for a message.
fn secs(ns: u64) -> String {
    human::time_ns(ns as f64)
}

/// The section of `tl` that `cfg` asks for, on a grid of `rows × cols`.
pub fn build(tl: &Timeline, cfg: &Config, rows: usize, cols: usize) -> Result<Section, String> {
    let who = format!("monitor {} target {}", tl.monitor_id, tl.target_id);
    let ((start, end), (_, last)) = tl
        .span()
        .zip(tl.points.back())
        .ok_or_else(|| format!("{who}: no aggregation"))?;
    let len = end - start;
    let (time, time_given) = match cfg.time {
        None => ((0, len), false),
        Some((lo, _)) if lo >= len => {
            return Err(format!(
                "--time-range starts at {}, after the end of the window ({} long) of {who}",
                secs(lo),
                secs(len)
            ))
        }
        Some((lo, hi)) => ((lo, hi.map_or(len, |h| h.min(len))), true),
    };
    let abs = (start + time.0, start + time.1);
    let aggregations = tl
        .points
        .iter()
        .filter(|(t, _)| (abs.0..abs.1).contains(t))
        .count();
    if aggregations == 0 {
        return Err(format!(
            "--time-range {} to {} holds no aggregation of {who} (a longer range would)",
            secs(time.0),
            secs(time.1)
        ));
    }
    if let Some((lo, hi)) = cfg.address {
        let regions = tl.points.iter().flat_map(|(_, a)| &a.regions);
        if !regions.clone().any(|r| r.start < hi && lo < r.end) {
            let (elo, ehi) = tl.extent().unwrap_or_default();
            return Err(format!(
                "--address-range {lo:#x} to {hi:#x} holds no region of {who} (its regions span {elo:#x} to {ehi:#x})"
            ));
        }
    }
    let heat = if cfg.heatmap {
        let (addr, given) = match cfg.address {
            Some(a) => (a, true),
            None => (
                tl.busiest_range()
                    .ok_or_else(|| format!("{who}: no region to draw"))?,
                false,
            ),
        };
        let mut grid = grid::build(tl, addr, abs, rows, cols);
        for t in &mut grid.times {
            *t -= start;
        }
        Some(Heat { addr, given, grid })
    } else {
        None
    };
    let wss = cfg.wss.then(|| {
        let (addr, given) = cfg.address.map_or(((0, u64::MAX), false), |a| (a, true));
        let series: Vec<(u64, u64)> = wss::series(tl, cfg.threshold, addr, abs)
            .into_iter()
            .map(|(t, s)| (t - start, s))
            .collect();
        let (percentiles, mean) = wss::distribution(&series, &cfg.percentiles);
        Wss {
            addr,
            given,
            threshold: cfg.threshold,
            series,
            percentiles,
            mean,
        }
    });
    Ok(Section {
        monitor_id: tl.monitor_id,
        target_id: tl.target_id,
        intervals: last.intervals,
        aggregations,
        window_ns: len,
        time,
        time_given,
        heat,
        wss,
    })
}

#[cfg(test)]
mod tests {
    use super::super::options::tests::config;
    use super::super::timeline::{from_record, tests::agg};
    use super::*;

    /// Ten aggregations 100 ms apart of a process's space: 4 MiB hot at
    /// 1 GiB in a 64 MiB run, a small stack far above it.
    fn timelines() -> Vec<Timeline> {
        let g = 1u64 << 30;
        let aggs: Vec<_> = (0..10u64)
            .map(|i| {
                let a = agg(
                    i + 1,
                    &[
                        (g, g + (4 << 20), 20),
                        (g + (4 << 20), g + (64 << 20), 0),
                        (1 << 46, (1 << 46) + 4096, 0),
                    ],
                );
                (i * 100_000_000, a)
            })
            .collect();
        from_record(&aggs).unwrap()
    }

    #[test]
    fn defaults_the_busiest_run_the_whole_space_and_the_whole_window() {
        let tls = timelines();
        let s = build(&tls[0], &config(), 16, 10).unwrap();
        assert_eq!(
            (s.time, s.time_given, s.window_ns),
            ((0, 1_000_000_000), false, 1_000_000_000)
        );
        assert_eq!(s.aggregations, 10);
        let h = s.heat.unwrap();
        assert_eq!(
            (h.addr, h.given),
            ((1 << 30, (1 << 30) + (64 << 20)), false)
        );
        assert_eq!(h.grid.times[0], 0);
        assert_eq!(h.grid.get(0, 9), Some(1.0));
        let w = s.wss.unwrap();
        assert_eq!((w.addr, w.given), ((0, u64::MAX), false));
        assert_eq!(
            w.percentiles[..3],
            [(0, 4 << 20), (25, 4 << 20), (50, 4 << 20)]
        );
    }

    #[test]
    fn a_time_range_counts_from_the_window_start_and_is_cut_at_its_end() {
        let tls = timelines();
        let mut cfg = config();
        cfg.time = Some((250_000_000, Some(9_000_000_000)));
        let s = build(&tls[0], &cfg, 16, 10).unwrap();
        assert_eq!((s.time, s.time_given), ((250_000_000, 1_000_000_000), true));
        assert_eq!(s.aggregations, 7);
        let h = s.heat.unwrap();
        assert_eq!(h.grid.times.first(), Some(&250_000_000));
        assert_eq!(h.grid.times.last(), Some(&1_000_000_000));
        assert_eq!(s.wss.unwrap().series.first(), Some(&(300_000_000, 4 << 20)));
    }

    #[test]
    fn ranges_and_choices_that_do_not_fit_are_refused_in_a_line() {
        let tls = timelines();
        let mut cfg = config();
        cfg.time = Some((2_000_000_000, None));
        let e = build(&tls[0], &cfg, 16, 10).unwrap_err();
        assert!(e.contains("after the end of the window"), "{e}");
        cfg.time = Some((910_000_000, Some(950_000_000)));
        let e = build(&tls[0], &cfg, 16, 10).unwrap_err();
        assert!(e.contains("holds no aggregation"), "{e}");
        cfg.time = None;
        cfg.address = Some((0, 4096));
        let e = build(&tls[0], &cfg, 16, 10).unwrap_err();
        assert!(e.contains("holds no region of monitor 7 target 0"), "{e}");
        let all: Vec<&Timeline> = tls.iter().collect();
        let e = select(&all, Some(7), Some(3)).unwrap_err();
        assert_eq!(
            e,
            "no aggregation of monitor 7 target 3 (there are: monitor 7 target 0)"
        );
        assert_eq!(select(&all, Some(7), None).unwrap().len(), 1);
        for e in [&e, &build(&tls[0], &cfg, 16, 10).unwrap_err()] {
            assert!(!e.contains('\n'));
        }
    }
}
