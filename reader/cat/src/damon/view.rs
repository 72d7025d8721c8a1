//! Running the views over time: where the aggregations come from (a
//! segment collected for `--duration`, or sampled without end with
//! `--watch`), how large to draw them, and where the report goes (stdout
//! as text or JSON, one report per period, or a screen redrawn in place).

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crossterm::cursor::MoveTo;
use crossterm::event::KeyCode;
use crossterm::queue;
use crossterm::style::{Attribute, Print, SetAttribute};
use crossterm::terminal::{self, Clear, ClearType};
use perfabi_reader::{Options, Segment};

use super::collect::Collector;
use super::options::{Config, Source};
use super::report;
use super::section::{self, Section};
use super::timeline::Timeline;
use crate::screen::{self, Screen, Wake};
use crate::Failure;

/// Why the views over time could not be drawn.
#[derive(Debug)]
pub enum Problem {
    /// A value that does not fit the command line or the data: a range
    /// outside it, no such monitor or target (exit 2).
    Usage(String),
    /// No aggregation came from the segment (exit 5: retry later).
    Silent(String),
}

impl Problem {
    /// perfabi-cat's exit status for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Problem::Usage(_) => 2,
            Problem::Silent(_) => 5,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Usage(why) | Problem::Silent(why) => f.write_str(why),
        }
    }
}

impl From<Problem> for Failure {
    fn from(p: Problem) -> Self {
        Failure::Damon(p)
    }
}

/// Heatmap rows and columns without a terminal or `--rows`/`--cols`.
const PLAIN: (usize, usize) = (24, 72);
/// Room on the left for the widest address label (`0x` and 16 digits, a
/// space, the axis).
const LEFT: usize = 20;

/// How large to draw: heatmap rows, the working set's chart lines, the
/// columns of both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dims {
    heat_rows: usize,
    wss_rows: usize,
    cols: usize,
}

/// The dimensions for `sections` sections: `--rows` and `--cols` if
/// given, else what fits `screen` (columns, lines), else [`PLAIN`].
fn dims(cfg: &Config, screen: Option<(u16, u16)>, sections: usize) -> Dims {
    let (w, h) = screen.map_or((0, 0), |(w, h)| (usize::from(w), usize::from(h)));
    let cols = cfg.cols.unwrap_or(if w > 0 {
        w.saturating_sub(LEFT).max(8)
    } else {
        PLAIN.1
    });
    // Lines besides the cells: the section's title; the heatmap's
    // address line, time axis and legend; the working set's line, blank,
    // table (a line per percentile, the mean, a heading) and time axis.
    let heat_extra = 1 + 4;
    let wss_extra = 2 + cfg.percentiles.len() + 2 + 2;
    let per = (h.saturating_sub(1) / sections.max(1)).saturating_sub(1);
    let rows = cfg.rows.unwrap_or(if h > 0 {
        per.saturating_sub(if cfg.heatmap { heat_extra } else { 1 })
    } else {
        PLAIN.0
    });
    match (cfg.heatmap, cfg.wss) {
        (true, true) => {
            let wss_rows = (rows / 3).clamp(3, 8);
            let heat_rows = match (cfg.rows, h) {
                (None, 1..) => rows.saturating_sub(wss_rows + wss_extra),
                _ => rows,
            };
            Dims {
                heat_rows: heat_rows.max(4),
                wss_rows,
                cols,
            }
        }
        (false, _) => Dims {
            heat_rows: rows.max(4),
            wss_rows: match (cfg.rows, h) {
                (None, 1..) => rows.saturating_sub(wss_extra).max(3),
                (None, 0) => 8,
                (Some(r), _) => r,
            },
            cols,
        },
        (true, false) => Dims {
            heat_rows: rows.max(4),
            wss_rows: 0,
            cols,
        },
    }
}

/// The sections of `timelines` that `cfg` asks for, drawn `dims` large.
fn sections(timelines: &[Timeline], cfg: &Config, dims: Dims) -> Result<Vec<Section>, String> {
    section::select(timelines, cfg.monitor, cfg.target)?
        .into_iter()
        .map(|tl| section::build(tl, cfg, dims.heat_rows, dims.cols))
        .collect()
}

