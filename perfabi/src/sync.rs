//! The atomics facade: `core::sync::atomic` normally, `loom` under `cfg(loom)`,
//! with std's paths (`atomic::{AtomicU64, fence, Ordering}`, `hint::spin_loop`).
//!
//! The protocol code in [`crate::protocol`] is written once against these
//! names, so the code loom model-checks is the code that runs. The facade is
//! private: other crates see the word type only as [`crate::Word`].

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};

/// Tells the processor (or, under loom, the scheduler) that this thread is
/// waiting for another one to make progress.
#[inline]
pub(crate) fn spin() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
