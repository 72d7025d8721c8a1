//! `--watch` on a terminal: a screen redrawn in place, like `top`.
//!
//! One row per instance (`family{dimension=instance}`) with its rate in
//! human units (the formatter of [`crate::human`], shared with the table
//! and the line output of `--watch`), per-CPU columns on demand, sorting,
//! a filter by name, a status line (what needs attention first: paused, a
//! skipped sample, a writer gone; then path, liveness, generation, the
//! cost of the last read, epoch) and the keys in a footer.
//!
//! Like `top`, the view outlives its writer: a writer that is gone leaves
//! its last values on screen, marked stale, and a restarted one (a new
//! epoch) is followed. The keys are [`keys`]'s, the drawing [`draw`]'s;
//! the terminal's handling (raw mode, the alternate screen, restoring it,
//! signals, Ctrl-Z, a terminal that hangs up) is [`crate::screen`]'s.

mod draw;
mod fit;
mod keys;

use std::io;
use std::time::{Duration, Instant};

use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::screen::{self, Screen, Wake};
use crate::source::{Read, Source};
use crate::{passing, rates, Failure};

/// After a sample skipped because the segment was busy, the rest before
/// the next try, in multiples of the time the failed read took (if longer
/// than the period).
const BUSY_REST: u32 = 10;

/// What the live view is asked to do.
pub struct Config {
    /// Time between two samples.
    pub period: Duration,
    /// Start with the per-CPU columns shown (`--cpu`).
    pub per_cpu: bool,
}

/// The order of the rows.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Sort {
    /// By name, as the segment lists families.
    Name,
    /// Families as the segment lists them; within each, instances by
    /// value, largest first (values of one family share a unit: a sort
    /// across families would mix bytes with shares of a CPU).
    Value,
}

/// One instance's row, as text.
struct Item {
    name: String,
    /// The family's index in the snapshot: rows sort within it.
    family: usize,
    kind: &'static str,
    value: String,
    magnitude: Option<f64>,
    /// Where it is in the snapshots, for its per-CPU values.
    place: rates::Place,
}

/// What the status line says of the last good read.
struct Taken {
    /// A segment's epoch and generation (a directory has none).
    epoch: Option<u64>,
    generation: Option<u64>,
    read_us: f64,
    interval_s: f64,
}

/// The last sample, ready to draw.
#[derive(Default)]
struct Sample {
    items: Vec<Item>,
    nr_cpus: usize,
    /// `None` until the first good read.
    taken: Option<Taken>,
    /// Who writes: a segment's writer liveness (`writer alive`), or what a
    /// directory's read merged and left out.
    liveness: String,
    /// Whether that needs attention (a writer gone: closed, dead, silent;
    /// a directory's read that left something out): shown first.
    stale: bool,
    note: Option<String>,
}

/// What the last drawing showed, for keys that move within it.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct Drawn {
    /// Rows that pass the filter.
    rows: usize,
    /// Rows the screen has room for.
    height: usize,
    /// Per-CPU columns shown.
    cpus: usize,
    /// CPUs of the segment.
    nr_cpus: usize,
}

/// What the person at the terminal chose.
struct View {
    sort: Sort,
    filter: String,
    editing: bool,
    per_cpu: bool,
    paused: bool,
    /// The first row shown.
    scroll: usize,
    /// The first per-CPU column shown.
    cpu_first: usize,
    last: Drawn,
}

impl View {
    /// The view at start: by name, no filter, per-CPU columns if asked.
    fn new(per_cpu: bool) -> View {
        View {
            sort: Sort::Name,
            filter: String::new(),
            editing: false,
            per_cpu,
            paused: false,
            scroll: 0,
            cpu_first: 0,
            last: Drawn::default(),
        }
    }
}

/// The last two good reads (their rows' places point into them) and a
/// buffer for the next read.
#[derive(Default)]
struct Snapshots {
    prev: Read,
    cur: Read,
    next: Read,
    /// When `cur` was read; `None` before the first good read.
    at: Option<Instant>,
}

/// Runs the live view on `source` (a segment, or a directory read as one)
/// until `q`, a signal, or an error that is not passing (the terminal is
/// restored first).
pub fn run(source: &mut Source, cfg: &Config) -> Result<(), Failure> {
    let stop = screen::stop_on_signals()?;
    let path = source.shown_path();
    let _screen = Screen::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let mut view = View::new(cfg.per_cpu);
    let mut snaps = Snapshots::default();
    let mut sample = Sample {
        liveness: "…".into(),
        ..Sample::default()
    };
    let mut due = Instant::now();
    loop {
        if !view.paused && Instant::now() >= due {
            let t0 = Instant::now();
            let ok = read(source, &mut snaps, &mut sample)?;
            due = if ok {
                // On the period's beat, unless a read was late.
                (due + cfg.period).max(Instant::now())
            } else {
                // A busy segment cost the reader's whole busy timeout of
                // retries: a period's rest at least, and ten times that
                // cost, so that a segment busy for good (a writer dead
                // mid-change) costs a tenth of a CPU at most.
                Instant::now() + cfg.period.max(t0.elapsed() * BUSY_REST)
            };
        }
        let dt = sample.taken.as_ref().map_or(0.0, |t| t.interval_s);
        let cells =
            |i: &Item, cpu: usize| rates::text_on(&snaps.prev, &snaps.cur, i.place, cpu, dt);
        let mut drawn = Drawn::default();
        term.draw(|f| drawn = draw::draw(f, &path, cfg.period, &sample, &view, &cells))?;
        view.last = drawn;
        // Keys until the next sample is due.
        match screen::wait(&stop, (!view.paused).then_some(due))? {
            Wake::Stop => return Ok(()),
            Wake::Key(k) if !keys::key(&mut view, k) => return Ok(()),
            // A new size, or the terminal back after Ctrl-Z: all of it.
            Wake::Resize => term.clear()?,
            Wake::Key(_) | Wake::Due => {}
        }
    }
}

