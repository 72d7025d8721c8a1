//! The writer's own heartbeat thread: it calls the heartbeat every half
//! promised interval, so a writer keeps its promise to readers without the
//! application's help (`Config::auto_heartbeat`); for a writer made by
//! `Writer::create_in`, it also folds its directory now and then.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::state::State;

/// The running thread; stopped and joined when dropped.
pub(crate) struct Thread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Thread {
    /// Starts beating for `state` every `period`. The thread holds only a
    /// weak reference between beats, so it never keeps a writer alive.
    pub(crate) fn start(state: &Arc<State>, period: Duration) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let (weak, flag) = (Arc::downgrade(state), stop.clone());
        let period = period.max(Duration::from_millis(1));
        let handle = std::thread::Builder::new()
            .name("perfabi-heartbeat".into())
            .spawn(move || run(weak, &flag, period))
            .ok();
        Self { stop, handle }
    }
}

/// A writer created in a segment directory folds it (§15.5) once every
/// this many beats (every 10 s at the default 1 s heartbeat interval),
/// the first time after a random number of beats below it, so that the
/// workers of one directory do not all fold at once.
pub(crate) const FOLD_EVERY: u32 = 20;

fn run(state: Weak<State>, stop: &(Mutex<bool>, Condvar), period: Duration) {
    let (lock, cv) = stop;
    let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
    let mut until_fold = crate::directory::SegmentName::new("fold")
        .map(|n| (n.nonce % u64::from(FOLD_EVERY)) as u32)
        .unwrap_or(0);
    loop {
        // The flag first: a stop may come before this thread ever waits.
        if *stopped {
            return;
        }
        let (s, timeout) = cv
            .wait_timeout(stopped, period)
            .unwrap_or_else(|p| p.into_inner());
        stopped = s;
        if *stopped || !timeout.timed_out() {
            continue;
        }
        let dir = match state.upgrade() {
            Some(c) => {
                let _ = c.heartbeat();
                c.fold_dir.get().cloned()
            }
            None => return,
        };
        if let Some(dir) = dir {
            if until_fold == 0 {
                until_fold = FOLD_EVERY;
                // Without the stop flag's mutex (a close does not wait for
                // it) nor the writer (held only weakly): a fold holds the
                // directory's lock for a bounded time (§15.5).
                drop(stopped);
                let _ = super::fold::fold(&dir);
                stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
            }
            until_fold -= 1;
        }
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
