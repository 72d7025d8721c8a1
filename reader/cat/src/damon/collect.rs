//! Aggregations collected live from a segment into a [`Window`]: the
//! segment is read twice per aggregation interval (so that no
//! aggregation, shown until the next one replaces it, goes unseen), each
//! aggregation kept once, at the time it was first seen.

use std::time::{Duration, Instant};

use perfabi_reader::{Error, Segment};

use super::timeline::{Timeline, Window};
use crate::{passing, Failure};

/// Time between reads before any aggregation says its interval.
const FIRST_PERIOD: Duration = Duration::from_millis(50);
/// The shortest time between reads.
const MIN_PERIOD: Duration = Duration::from_millis(5);
/// The longest time between reads.
const MAX_PERIOD: Duration = Duration::from_secs(1);

/// A window filled from a segment.
#[derive(Debug)]
pub struct Collector {
    window: Window,
    start: Instant,
    /// Half the shortest aggregation interval seen.
    shortest: Option<Duration>,
    due: Instant,
    reads: u64,
    skipped: u64,
    /// Why collecting stopped early (the writer went away), if it did.
    ended: Option<String>,
}

impl Collector {
    /// An empty window of at most `max` aggregations per monitor and
    /// target; its times count from now.
    pub fn new(max: usize) -> Collector {
        let start = Instant::now();
        Collector {
            window: Window::new(max),
            start,
            shortest: None,
            due: start,
            reads: 0,
            skipped: 0,
            ended: None,
        }
    }

    /// When the next read is due.
    pub fn due(&self) -> Instant {
        self.due
    }

    /// Reads the segment's latest aggregations into the window and sets
    /// the next read half the shortest aggregation interval later. A read
    /// a busy or re-created segment refuses is skipped (and counted);
    /// other errors end the collection.
    pub fn read(&mut self, seg: &mut Segment) -> Result<(), Failure> {
        self.reads += 1;
        match seg.damon() {
            Ok(read) => {
                let t = self.start.elapsed().as_nanos() as u64;
                for a in read.aggregations {
                    let half = Duration::from_micros(u64::from(a.intervals.aggr_us) / 2);
                    self.shortest = Some(self.shortest.map_or(half, |s| s.min(half)));
                    self.window.push_at(t, a);
                }
            }
            Err(e) if passing(&e) => self.skipped += 1,
            Err(e) => return Err(e.into()),
        }
        let period = self
            .shortest
            .map_or(FIRST_PERIOD, |h| h.clamp(MIN_PERIOD, MAX_PERIOD));
        self.due += period;
        let now = Instant::now();
        if self.due < now {
            self.due = now + period;
        }
        Ok(())
    }

    /// Reads until `duration` has passed since the collector was made. A
    /// writer that goes away (closed, or stale) ends the collection early
    /// but keeps what was collected, if anything was ([`Self::ended`] says
    /// why); with nothing collected it is the error.
    pub fn run_for(&mut self, seg: &mut Segment, duration: Duration) -> Result<(), Failure> {
        let end = self.start + duration;
        loop {
            match self.read(seg) {
                Err(Failure::Read(e @ (Error::Closed | Error::Stale { .. })))
                    if !self.window.is_empty() =>
                {
                    self.ended = Some(format!(
                        "after {}: {e}",
                        crate::human::time_ns(self.start.elapsed().as_nanos() as f64)
                    ));
                    return Ok(());
                }
                r => r?,
            }
            if self.due >= end {
                return Ok(());
            }
            std::thread::sleep(self.due.saturating_duration_since(Instant::now()));
        }
    }

    /// The timelines of the window, by (monitor, target).
    pub fn timelines(&self) -> Vec<&Timeline> {
        self.window.timelines()
    }

    /// Why collecting stopped before its time, if the writer went away.
    pub fn ended(&self) -> Option<&str> {
        self.ended.as_deref()
    }

    /// Reads made, and how many a busy segment cost.
    pub fn reads(&self) -> (u64, u64) {
        (self.reads, self.skipped)
    }
}