/// Takes a sample into `sample` (true), or notes why it was skipped
/// (false); an error that is not passing ends the view.
fn read(source: &mut Source, snaps: &mut Snapshots, sample: &mut Sample) -> Result<bool, Failure> {
    let t0 = Instant::now();
    match source.read_into(&mut snaps.next) {
        Ok(()) => {
            let now = Instant::now();
            let read_us = now.duration_since(t0).as_secs_f64() * 1e6;
            let dt = snaps
                .at
                .map_or(0.0, |p| now.duration_since(p).as_secs_f64());
            std::mem::swap(&mut snaps.prev, &mut snaps.cur);
            std::mem::swap(&mut snaps.cur, &mut snaps.next);
            if snaps.at.is_none() {
                // Nothing to compare with yet: every row is new.
                snaps.prev = Read::default();
            }
            snaps.at = Some(now);
            *sample = make_sample(&snaps.prev, &snaps.cur, dt, read_us, source);
            Ok(true)
        }
        Err(e) if passing(&e) => {
            sample.note = Some(format!("sample skipped: {e}"));
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The rows of one interval, as text (and the status line's facts); the
/// per-CPU values are left for the drawing, for the rows and columns it
/// shows.
fn make_sample(prev: &Read, cur: &Read, dt: f64, read_us: f64, source: &mut Source) -> Sample {
    let rows = rates::rows(prev, cur, dt);
    let items = rows
        .iter()
        .map(|r| Item {
            name: r.name(),
            family: r.place.family(),
            kind: r.family.kind.as_str(),
            value: r.short_text(dt),
            magnitude: r.magnitude(dt),
            place: r.place,
        })
        .collect();
    let (liveness, stale) = source.status(cur);
    let segment = cur.scrape.is_none().then_some(&cur.snap);
    Sample {
        items,
        nr_cpus: cur.families().nr_cpus(),
        taken: Some(Taken {
            epoch: segment.map(|s| s.epoch),
            generation: segment.map(|s| s.generation),
            read_us,
            interval_s: dt,
        }),
        liveness,
        stale,
        note: None,
    }
}

/// The items `v` shows, in its order: those whose name contains the
/// filter (any case), by name as the segment lists them or, within each
/// family, by value, largest first (rows without a value yet last).
fn shown<'a>(items: &'a [Item], v: &View) -> Vec<&'a Item> {
    let needle = v.filter.to_lowercase();
    let mut shown: Vec<&Item> = items
        .iter()
        .filter(|i| needle.is_empty() || i.name.to_lowercase().contains(&needle))
        .collect();
    if v.sort == Sort::Value {
        shown.sort_by(|a, b| {
            a.family.cmp(&b.family).then_with(|| {
                b.magnitude
                    .unwrap_or(f64::NEG_INFINITY)
                    .total_cmp(&a.magnitude.unwrap_or(f64::NEG_INFINITY))
            })
        });
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An item of family `family` named `name`.
    pub(super) fn item(name: &str, family: usize, magnitude: Option<f64>) -> Item {
        Item {
            name: name.into(),
            family,
            kind: "counter",
            value: String::new(),
            magnitude,
            place: rates::Place::default(),
        }
    }

    #[test]
    fn rows_filtered_by_name_and_sorted_by_value_within_their_family() {
        let items = [
            item("mem.used", 0, Some(8e9)),
            item("task.cpu{task=main}", 1, None),
            item("task.cpu{task=Worker}", 1, Some(0.99)),
            item("task.cpu{task=idle}", 1, Some(0.01)),
        ];
        let names =
            |v: &View| -> Vec<String> { shown(&items, v).iter().map(|i| i.name.clone()).collect() };
        let mut v = View::new(false);
        assert_eq!(
            names(&v),
            [
                "mem.used",
                "task.cpu{task=main}",
                "task.cpu{task=Worker}",
                "task.cpu{task=idle}"
            ]
        );
        v.sort = Sort::Value;
        // Bytes stay above the shares of a CPU, however large.
        assert_eq!(
            names(&v),
            [
                "mem.used",
                "task.cpu{task=Worker}",
                "task.cpu{task=idle}",
                "task.cpu{task=main}"
            ]
        );
        v.filter = "WORKER".into();
        assert_eq!(names(&v), ["task.cpu{task=Worker}"]);
    }
}
