//! Running the views over time: where the aggregations come from (a
//! record read with `--from`, a segment collected for `--duration`, or
//! sampled without end with `--watch`, see [`watch`]) and where the one
//! report goes (stdout as text or JSON, or an image file).

use std::io::{self, IsTerminal, Write};
use std::path::Path;

use crossterm::terminal;
use perfabi_reader::{Options, Segment};
use perfabi_record::damon::read_file;
use perfabi_shm::safe_open::escape_path;

use super::collect::Collector;
use super::draw::{image, render, Preface};
use super::options::{Config, Source};
use super::problem::Problem;
use super::timeline::{self, Timeline};
use super::watch;
use crate::{screen, Failure};

/// The one report of `timelines` (from a record, or a collection): an
/// image with `--output`, else text or JSON on stdout.
fn once(timelines: &[&Timeline], cfg: &Config, preface: Preface) -> Result<(), Failure> {
    if let Some((path, format)) = &cfg.output {
        return Ok(image(timelines, cfg, path, *format)?);
    }
    let text = render(timelines, cfg, terminal_size(), preface).map_err(Problem::Usage)?;
    io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

/// The terminal's size, if standard output is one.
fn terminal_size() -> Option<(u16, u16)> {
    io::stdout()
        .is_terminal()
        .then(|| terminal::size().ok())
        .flatten()
}

/// Runs the views `cfg` asks for, on the record it names or the segment
/// at `path`.
pub fn run(cfg: &Config, path: &Path, opts: Options) -> Result<(), Failure> {
    let duration = match &cfg.source {
        Source::Record {
            path,
            limit,
            intervals,
        } => {
            let record = read_file(path, *limit, *intervals).map_err(Problem::Record)?;
            let timelines = timeline::from_record(&record.aggregations).map_err(|why| {
                Problem::Malformed(format!("--from {}: {why}", escape_path(path)))
            })?;
            let timelines: Vec<&Timeline> = timelines.iter().collect();
            return once(
                &timelines,
                cfg,
                Preface::of_workload(record.workload.as_ref()),
            );
        }
        Source::Segment { duration } => duration,
    };
    let mut seg = Segment::open_with(path, opts)?;
    match cfg.watch {
        // Where the live view would be, a screen; else lines.
        Some(period) if screen::wanted(cfg.json, cfg.count) => watch::screen(&mut seg, cfg, period),
        Some(period) => watch::lines(&mut seg, cfg, period),
        None => {
            eprintln!(
                "perfabi-cat: collecting DAMON aggregations from {} for {} (--duration)",
                escape_path(path),
                crate::human::time_ns(duration.as_nanos() as f64)
            );
            let mut c = Collector::new(cfg.window);
            c.run_for(&mut seg, *duration)?;
            if let Some(why) = c.ended() {
                eprintln!("perfabi-cat: stopped collecting {why}; drawing what was collected");
            }
            let timelines = c.timelines();
            if timelines.is_empty() {
                return Err(Problem::Silent(format!(
                    "no DAMON aggregation in {} during {} (is a DAMON source publishing?)",
                    escape_path(path),
                    crate::human::time_ns(duration.as_nanos() as f64)
                ))
                .into());
            }
            once(&timelines, cfg, Preface::default())
        }
    }
}
