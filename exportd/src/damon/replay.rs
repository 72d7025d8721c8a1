//! The DAMON replay source: reads a record and publishes its complete
//! aggregations at the recorded cadence, so that demos and tests have real
//! region data on any machine. Three record formats are read:
//!
//! * trace text of `damon_aggregated` events, as ftrace or `perf script`
//!   print it (see [`super::text`]);
//! * damo's record files, `json` or `json_compressed` (see [`super::damo`]);
//! * recordings made with `perfabi-cat --record` (JSON lines, see
//!   `perfabi_record`).

use std::time::{Duration, Instant};

use perfabi::damon::{Aggregation, Intervals};
use perfabi_shm::writer::Writer;

/// A parsed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Complete aggregations in time order, each with the nanoseconds since
    /// the first event of the record. Their aggregation index is the one the
    /// recorded segment gave (a perfabi-cat recording) or 0; the writer that
    /// replays them numbers them anew.
    pub aggregations: Vec<(u64, Aggregation)>,
}

/// The default bound on a record, read or decompressed: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 64 << 20;

/// Parses a whole record in any of the formats of the module documentation;
/// a compressed one must not decompress to more than `limit` bytes.
/// Aggregations whose intervals the record does not give get `default`.
pub fn parse(bytes: &[u8], limit: u64, default: Intervals) -> Result<Record, String> {
    if super::damo::is_damo(bytes) {
        let aggregations = super::damo::parse(bytes, limit, default)?;
        return Ok(Record { aggregations });
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "neither text nor a damo record (json or json_compressed)".to_string())?;
    if text.trim_start().starts_with('{') {
        let aggregations = perfabi_record::aggregations(text)?;
        return Ok(Record { aggregations });
    }
    Ok(Record {
        aggregations: super::text::parse(text, default),
    })
}

/// Publishes `record` into `w` at its recorded cadence divided by `speed`,
/// once or forever, until `stop` says so. Returns the number published.
pub fn run(
    w: &Writer,
    record: &Record,
    speed: f64,
    repeat: bool,
    counters: &super::DamonCounters,
    stop: &dyn Fn() -> bool,
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
            counters.publish(w, a);
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
    use perfabi::damon::Region;

    #[test]
    fn reads_back_a_perfabi_cat_recording() {
        let iv = Intervals {
            sample_us: 1000,
            aggr_us: 50_000,
        };
        let a = Aggregation {
            monitor_id: 9,
            target_id: 1,
            aggregation: 4,
            intervals: iv,
            regions: vec![Region {
                start: 0,
                end: 4096,
                nr_accesses: 50,
                age: 2,
            }],
        };
        let line = |t_ns, damon: Vec<_>| {
            perfabi_record::to_line(&perfabi_record::Snapshot {
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
        let unsaid = Intervals {
            sample_us: 7,
            aggr_us: 700,
        };
        let r = parse(text.as_bytes(), DEFAULT_MAX_RECORD_BYTES, unsaid).unwrap();
        assert!(r.aggregations.iter().all(|(_, a)| a.intervals == iv));
        assert_eq!(r.aggregations.len(), 2);
        assert_eq!(
            (r.aggregations[1].0, r.aggregations[1].1.monitor_id),
            (90, 9)
        );
        assert_eq!(r.aggregations[0].1.regions[0].nr_accesses, 50);
        assert!(parse(b"{not json", DEFAULT_MAX_RECORD_BYTES, unsaid).is_err());
    }
}
