//! `--watch` with `--heatmap` or `--wss` on a segment: aggregations read
//! without end into a rolling window, a report of it every period, to a
//! pipe or a file (one report after another) or on a terminal (redrawn in
//! place, through [`crate::screen`]).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crossterm::cursor::MoveTo;
use crossterm::event::KeyCode;
use crossterm::queue;
use crossterm::style::{Attribute, Print, SetAttribute};
use crossterm::terminal::{self, Clear, ClearType};
use perfabi_reader::Segment;

use super::collect::Collector;
use super::draw::{render, Preface};
use super::options::Config;
use crate::screen::{self, Screen, Wake};
use crate::Failure;

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
    let mut preface = Preface::default();
    preface
        .json
        .insert("elapsed_s".into(), elapsed.as_secs_f64().into());
    render(&timelines, cfg, screen, preface)
}

/// `--watch` to a pipe or a file: a report every `period`, from a rolling
/// window; one that cannot be drawn yet says why, and the watch goes on.
pub fn lines(seg: &mut Segment, cfg: &Config, period: Duration) -> Result<(), Failure> {
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
            (Err(why), true) => crate::json::line(
                &mut out,
                &serde_json::json!({ "elapsed_s": elapsed.as_secs_f64(), "waiting": why }),
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
/// (and when the terminal's size changes, or it comes back after Ctrl-Z),
/// from a rolling window, until `q`, Esc, Ctrl-C or a signal (`--count`
/// asks for lines instead, see [`screen::wanted`]).
pub fn screen(seg: &mut Segment, cfg: &Config, period: Duration) -> Result<(), Failure> {
    let stop = screen::stop_on_signals()?;
    let _screen = Screen::enter()?;
    let mut c = Collector::new(cfg.window);
    let start = Instant::now();
    let mut next = start;
    loop {
        let now = Instant::now();
        if now >= c.due() {
            c.read(seg)?;
        }
        if now >= next {
            paint(&c, cfg, period, start.elapsed())?;
            next += period;
        }
        match screen::wait(&stop, Some(c.due().min(next)))? {
            Wake::Stop => return Ok(()),
            Wake::Key(k) if matches!(k.code, KeyCode::Char('q' | 'Q') | KeyCode::Esc) => {
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
