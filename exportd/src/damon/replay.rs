//! The DAMON replay source: publishes the complete aggregations of a record
//! at the recorded cadence, so that demos and tests have real region data
//! on any machine. The record (trace text, a damo record or a perfabi-cat
//! recording) is read and parsed by [`perfabi_record::damon`].

use std::time::{Duration, Instant};

use perfabi_record::damon::Record;
use perfabi_shm::writer::Writer;

use crate::stop::Stop;

/// Publishes `record` into `w` at its recorded cadence divided by `speed`,
/// once or forever, until `stop` is set. Between two aggregations it
/// sleeps until the next is due (or `stop` is set). Returns the number
/// published.
pub fn run(
    w: &Writer,
    record: &Record,
    speed: f64,
    repeat: bool,
    counters: &super::DamonCounters,
    stop: &Stop,
) -> Result<u64, String> {
    let last = record.aggregations.last();
    let span = last.map_or(0, |(at_ns, a)| {
        at_ns + u64::from(a.intervals.aggr_us) * 1000
    });
    let start = Instant::now();
    let mut published = 0u64;
    for round in 0u64.. {
        for (at_ns, a) in &record.aggregations {
            let at = round.saturating_mul(span).saturating_add(*at_ns);
            let due = Duration::from_nanos((at as f64 / speed) as u64);
            // Time moves on between the test and here: saturate.
            let left = due.saturating_sub(start.elapsed());
            if stop.sleep(left) {
                return Ok(published);
            }
            counters.publish(w, a);
            published += 1;
        }
        if !repeat || record.aggregations.is_empty() || stop.is_set() {
            break;
        }
    }
    Ok(published)
}