/// The report of `timelines`, as `cfg` asks (text or one JSON line),
/// sized for `screen`.
fn render(
    timelines: &[Timeline],
    cfg: &Config,
    screen: Option<(u16, u16)>,
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<String, String> {
    let n = section::select(timelines, cfg.monitor, cfg.target)?.len();
    let dims = dims(cfg, screen, n);
    let sections = sections(timelines, cfg, dims)?;
    Ok(if cfg.json {
        format!("{}\n", report::json(&sections, extra))
    } else {
        report::text(&sections, &[], cfg.colour, (dims.wss_rows, dims.cols))
    })
}

/// The terminal's size, if standard output is one.
fn terminal_size() -> Option<(u16, u16)> {
    io::stdout()
        .is_terminal()
        .then(|| terminal::size().ok())
        .flatten()
}

/// Runs the views `cfg` asks for on the segment at `path`.
pub fn run(cfg: &Config, path: &Path, opts: Options) -> Result<(), Failure> {
    let Source::Segment { duration } = &cfg.source;
    let mut seg = Segment::open_with(path, opts)?;
    match cfg.watch {
        Some(period) if !cfg.json && io::stdout().is_terminal() => {
            watch_screen(&mut seg, cfg, period)
        }
        Some(period) => watch_lines(&mut seg, cfg, period),
        None => {
            eprintln!(
                "perfabi-cat: collecting DAMON aggregations from {} for {} (--duration)",
                path.display(),
                crate::human::time_ns(duration.as_nanos() as f64)
            );
            let mut c = Collector::new(cfg.window);
            c.run_for(&mut seg, *duration)?;
            let timelines = c.timelines();
            if timelines.is_empty() {
                return Err(Problem::Silent(format!(
                    "no DAMON aggregation in {} during {} (is a DAMON source publishing?)",
                    path.display(),
                    crate::human::time_ns(duration.as_nanos() as f64)
                ))
                .into());
            }
            let text = render(&timelines, cfg, terminal_size(), Default::default())
                .map_err(Problem::Usage)?;
            let mut out = io::stdout().lock();
            out.write_all(text.as_bytes())?;
            Ok(())
        }
    }
}

/// Why a report of a live window is not drawn yet, or its text.
fn live_report(
    c: &Collector,
    cfg: &Config,
    screen: Option<(u16, u16)>,
    elapsed: Duration,
) -> Result<String, String> {
    let timelines = c.timelines();
    if timelines.is_empty() {
        return Err("no DAMON aggregation in the segment yet".into());
    }
    let mut extra = serde_json::Map::new();
    extra.insert("elapsed_s".into(), elapsed.as_secs_f64().into());
    render(&timelines, cfg, screen, extra)
}

/// `--watch` to a pipe or a file: a report every `period`, from a rolling
/// window; one that cannot be drawn yet says why, and the watch goes on.
fn watch_lines(seg: &mut Segment, cfg: &Config, period: Duration) -> Result<(), Failure> {
    let mut c = Collector::new(cfg.window);
    let start = Instant::now();
    let mut out = io::stdout().lock();
    for n in 1u64.. {
        let next = start + period.mul_f64(n as f64);
        while c.due() < next {
            std::thread::sleep(c.due().saturating_duration_since(Instant::now()));
            c.read(seg)?;
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let elapsed = start.elapsed();
        match (live_report(&c, cfg, None, elapsed), cfg.json) {
            (Ok(text), true) => out.write_all(text.as_bytes())?,
            (Ok(text), false) => {
                writeln!(out, "--- {:.2} s ---", elapsed.as_secs_f64())?;
                out.write_all(text.as_bytes())?;
            }
            (Err(why), true) => writeln!(
                out,
                "{}",
                serde_json::json!({ "elapsed_s": elapsed.as_secs_f64(), "waiting": why })
            )?,
            (Err(why), false) => writeln!(out, "--- {:.2} s: {why} ---", elapsed.as_secs_f64())?,
        }
        out.flush()?;
        if cfg.count.is_some_and(|k| n >= k) {
            break;
        }
    }
    Ok(())
}

/// `--watch` on a terminal: the report redrawn in place every `period`
/// (and when the terminal's size changes), from a rolling window, until
/// `q`, a signal or `--count` reports.
fn watch_screen(seg: &mut Segment, cfg: &Config, period: Duration) -> Result<(), Failure> {
    let stop = screen::stop_on_signals()?;
    let _screen = Screen::enter()?;
    let mut c = Collector::new(cfg.window);
    let start = Instant::now();
    let mut next = start;
    let mut drawn = 0u64;
    loop {
        let now = Instant::now();
        if now >= c.due() {
            c.read(seg)?;
        }
        if now >= next {
            paint(&c, cfg, period, start.elapsed())?;
            drawn += 1;
            next += period;
            if cfg.count.is_some_and(|k| drawn > k) {
                return Ok(());
            }
        }
        match screen::wait(&stop, Some(c.due().min(next)))? {
            Wake::Stop => return Ok(()),
            Wake::Key(k)
                if screen::is_interrupt(&k)
                    || matches!(k.code, KeyCode::Char('q' | 'Q') | KeyCode::Esc) =>
            {
                return Ok(())
            }
            Wake::Resize => paint(&c, cfg, period, start.elapsed())?,
            Wake::Key(_) | Wake::Due => {}
        }
    }
}

/// Draws the report of `c`'s window over the whole screen, a status line
/// at the bottom.
fn paint(c: &Collector, cfg: &Config, period: Duration, elapsed: Duration) -> io::Result<()> {
    let (w, h) = terminal::size()?;
    let body = live_report(c, cfg, Some((w, h)), elapsed).unwrap_or_else(|why| format!("{why}\n"));
    let (reads, skipped) = c.reads();
    let status = format!(
        "q quit   every {:.2} s   {:.1} s collected, {reads} reads ({skipped} skipped)",
        period.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    let width = usize::from(w);
    let mut out = io::stdout().lock();
    queue!(out, MoveTo(0, 0))?;
    for line in body.lines().take(usize::from(h.saturating_sub(1))) {
        // Only lines without escapes (headers, axes) can be too long:
        // cells are as many as fit.
        if line.contains('\x1b') {
            queue!(out, Print(line))?;
        } else {
            queue!(out, Print(line.chars().take(width).collect::<String>()))?;
        }
        queue!(out, Clear(ClearType::UntilNewLine), Print("\r\n"))?;
    }
    queue!(
        out,
        Clear(ClearType::FromCursorDown),
        MoveTo(0, h.saturating_sub(1)),
        SetAttribute(Attribute::Reverse),
        Print(status.chars().take(width).collect::<String>()),
        SetAttribute(Attribute::Reset)
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::super::term::Colour;
    use super::super::timeline::{from_record, tests::agg};
    use super::super::wss::Threshold;
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
        let mut one = from_record(&aggs);
        let mut two = aggs.clone();
        two.iter_mut().for_each(|(_, a)| a.target_id = 1);
        one.extend(from_record(&two));
        let mut cfg = Config {
            heatmap: true,
            wss: false,
            source: Source::Segment {
                duration: Duration::from_secs(1),
            },
            window: 100,
            address: None,
            time: None,
            monitor: None,
            target: None,
            rows: None,
            cols: None,
            colour: Colour::Off,
            percentiles: vec![0, 25, 50, 75, 100],
            threshold: Threshold::default(),
            json: false,
            watch: None,
            count: None,
        };
        for (heatmap, wss) in [(true, false), (false, true), (true, true)] {
            for (timelines, screen) in [
                (&one[..1], (100, 40)),
                (&one[..], (120, 60)),
                (&one[..1], (80, 30)),
            ] {
                cfg.heatmap = heatmap;
                cfg.wss = wss;
                let text = render(timelines, &cfg, Some(screen), Default::default()).unwrap();
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
        let text = render(&one[..1], &cfg, None, Default::default()).unwrap();
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
