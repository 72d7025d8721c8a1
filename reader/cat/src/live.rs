//! `--watch` on a terminal: a screen redrawn in place, like `top`.
//!
//! One row per instance (`family{dimension=instance}`) with its rate in
//! human units (the formatter of [`crate::human`], shared with the table
//! and the line output of `--watch`), per-CPU columns on demand, sorting,
//! a filter by name, a status line (path, the writer's liveness, epoch,
//! generation, the cost of the last read) and the keys in a footer.
//!
//! The terminal's handling (raw mode, the alternate screen, restoring it,
//! signals, a terminal that hangs up) is [`crate::screen`]'s.

use std::io;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent};
use perfabi_reader::{Liveness, Segment, Snapshot};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Alignment, Constraint, Flex, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Terminal;

use crate::screen::{self, Screen, Wake};
use crate::{passing, rates, Failure};

/// What the live view is asked to do.
pub struct Config {
    /// Time between two samples.
    pub period: Duration,
    /// Stop after this many samples (`--count`).
    pub count: Option<u64>,
    /// Start with the per-CPU columns shown (`--cpu`).
    pub per_cpu: bool,
}

/// The order of the rows.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Sort {
    /// By name, as the segment lists families.
    Name,
    /// By value, largest first.
    Rate,
}

/// One instance's row, as text.
struct Item {
    name: String,
    kind: &'static str,
    value: String,
    magnitude: Option<f64>,
    cpus: Vec<String>,
}

/// The last sample, ready to draw.
#[derive(Default)]
struct Sample {
    items: Vec<Item>,
    nr_cpus: usize,
    epoch: u64,
    generation: u64,
    read_us: f64,
    interval_s: f64,
    liveness: String,
    note: Option<String>,
}

/// What the person at the terminal chose.
struct View {
    sort: Sort,
    filter: String,
    editing: bool,
    per_cpu: bool,
    paused: bool,
    scroll: usize,
}

/// Runs the live view on `seg` until `q`, a signal, `--count` samples, or
/// an error that is not passing (the terminal is restored first).
pub fn run(seg: &mut Segment, cfg: &Config) -> Result<(), Failure> {
    let stop = screen::stop_on_signals()?;
    let path = seg
        .path()
        .map_or_else(|| "(segment)".to_string(), |p| p.display().to_string());
    let _screen = Screen::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let mut view = View {
        sort: Sort::Name,
        filter: String::new(),
        editing: false,
        per_cpu: cfg.per_cpu,
        paused: false,
        scroll: 0,
    };
    let mut prev = Snapshot::default();
    let mut cur = Snapshot::default();
    let mut prev_t: Option<Instant> = None;
    let mut sample = Sample {
        liveness: "…".into(),
        ..Sample::default()
    };
    let mut taken = 0u64;
    let mut due = Instant::now();
    loop {
        if !view.paused && Instant::now() >= due {
            let t0 = Instant::now();
            match seg.snapshot_into(&mut cur) {
                Ok(()) => {
                    let now = Instant::now();
                    let read_us = now.duration_since(t0).as_secs_f64() * 1e6;
                    let dt = prev_t.map_or(0.0, |p| now.duration_since(p).as_secs_f64());
                    if prev_t.is_none() {
                        // Nothing to compare with yet: every row is new.
                        prev = Snapshot::default();
                    }
                    sample = make_sample(&prev, &cur, dt, read_us, seg);
                    std::mem::swap(&mut prev, &mut cur);
                    prev_t = Some(now);
                    taken += 1;
                }
                Err(e) if passing(&e) => sample.note = Some(format!("sample skipped: {e}")),
                Err(e) => return Err(e.into()),
            }
            due += cfg.period;
            if due < Instant::now() {
                due = Instant::now() + cfg.period;
            }
        }
        term.draw(|f| draw(f, &path, cfg.period, &sample, &view))?;
        if cfg.count.is_some_and(|c| taken > c) {
            return Ok(());
        }
        // Keys until the next sample is due.
        match screen::wait(&stop, (!view.paused).then_some(due))? {
            Wake::Stop => return Ok(()),
            Wake::Key(k) if !key(&mut view, k) => return Ok(()),
            Wake::Key(_) | Wake::Resize | Wake::Due => {}
        }
    }
}

