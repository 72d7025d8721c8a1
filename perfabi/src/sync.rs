//! The atomics facade: `core::sync::atomic` normally, `loom` under `cfg(loom)`.
//!
//! The protocol code in [`crate::protocol`] is written once against these
//! names, so the code loom model-checks is the code that runs. Layout, mmap
//! and validation code do not use this module.

#[cfg(not(loom))]
pub use core::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU64, Ordering};

/// Tells the processor (or, under loom, the scheduler) that this thread is
/// waiting for another one to make progress.
#[inline]
pub fn spin() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
