//! A terminal given over to a view redrawn in place (the live view of
//! `--watch`, the DAMON views with `--watch`): raw mode, the alternate
//! screen, no cursor, and what ends such a view.
//!
//! The terminal is put back as it was (raw mode off, the main screen, the
//! cursor shown) when the [`Screen`] is dropped (the view ends, with or
//! without an error) and on a panic (a hook that restores, then runs the
//! previous hook). SIGTERM, SIGINT and SIGHUP (and Ctrl-C, a key in raw
//! mode) end the view through [`wait`], and the process then exits with
//! 128 + the signal ([`exit_status`]), as it would in line mode; a second
//! one, if the first went unheeded, restores the terminal and exits at
//! once. SIGTSTP (and Ctrl-Z, a key in raw mode) gives the terminal back
//! and stops the process; when it is continued, the view takes the
//! terminal again and [`wait`] asks for a full redraw.
//!
//! A terminal that goes away (its window closed, the tmux server killed,
//! the ssh connection dropped) ends the view at once, with an error:
//! [`wait`] asks poll(2) whether the terminal hung up before it waits for
//! a key, so a view never outlives its screen (even with SIGHUP ignored,
//! as under `nohup`).

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use crate::Failure;

/// How long [`wait`] waits for a key before it looks at the signal flags
/// again (crossterm's poll cannot wait on a signal too: 10 wake-ups a
/// second while idle).
const TICK: Duration = Duration::from_millis(100);

/// The signal (SIGINT for Ctrl-C) that ended the view; 0 if none did.
static ENDED_BY: AtomicI32 = AtomicI32::new(0);

/// SIGTSTP came: [`wait`] gives the terminal back and stops the process.
static SUSPEND: AtomicBool = AtomicBool::new(false);

/// SIGCONT came: [`wait`] asks for a full redraw.
static CONTINUED: AtomicBool = AtomicBool::new(false);

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

/// Raw mode, the alternate screen, no cursor (marked [`ACTIVE`] first, so
/// that a failure half-way is restored too).
fn take() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
}

/// Whether a view redrawn in place can run here: standard output is a
/// terminal, `TERM` names one that can (set, not `dumb`), and the process
/// has a controlling terminal (`/dev/tty`, where the keys are read; not
/// under `setsid`). Otherwise `--watch` prints lines.
pub fn usable() -> bool {
    let term = std::env::var("TERM").unwrap_or_default();
    io::stdout().is_terminal()
        && !term.is_empty()
        && term != "dumb"
        && std::fs::File::open("/dev/tty").is_ok()
}

/// Whether `--watch` is a view redrawn in place (the live view, the DAMON
/// views): standard output a terminal that can show one ([`usable`]),
/// neither `--json` nor `--count` (both for scripts: lines).
pub fn wanted(json: bool, count: Option<u64>) -> bool {
    !json && count.is_none() && usable()
}

/// The exit status of a view that a signal ended: 128 + the signal (130
/// for SIGINT or Ctrl-C, 143 for SIGTERM), as a process killed by it
/// reports to a shell; `None` if no signal did.
pub fn exit_status() -> Option<u8> {
    u8::try_from(ENDED_BY.load(Ordering::SeqCst))
        .ok()
        .filter(|&s| s > 0)
        .map(|s| 128u8.saturating_add(s))
}

/// Notes that signal `sig` ended the view (the first one only).
fn ended_by(sig: i32) {
    let _ = ENDED_BY.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
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
        let screen = Screen;
        take()?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// A flag that SIGTERM, SIGINT and SIGHUP set (the signal kept for
/// [`exit_status`]); a second such signal, if the first went unheeded,
/// restores the terminal and exits with 128 + the signal. SIGTSTP and
/// SIGCONT are noted for [`wait`]. A thread of its own waits for them.
pub fn stop_on_signals() -> io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGTERM, SIGTSTP};
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGTSTP, SIGCONT])?;
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                match sig {
                    SIGTSTP => SUSPEND.store(true, Ordering::SeqCst),
                    SIGCONT => CONTINUED.store(true, Ordering::SeqCst),
                    _ if flag.load(Ordering::SeqCst) => {
                        restore();
                        std::process::exit(128 + sig);
                    }
                    _ => {
                        // The signal before the flag: the view that sees
                        // the flag finds the exit status.
                        ended_by(sig);
                        flag.store(true, Ordering::SeqCst);
                    }
                }
            }
        })?;
    Ok(stop)
}

/// Gives the terminal back and stops the process (as SIGTSTP would have,
/// SIGSTOP since SIGTSTP is caught); once continued (`fg`), takes the
/// terminal again.
fn suspend() -> io::Result<()> {
    restore();
    signal_hook::low_level::raise(signal_hook::consts::SIGSTOP)?;
    take()
}

/// What ended a [`wait`].
pub enum Wake {
    /// The time it was given came.
    Due,
    /// A key was pressed (or repeated).
    Key(KeyEvent),
    /// The terminal changed size, or was given back after a stop (Ctrl-Z,
    /// then `fg`): draw everything again.
    Resize,
    /// A signal asked the view to end.
    Stop,
}

/// Waits until `due` (forever if `None`), a key, a resize or a signal on
/// `stop`, whichever comes first; an error if the terminal went away.
/// Ctrl-C is [`Wake::Stop`] (and SIGINT's exit status); Ctrl-Z and SIGTSTP
/// stop the process, then [`Wake::Resize`] once it is continued.
pub fn wait(stop: &AtomicBool, due: Option<Instant>) -> Result<Wake, Failure> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(Wake::Stop);
        }
        if hung_up() {
            return Err(Failure::Output(io::Error::other("the terminal went away")));
        }
        if SUSPEND.swap(false, Ordering::SeqCst) {
            suspend()?;
            return Ok(Wake::Resize);
        }
        if CONTINUED.swap(false, Ordering::SeqCst) {
            return Ok(Wake::Resize);
        }
        let wait = due.map_or(TICK, |d| {
            d.saturating_duration_since(Instant::now()).min(TICK)
        });
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(k) if is_interrupt(&k) => {
                    ended_by(signal_hook::consts::SIGINT);
                    return Ok(Wake::Stop);
                }
                Event::Key(k) if is_suspend(&k) => {
                    suspend()?;
                    return Ok(Wake::Resize);
                }
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

/// Whether `k` is Ctrl-Z (in raw mode a key, not SIGTSTP).
fn is_suspend(k: &KeyEvent) -> bool {
    k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('z')
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
