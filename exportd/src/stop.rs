//! Stopping the daemon's threads: a flag set once (by a signal handler or
//! by the daemon), and sleeps that end early when it is set, so that a
//! thread sleeps until its next piece of work instead of waking every few
//! milliseconds to look at the flag. On a virtual machine each such wakeup
//! costs tens of microseconds of CPU time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The stop flag and the sleepers that wait on it.
#[derive(Default)]
pub struct Stop {
    /// Set by [`set`](Self::set), or directly by a signal handler
    /// (`signal_hook::flag::register`): then sleepers see it when
    /// [`set`](Self::set) is called next, or when their sleep ends.
    flag: Arc<AtomicBool>,
    lock: Mutex<()>,
    woken: Condvar,
}

impl Stop {
    /// Not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The flag itself, for a signal handler to set (async-signal-safe: a
    /// store); the handler's thread then calls [`set`](Self::set) to wake
    /// the sleepers.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// Sets the flag and wakes every sleeper.
    pub fn set(&self) {
        self.flag.store(true, Ordering::Relaxed);
        // Taken so that a sleeper is either before its check of the flag
        // (and sees it) or waiting (and is woken): no wakeup is lost.
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.woken.notify_all();
    }

    /// Whether the flag is set.
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// Sleeps for `d`, or less if the flag is set meanwhile by
    /// [`set`](Self::set); returns whether it is set.
    pub fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.is_set() {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            g = match self.woken.wait_timeout(g, end - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_ends_at_its_time_or_when_set() {
        let stop = Arc::new(Stop::new());
        let t = Instant::now();
        assert!(!stop.sleep(Duration::from_millis(30)));
        assert!(t.elapsed() >= Duration::from_millis(30));
        let s = stop.clone();
        let sleeper = std::thread::spawn(move || {
            let t = Instant::now();
            (s.sleep(Duration::from_secs(60)), t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        stop.set();
        let (set, slept) = sleeper.join().unwrap();
        assert!(set && slept < Duration::from_secs(30), "{slept:?}");
        assert!(stop.is_set() && stop.sleep(Duration::from_secs(60)));
        // Set through the flag (as a signal handler does): seen at once.
        let other = Stop::new();
        other.flag().store(true, Ordering::Relaxed);
        assert!(other.sleep(Duration::from_secs(60)));
    }
}