/// Applies key `k` to `view`; false to quit.
fn key(view: &mut View, k: KeyEvent) -> bool {
    if screen::is_interrupt(&k) {
        return false;
    }
    if view.editing {
        match k.code {
            KeyCode::Enter => view.editing = false,
            KeyCode::Esc => {
                view.editing = false;
                view.filter.clear();
            }
            KeyCode::Backspace => {
                view.filter.pop();
            }
            KeyCode::Char(c) => view.filter.push(c),
            _ => {}
        }
        view.scroll = 0;
        return true;
    }
    match k.code {
        KeyCode::Char('q') | KeyCode::Char('Q') => return false,
        KeyCode::Esc => view.filter.clear(),
        KeyCode::Char('s') => {
            view.sort = match view.sort {
                Sort::Name => Sort::Rate,
                Sort::Rate => Sort::Name,
            }
        }
        KeyCode::Char('/') => {
            view.editing = true;
            view.filter.clear();
            view.scroll = 0;
        }
        KeyCode::Char('c') => view.per_cpu = !view.per_cpu,
        KeyCode::Char('p') | KeyCode::Char(' ') => view.paused = !view.paused,
        KeyCode::Down | KeyCode::Char('j') => view.scroll += 1,
        KeyCode::Up | KeyCode::Char('k') => view.scroll = view.scroll.saturating_sub(1),
        KeyCode::PageDown => view.scroll += 20,
        KeyCode::PageUp => view.scroll = view.scroll.saturating_sub(20),
        KeyCode::Home => view.scroll = 0,
        _ => {}
    }
    true
}

/// The rows of one interval, as text (and the status line's facts).
fn make_sample(
    prev: &Snapshot,
    cur: &Snapshot,
    dt: f64,
    read_us: f64,
    seg: &mut Segment,
) -> Sample {
    let rows = rates::rows(prev, cur, dt);
    let items = rows
        .iter()
        .map(|r| Item {
            name: r.name(),
            kind: r.family.kind.as_str(),
            value: r.text(dt),
            magnitude: r.magnitude(dt),
            cpus: (0..cur.nr_cpus)
                .map(|c| r.text_on(prev, cur, c, dt))
                .collect(),
        })
        .collect();
    let liveness = match seg.info() {
        Ok(i) => liveness(&i.liveness),
        Err(e) => format!("unknown ({e})"),
    };
    Sample {
        items,
        nr_cpus: cur.nr_cpus,
        epoch: cur.epoch,
        generation: cur.generation,
        read_us,
        interval_s: dt,
        liveness,
        note: None,
    }
}

/// The writer's liveness in a word or three.
fn liveness(l: &Liveness) -> String {
    match l {
        Liveness::Alive => "alive".into(),
        Liveness::Kernel => "kernel".into(),
        Liveness::Closed => "closed".into(),
        Liveness::Silent { silent_for } => {
            format!("stale (silent {:.1} s)", silent_for.as_secs_f64())
        }
        Liveness::Dead { silent_for } => {
            format!("stale (writer gone, {:.1} s)", silent_for.as_secs_f64())
        }
    }
}

/// Width of `s` in terminal cells (every character the formatter writes
/// takes one).
fn width(s: &str) -> u16 {
    u16::try_from(s.chars().count()).unwrap_or(u16::MAX)
}

/// The items `v` shows, in its order: those whose name contains the
/// filter (any case), by name as the segment lists them or by value,
/// largest first (rows without a value yet last).
fn shown<'a>(items: &'a [Item], v: &View) -> Vec<&'a Item> {
    let needle = v.filter.to_lowercase();
    let mut shown: Vec<&Item> = items
        .iter()
        .filter(|i| needle.is_empty() || i.name.to_lowercase().contains(&needle))
        .collect();
    if v.sort == Sort::Rate {
        shown.sort_by(|a, b| {
            b.magnitude
                .unwrap_or(f64::NEG_INFINITY)
                .total_cmp(&a.magnitude.unwrap_or(f64::NEG_INFINITY))
        });
    }
    shown
}

