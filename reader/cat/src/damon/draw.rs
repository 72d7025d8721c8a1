//! The report of a window of aggregations, drawn: the sections
//! `--monitor` and `--target` choose, each built at the size of
//! [`super::layout`], as text or one line of JSON ([`super::report`](mod@super::report)), or
//! the one section as an image ([`super::plot`]) written to `--output`.

use std::path::Path;

use perfabi_record::damon::Workload;
use perfabi_shm::safe_open::escape_path;

use super::layout::{dims, Dims, IMAGE};
use super::options::Config;
use super::plot;
use super::problem::Problem;
use super::report;
use super::section::{self, Section};
use super::timeline::Timeline;

/// The sections of `timelines` that `cfg` asks for, drawn `dims` large.
fn sections(timelines: &[&Timeline], cfg: &Config, dims: Dims) -> Result<Vec<Section>, String> {
    section::select(timelines, cfg.monitor, cfg.target)?
        .into_iter()
        .map(|tl| section::build(tl, cfg, dims.heat_rows, dims.cols))
        .collect()
}

/// What a report says besides its sections: lines of text before them,
/// and fields of its JSON.
#[derive(Default)]
pub struct Preface {
    /// Lines of text before the sections.
    pub lines: Vec<String>,
    /// Fields of the JSON document besides `sections`.
    pub json: serde_json::Map<String, serde_json::Value>,
}

impl Preface {
    /// What a record says of its workload, if it does.
    pub fn of_workload(w: Option<&Workload>) -> Preface {
        let mut p = Preface::default();
        if let Some(w) = w {
            let size = |a: u64, b: u64| crate::human::bytes(b.saturating_sub(a) as f64);
            p.lines.push(format!(
                "the record's workload: pid {} mapped {:#x} to {:#x} ({}) and kept rewriting {:#x} to {:#x} ({})",
                w.pid,
                w.start,
                w.end,
                size(w.start, w.end),
                w.start,
                w.hot_end,
                size(w.start, w.hot_end)
            ));
            p.json.insert(
                "workload".into(),
                serde_json::json!({ "start": w.start, "end": w.end, "hot_end": w.hot_end, "pid": w.pid }),
            );
        }
        p
    }
}

/// The report of `timelines`, as `cfg` asks (text or one JSON line),
/// sized for `screen`.
pub fn render(
    timelines: &[&Timeline],
    cfg: &Config,
    screen: Option<(u16, u16)>,
    preface: Preface,
) -> Result<String, String> {
    let n = section::select(timelines, cfg.monitor, cfg.target)?.len();
    let dims = dims(cfg, screen, n);
    let sections = sections(timelines, cfg, dims)?;
    Ok(if cfg.json {
        let mut line = Vec::new();
        crate::json::line(&mut line, &report::json(&sections, preface.json))
            .map_err(|e| e.to_string())?;
        String::from_utf8(line).map_err(|e| e.to_string())?
    } else {
        report::text(
            &sections,
            &preface.lines,
            cfg.colour,
            (dims.wss_rows, dims.cols),
        )
    })
}

/// The image of the one section of `timelines` that `cfg` asks for,
/// written to `--output`.
pub fn image(
    timelines: &[&Timeline],
    cfg: &Config,
    path: &Path,
    format: plot::Format,
) -> Result<(), Problem> {
    let chosen = section::select(timelines, cfg.monitor, cfg.target).map_err(Problem::Usage)?;
    let [tl] = chosen[..] else {
        let names: Vec<String> = chosen
            .iter()
            .map(|t| format!("--monitor {} --target {}", t.monitor_id, t.target_id))
            .collect();
        return Err(Problem::Usage(format!(
            "--output draws one monitor and target, and there are {}: choose one ({})",
            chosen.len(),
            names.join(", ")
        )));
    };
    let (rows, cols) = (cfg.rows.unwrap_or(IMAGE.0), cfg.cols.unwrap_or(IMAGE.1));
    let s = section::build(tl, cfg, rows, cols).map_err(Problem::Usage)?;
    let who = format!("monitor {} target {}", s.monitor_id, s.target_id);
    let bytes = if let Some(h) = &s.heat {
        let title = format!(
            "{who}: access frequency, {:#x} to {:#x}",
            h.addr.0, h.addr.1
        );
        plot::heatmap(&h.grid, &plot::Labels { title }, format)
    } else if let Some(w) = &s.wss {
        let title = format!("{who}: working set size");
        plot::wss(&w.series, &w.percentiles, &plot::Labels { title }, format)
    } else {
        Err("--output draws --heatmap or --wss: give one".into())
    }
    .map_err(Problem::Usage)?;
    plot::write(path, &bytes).map_err(Problem::Image)?;
    eprintln!("perfabi-cat: wrote {}", escape_path(path));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::options::tests::config;
    use super::super::timeline::{from_record, tests::agg};
    use super::*;

    #[test]
    fn a_report_fits_the_screen_it_is_drawn_for() {
        let aggs: Vec<_> = (0..30u64)
            .map(|i| {
                (
                    i * 100_000_000,
                    agg(i + 1, &[(0x7f00_0000_0000, 0x7f00_0400_0000, 20)]),
                )
            })
            .collect();
        let mut one = from_record(&aggs).unwrap();
        let mut two = aggs.clone();
        two.iter_mut().for_each(|(_, a)| a.target_id = 1);
        one.extend(from_record(&two).unwrap());
        let one: Vec<&Timeline> = one.iter().collect();
        let mut cfg = config();
        for (heatmap, wss) in [(true, false), (false, true), (true, true)] {
            for (timelines, screen) in [
                (&one[..1], (100, 40)),
                (&one[..], (120, 60)),
                (&one[..1], (80, 30)),
            ] {
                cfg.heatmap = heatmap;
                cfg.wss = wss;
                let text = render(timelines, &cfg, Some(screen), Preface::default()).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                // A status line below.
                assert!(
                    lines.len() < usize::from(screen.1),
                    "{heatmap} {wss} {screen:?}: {} lines",
                    lines.len()
                );
                assert!(
                    lines.len() + 8 >= usize::from(screen.1),
                    "{heatmap} {wss} {screen:?}: {} lines",
                    lines.len()
                );
                let cells = lines.iter().filter(|l| l.contains('┤') || l.contains('│'));
                assert!(
                    cells
                        .clone()
                        .all(|l| l.chars().count() <= usize::from(screen.0)),
                    "{text}"
                );
            }
        }
        // Without a screen: 24 × 72 cells.
        cfg.heatmap = true;
        cfg.wss = false;
        let text = render(&one[..1], &cfg, None, Preface::default()).unwrap();
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.contains('┤') || l.contains('│'))
            .collect();
        assert_eq!(rows.len(), 24);
        assert!(rows
            .iter()
            .all(|l| l.split_once(['┤', '│']).unwrap().1.chars().count() == 72));
    }
}
