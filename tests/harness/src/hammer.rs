//! Threads that run one action in a loop until they are stopped: writers
//! hammering a segment while a test reads it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// `threads` threads, each running `action` again and again until
/// [`stop`](Self::stop) (or drop); a panic in one is re-raised by `stop`.
pub struct Hammer {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Hammer {
    /// Starts the threads.
    pub fn start(threads: usize, action: impl Fn() + Send + Sync + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let action = Arc::new(action);
        let threads = (0..threads)
            .map(|_| {
                let (stop, action) = (stop.clone(), action.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        action();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }

    /// Stops the threads and waits for them; panics if one panicked.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
    }
}

impl Drop for Hammer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.halt();
        } else {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}
