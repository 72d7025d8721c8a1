//! A terminal given over to a view redrawn in place (the live view of
//! `--watch`, the DAMON views with `--watch`): raw mode, the alternate
//! screen, no cursor, and what ends such a view.
//!
//! The terminal is put back as it was (raw mode off, the main screen, the
//! cursor shown) when the [`Screen`] is dropped (the view ends, with or
//! without an error) and on a panic (a hook that restores, then runs the
//! previous hook). SIGTERM, SIGINT and SIGHUP set a flag that [`wait`]
//! checks; a second one, if the first went unheeded, ends the process.
//!
//! A terminal that goes away (its window closed, the tmux server killed,
//! the ssh connection dropped) ends the view at once, with an error:
//! [`wait`] asks poll(2) whether the terminal hung up before it waits for
//! a key, so a view never outlives its screen (even with SIGHUP ignored,
//! as under `nohup`).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use crate::Failure;

/// How long [`wait`] waits for a key before it looks at the signal flag
/// again.
const TICK: Duration = Duration::from_millis(100);

/// Whether the terminal is in a view's state (raw mode, alternate screen),
/// so that it is restored exactly once.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back: raw mode off, the main screen, the cursor
/// shown. Does nothing if it is not (or no longer) in a view.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let mut out = io::stdout();
        let _ = execute!(out, terminal::LeaveAlternateScreen, cursor::Show);
        let _ = out.flush();
    }
}

/// The terminal in a view's state; restored on drop.
pub struct Screen;

impl Screen {
    /// Raw mode, the alternate screen, no cursor; a panic restores the
    /// terminal before the previous hook prints the message.
    pub fn enter() -> io::Result<Screen> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let screen = Screen;
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// A flag that SIGTERM, SIGINT and SIGHUP set; a second such signal, if
/// the first went unheeded, ends the process at once (exit status 1).
pub fn stop_on_signals() -> io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// What ended a [`wait`].
pub enum Wake {
    /// The time it was given came.
    Due,
    /// A key was pressed (or repeated).
    Key(KeyEvent),
    /// The terminal changed size.
    Resize,
    /// A signal asked the view to end.
    Stop,
}

/// Waits until `due` (forever if `None`), a key, a resize or a signal on
/// `stop`, whichever comes first; an error if the terminal went away.
pub fn wait(stop: &AtomicBool, due: Option<Instant>) -> Result<Wake, Failure> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(Wake::Stop);
        }
        if hung_up() {
            return Err(Failure::Output(io::Error::other("the terminal went away")));
        }
        let wait = due.map_or(TICK, |d| {
            d.saturating_duration_since(Instant::now()).min(TICK)
        });
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => return Ok(Wake::Key(k)),
                Event::Resize(..) => return Ok(Wake::Resize),
                _ => {}
            }
        } else if due.is_some_and(|d| Instant::now() >= d) {
            return Ok(Wake::Due);
        }
    }
}

/// Whether `k` is Ctrl-C (in raw mode a key, not a signal).
pub fn is_interrupt(k: &KeyEvent) -> bool {
    k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c')
}

/// Whether the terminal has hung up (or is no terminal any more): poll(2)
/// on standard output, without waiting, says `POLLHUP`, `POLLERR` or
/// `POLLNVAL`.
fn hung_up() -> bool {
    let out = rustix::stdio::stdout();
    let mut fds = [PollFd::new(&out, PollFlags::OUT)];
    match poll(&mut fds, Some(&Timespec::default())) {
        Ok(_) => fds[0]
            .revents()
            .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL),
        Err(e) => e != rustix::io::Errno::INTR,
    }
}
