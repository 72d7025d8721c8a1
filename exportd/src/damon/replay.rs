//! The DAMON replay source: reads a record and publishes its complete
//! aggregations at the recorded cadence, so that demos and tests have real
//! region data on any machine. Three record formats are read:
//!
//! * trace text of `damon_aggregated` events, as ftrace or `perf script`
//!   print it (see [`super::text`]);
//! * damo's record files, `json` or `json_compressed` (see [`super::damo`]);
//! * recordings made with `perfabi-cat --record` (JSON lines, see
//!   `perfabi::record`).

use std::time::{Duration, Instant};

use perfabi::damon::{Intervals, Region};
use perfabi::writer::Writer;

/// One complete aggregation of the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedAggregation {
    /// Nanoseconds since the first event of the record.
    pub at_ns: u64,
    /// kdamond thread id (0 if the line does not say).
    pub monitor: u64,
    /// DAMON target id.
    pub target: u64,
    /// The intervals the regions were measured with, if the record says
    /// (each aggregation its own: they may change in the middle of a record).
    pub intervals: Option<Intervals>,
    /// Regions in address order.
    pub regions: Vec<Region>,
}

/// A parsed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Complete aggregations in time order.
    pub aggregations: Vec<RecordedAggregation>,
}

/// The default bound on a record, read or decompressed: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 64 << 20;

/// Parses a whole record in any of the formats of the module documentation;
/// a compressed one must not decompress to more than `limit` bytes.
pub fn parse(bytes: &[u8], limit: u64) -> Result<Record, String> {
    if super::damo::is_damo(bytes) {
        return super::damo::parse(bytes, limit);
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "neither text nor a damo record (json or json_compressed)".to_string())?;
    if text.trim_start().starts_with('{') {
        let aggs = perfabi::record::aggregations(text)?;
        let aggregations = aggs
            .into_iter()
            .map(|(at_ns, a)| RecordedAggregation {
                at_ns,
                monitor: a.monitor_id,
                target: a.target_id,
                intervals: Some(a.intervals()),
                regions: a.regions,
            })
            .collect();
        return Ok(Record { aggregations });
    }
    Ok(super::text::parse(text))
}

/// Publishes `record` into `w` at its recorded cadence divided by `speed`,
/// once or forever, until `stop` says so. Returns the number published.
pub fn run(
    w: &Writer,
    record: &Record,
    default_intervals: Intervals,
    speed: f64,
    repeat: bool,
    counters: &super::Published,
    stop: &dyn Fn() -> bool,
) -> Result<u64, String> {
    let last = record.aggregations.last();
    let span = last.map_or(0, |a| {
        a.at_ns + u64::from(a.intervals.unwrap_or(default_intervals).aggr_us) * 1000
    });
    let start = Instant::now();
    let mut published = 0u64;
    for round in 0u64.. {
        for a in &record.aggregations {
            let at = round.saturating_mul(span).saturating_add(a.at_ns);
            let due = Duration::from_nanos((at as f64 / speed) as u64);
            while start.elapsed() < due {
                if stop() {
                    return Ok(published);
                }
                // Time moves on between the test and here: saturate.
                std::thread::sleep(
                    due.saturating_sub(start.elapsed())
                        .min(Duration::from_millis(50)),
                );
            }
            let iv = a.intervals.unwrap_or(default_intervals);
            counters.publish(w, a.monitor, a.target, iv, &a.regions);
            published += 1;
        }
        if !repeat || record.aggregations.is_empty() || stop() {
            break;
        }
    }
    Ok(published)
}

#[cfg(test)]
mod recording_tests {
    use super::*;

    #[test]
    fn reads_back_a_perfabi_cat_recording() {
        let a = perfabi::record::RecordedAggregation {
            monitor_id: 9,
            target_id: 1,
            aggregation: 4,
            sample_us: 1000,
            aggr_us: 50_000,
            regions: vec![Region {
                start: 0,
                end: 4096,
                nr_accesses: 50,
                age: 2,
            }],
        };
        let line = |t_ns, damon: Vec<_>| {
            perfabi::record::to_line(&perfabi::record::Snapshot {
                t_ns,
                epoch: "0x1".into(),
                generation: 1,
                counters: Default::default(),
                damon,
            })
        };
        let mut b = a.clone();
        b.aggregation = 5;
        // Aggregation 4 appears in two snapshots: it is replayed once.
        let text = [
            line(0, vec![a.clone()]),
            line(40, vec![a.clone()]),
            line(90, vec![b]),
        ]
        .join("\n");
        let r = parse(text.as_bytes(), DEFAULT_MAX_RECORD_BYTES).unwrap();
        assert!(r.aggregations.iter().all(|a| a.intervals
            == Some(Intervals {
                sample_us: 1000,
                aggr_us: 50_000
            })));
        assert_eq!(r.aggregations.len(), 2);
        assert_eq!(
            (r.aggregations[1].at_ns, r.aggregations[1].monitor),
            (90, 9)
        );
        assert_eq!(r.aggregations[0].regions[0].nr_accesses, 50);
        assert!(parse(b"{not json", DEFAULT_MAX_RECORD_BYTES).is_err());
    }
}
