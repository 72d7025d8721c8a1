//! Waiting for a witness of coverage by time, never by a count of
//! iterations.
//!
//! A test that races a reader against a writer asserts two things: a
//! property (no read was torn) and a witness that the race happened (the
//! reader saw the writer's churn, a signal aborted a section). The property
//! may hold for a fixed count of reads; the witness may not: on a machine
//! whose CPUs are busy with other work, the reader can finish its count
//! before the writer has run at all. So the loop goes on until the witness
//! is reached or a [`Deadline`] passes, and only then is it asserted:
//!
//! ```
//! use perfabi_test_harness::deadline::Deadline;
//! let until = Deadline::witness();
//! let (mut reads, mut seen) = (0u64, 0u64);
//! while reads < 1000 || (seen < 10 && !until.passed()) {
//!     reads += 1;
//!     seen += u64::from(reads % 7 == 0);
//! }
//! until.assert(seen >= 10, format_args!("10 changes seen ({seen} in {reads} reads)"));
//! ```

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How long a test goes on for a witness that an idle machine gives in
/// milliseconds: long enough for one whose CPUs are all busy with other
/// work (`tests/stress`), short enough that a witness that never comes
/// fails the test instead of hanging it.
pub const WITNESS_LIMIT: Duration = Duration::from_secs(60);

/// A limit on a test's wait, counted from when it was made.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    start: Instant,
    limit: Duration,
}

impl Deadline {
    /// A deadline `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline {
            start: Instant::now(),
            limit,
        }
    }

    /// A deadline [`WITNESS_LIMIT`] from now.
    pub fn witness() -> Deadline {
        Deadline::after(WITNESS_LIMIT)
    }

    /// Whether the limit has passed.
    pub fn passed(&self) -> bool {
        self.start.elapsed() >= self.limit
    }

    /// Time since the deadline was made.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Asserts that the witness `what` was `reached`; if not, the test
    /// fails saying so and how long it waited.
    #[track_caller]
    pub fn assert(&self, reached: bool, what: impl Display) {
        if !reached {
            self.fail(what);
        }
    }

    /// Fails the test: the witness `what` was not reached, after how long.
    #[track_caller]
    pub fn fail(&self, what: impl Display) -> ! {
        panic!(
            "not reached in {:.1?} (limit {:?}): {what}",
            self.elapsed(),
            self.limit
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_passes_after_its_limit_and_not_before() {
        // Limits far apart: a test preempted for a while still sees them so.
        assert!(!Deadline::witness().passed());
        let d = Deadline::after(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(2));
        assert!(d.passed());
        assert!(d.elapsed() >= Duration::from_millis(1));
    }

    #[test]
    fn a_witness_not_reached_fails_saying_how_long_it_waited() {
        let d = Deadline::after(Duration::ZERO);
        d.assert(true, "reached");
        let e =
            std::panic::catch_unwind(|| d.assert(false, "the churn (6 generations)")).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(msg.starts_with("not reached in "), "{msg}");
        assert!(
            msg.ends_with("(limit 0ns): the churn (6 generations)"),
            "{msg}"
        );
    }
}
