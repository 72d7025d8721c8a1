//! The writer's own heartbeat thread: it calls the heartbeat every half
//! promised interval, so a writer keeps its promise to readers without the
//! application's help (`Config::auto_heartbeat`).

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

fn run(state: Weak<State>, stop: &(Mutex<bool>, Condvar), period: Duration) {
    let (lock, cv) = stop;
    let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
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
        match state.upgrade() {
            Some(c) => {
                let _ = c.heartbeat();
            }
            None => return,
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