/// Draws the status line, the table and the footer.
fn draw(f: &mut ratatui::Frame, path: &str, period: Duration, s: &Sample, v: &View) {
    let [status, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());

    let mut line = format!(
        "{path}  writer {}  epoch {:#018x}  gen {}  read {:.1} µs  every {:.2} s",
        s.liveness,
        s.epoch,
        s.generation,
        s.read_us,
        period.as_secs_f64()
    );
    // The measured interval, only when it is off by more than 5 % (a
    // slow read, a stopped terminal): the rates are per measured second.
    let want = period.as_secs_f64();
    if s.interval_s > 0.0 && (s.interval_s - want).abs() > want * 0.05 {
        line.push_str(&format!(" (took {:.2} s)", s.interval_s));
    }
    if v.paused {
        line.push_str("  PAUSED");
    }
    if let Some(n) = &s.note {
        line.push_str("  ");
        line.push_str(n);
    }
    f.render_widget(
        Paragraph::new(line).style(Style::new().add_modifier(Modifier::REVERSED)),
        status,
    );

    let shown = shown(&s.items, v);
    let cpus = if v.per_cpu { s.nr_cpus } else { 0 };
    let mut head = vec!["NAME".to_string(), "KIND".into(), "VALUE".into()];
    head.extend((0..cpus).map(|c| format!("cpu{c}")));
    // Every column as wide as its widest cell among the rows shown, so
    // that a long name moves the values right, all together.
    let mut widths: Vec<u16> = head.iter().map(|h| width(h)).collect();
    for i in &shown {
        widths[0] = widths[0].max(width(&i.name));
        widths[1] = widths[1].max(width(i.kind));
        widths[2] = widths[2].max(width(&i.value));
        for c in 0..cpus {
            widths[3 + c] = widths[3 + c].max(i.cpus.get(c).map_or(0, |t| width(t)));
        }
    }
    let right = |t: String, c: usize| {
        if c >= 2 {
            Cell::from(Line::from(t).alignment(Alignment::Right))
        } else {
            Cell::from(t)
        }
    };
    let header = Row::new(head.into_iter().enumerate().map(|(c, h)| right(h, c)))
        .style(Style::new().add_modifier(Modifier::BOLD));
    let visible = usize::from(body.height.saturating_sub(1));
    let scroll = v.scroll.min(shown.len().saturating_sub(visible));
    let rows: Vec<Row> = shown
        .iter()
        .skip(scroll)
        .map(|i| {
            let mut cells = vec![
                right(i.name.clone(), 0),
                right(i.kind.to_string(), 1),
                right(i.value.clone(), 2),
            ];
            cells.extend(
                (0..cpus).map(|c| right(i.cpus.get(c).cloned().unwrap_or_default(), 3 + c)),
            );
            Row::new(cells)
        })
        .collect();
    let table = Table::new(rows, widths.into_iter().map(Constraint::Length))
        .header(header)
        .column_spacing(2)
        // Columns as wide as their cells, the spare room on the right.
        .flex(Flex::Start);
    if s.items.is_empty() {
        f.render_widget(Paragraph::new("(no counters registered)"), body);
    } else {
        f.render_widget(table, body);
    }

    let footer_text = if v.editing {
        format!("filter: {}_   Enter keep  Esc clear", v.filter)
    } else {
        format!(
            "q quit  s sort ({})  / filter{}  c per-CPU ({})  p pause  ↑↓ scroll   {} of {} rows",
            match v.sort {
                Sort::Name => "name",
                Sort::Rate => "rate",
            },
            if v.filter.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.filter)
            },
            if v.per_cpu { "on" } else { "off" },
            shown.len(),
            s.items.len()
        )
    };
    f.render_widget(
        Paragraph::new(footer_text).style(Style::new().add_modifier(Modifier::REVERSED)),
        footer,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    fn view() -> View {
        View {
            sort: Sort::Name,
            filter: String::new(),
            editing: false,
            per_cpu: false,
            paused: false,
            scroll: 0,
        }
    }

    fn press(v: &mut View, code: KeyCode) -> bool {
        key(v, KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn item(name: &str, magnitude: Option<f64>) -> Item {
        Item {
            name: name.into(),
            kind: "counter",
            value: String::new(),
            magnitude,
            cpus: Vec::new(),
        }
    }

    #[test]
    fn keys_sort_filter_toggle_and_quit() {
        let mut v = view();
        assert!(press(&mut v, KeyCode::Char('s')));
        assert_eq!(v.sort, Sort::Rate);
        assert!(press(&mut v, KeyCode::Char('s')));
        assert_eq!(v.sort, Sort::Name);
        assert!(press(&mut v, KeyCode::Char('c')));
        assert!(v.per_cpu);
        assert!(press(&mut v, KeyCode::Char('p')));
        assert!(v.paused);
        // While typing a filter, q and s are letters of it.
        assert!(press(&mut v, KeyCode::Char('/')));
        for c in "qs".chars() {
            assert!(press(&mut v, KeyCode::Char(c)));
        }
        assert!(press(&mut v, KeyCode::Backspace));
        assert!(press(&mut v, KeyCode::Enter));
        assert_eq!((v.filter.as_str(), v.editing), ("q", false));
        assert!(press(&mut v, KeyCode::Esc));
        assert_eq!(v.filter, "");
        assert!(!press(&mut v, KeyCode::Char('q')));
        assert!(!key(
            &mut view(),
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
        ));
    }

    #[test]
    fn rows_filtered_by_name_and_sorted_by_value() {
        let items = [
            item("net.rx", Some(10.0)),
            item("task.cpu{task=main}", None),
            item("task.cpu{task=Worker}", Some(99.0)),
        ];
        let names =
            |v: &View| -> Vec<String> { shown(&items, v).iter().map(|i| i.name.clone()).collect() };
        let mut v = view();
        assert_eq!(
            names(&v),
            ["net.rx", "task.cpu{task=main}", "task.cpu{task=Worker}"]
        );
        v.sort = Sort::Rate;
        assert_eq!(
            names(&v),
            ["task.cpu{task=Worker}", "net.rx", "task.cpu{task=main}"]
        );
        v.filter = "WORKER".into();
        assert_eq!(names(&v), ["task.cpu{task=Worker}"]);
    }
}
