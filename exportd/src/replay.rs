//! The DAMON replay source: reads a record — the text ftrace or `perf
//! script` prints for `damon_aggregated` events, or a recording made with
//! `perfabi-cat --record` — and publishes its complete aggregations at the
//! recorded cadence, so that demos and tests have real region data on any
//! machine.
//!
//! A line looks like (ftrace, then perf script):
//!
//! ```text
//!   kdamond.0-160  [000] .....  16.032047: damon_aggregated: target_id=0 nr_regions=13 140374689447936-140374693646336: 20 96
//!   kdamond.0   160 [000]  16.032047: damon:damon_aggregated: target_id=0 nr_regions=13 140374689447936-140374693646336: 20 96
//! ```
//!
//! The events of one aggregation of one (kdamond, target) come in address
//! order, `nr_regions` of them; an aggregation cut by the start or end of
//! the record is dropped. The tracepoint does not carry the intervals: a
//! `PERFABI-TRACE-BEGIN … sample_us=N aggr_us=M` line gives them, else the
//! caller's defaults apply.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use perfabi::damon::{Intervals, Region};
use perfabi::writer::{InstanceId, Writer};

/// One complete aggregation of the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedAggregation {
    /// Nanoseconds since the first event of the record.
    pub at_ns: u64,
    /// kdamond thread id (0 if the line does not say).
    pub monitor: u64,
    /// DAMON target id.
    pub target: u64,
    /// Regions in address order.
    pub regions: Vec<Region>,
}

/// A parsed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Intervals named by the record, if any.
    pub intervals: Option<Intervals>,
    /// Complete aggregations in time order.
    pub aggregations: Vec<RecordedAggregation>,
}

/// One `damon_aggregated` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Timestamp, nanoseconds.
    pub ts_ns: u64,
    /// kdamond thread id, 0 if unknown.
    pub monitor: u64,
    /// Target id.
    pub target: u64,
    /// Regions in the aggregation.
    pub nr_regions: u32,
    /// The region.
    pub region: Region,
}

/// Parses one trace line; `None` for lines of other events or of no event.
pub fn parse_event(line: &str) -> Option<Event> {
    let at = line.find("damon_aggregated: ")?;
    let (head, payload) = (&line[..at], &line[at + "damon_aggregated: ".len()..]);
    // Timestamp: the last "SECONDS.FRACTION:" before the event name.
    let ts = head
        .split_ascii_whitespace()
        .filter_map(|t| t.strip_suffix(':'))
        .rev()
        .find_map(parse_seconds_ns)?;
    // ftrace: "comm-PID"; perf script: "comm PID".
    let mut toks = head.split_ascii_whitespace();
    let first = toks.next()?;
    let monitor = first
        .rsplit_once('-')
        .and_then(|(_, pid)| pid.parse().ok())
        .or_else(|| toks.next().and_then(|t| t.parse().ok()))
        .unwrap_or(0);
    let mut target = None;
    let mut nr = None;
    let mut range = None;
    let mut rest = payload.split_ascii_whitespace();
    for t in rest.by_ref() {
        if let Some(v) = t.strip_prefix("target_id=") {
            target = v.parse().ok();
        } else if let Some(v) = t.strip_prefix("nr_regions=") {
            nr = v.parse().ok();
        } else if let Some(r) = t.strip_suffix(':') {
            let (s, e) = r.split_once('-')?;
            range = Some((s.parse().ok()?, e.parse().ok()?));
            break;
        }
    }
    let nr_accesses = rest.next()?.parse().ok()?;
    let age = rest.next()?.parse().ok()?;
    let (start, end) = range?;
    Some(Event {
        ts_ns: ts,
        monitor,
        target: target?,
        nr_regions: nr?,
        region: Region {
            start,
            end,
            nr_accesses,
            age,
        },
    })
}

fn parse_seconds_ns(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.')?;
    if s.is_empty() || f.is_empty() || !s.bytes().chain(f.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = format!("{f:0<9}");
    Some(s.parse::<u64>().ok()? * 1_000_000_000 + frac.get(..9)?.parse::<u64>().ok()?)
}

/// Parses a whole record: a recording of `perfabi-cat --record` (JSON lines,
/// see `perfabi::record`), or trace text (see the module documentation).
pub fn parse(text: &str) -> Result<Record, String> {
    if text.trim_start().starts_with('{') {
        let aggs = perfabi::record::aggregations(text)?;
        let intervals = aggs.first().map(|(_, a)| a.intervals());
        let aggregations = aggs
            .into_iter()
            .map(|(at_ns, a)| RecordedAggregation {
                at_ns,
                monitor: a.monitor_id,
                target: a.target_id,
                regions: a.regions,
            })
            .collect();
        return Ok(Record {
            intervals,
            aggregations,
        });
    }
    Ok(parse_trace(text))
}

/// Parses trace text (see the module documentation).
pub fn parse_trace(text: &str) -> Record {
    let mut intervals = None;
    let mut partial: BTreeMap<(u64, u64), (u64, u32, Vec<Region>)> = BTreeMap::new();
    let mut out = Vec::new();
    let mut first_ts = None;
    for line in text.lines() {
        if line.starts_with("PERFABI-TRACE-BEGIN") {
            let field = |k: &str| {
                line.split_ascii_whitespace()
                    .find_map(|t| t.strip_prefix(k)?.parse::<u32>().ok())
            };
            if let (Some(sample_us), Some(aggr_us)) = (field("sample_us="), field("aggr_us=")) {
                intervals = Some(Intervals { sample_us, aggr_us });
            }
            continue;
        }
        let Some(e) = parse_event(line) else { continue };
        let t0 = *first_ts.get_or_insert(e.ts_ns);
        let key = (e.monitor, e.target);
        let p = partial
            .entry(key)
            .or_insert((e.ts_ns, e.nr_regions, Vec::new()));
        // A new aggregation starts at the lowest address: a region below or
        // at the previous one, or a different region count, ends the old.
        if p.1 != e.nr_regions || p.2.last().is_some_and(|r| e.region.start < r.end) {
            *p = (e.ts_ns, e.nr_regions, Vec::new());
        }
        if p.2.is_empty() {
            p.0 = e.ts_ns;
        }
        p.2.push(e.region);
        if p.2.len() == e.nr_regions as usize {
            out.push(RecordedAggregation {
                at_ns: p.0.saturating_sub(t0),
                monitor: key.0,
                target: key.1,
                regions: std::mem::take(&mut p.2),
            });
        }
    }
    out.sort_by_key(|a| a.at_ns);
    Record {
        intervals,
        aggregations: out,
    }
}

/// Publishes `record` into `w` at its recorded cadence divided by `speed`,
/// once or forever, until `stop` says so. Returns the number published.
pub fn run(
    w: &Writer,
    record: &Record,
    default_intervals: Intervals,
    speed: f64,
    repeat: bool,
    published_counter: InstanceId,
    stop: &dyn Fn() -> bool,
) -> Result<u64, perfabi::Error> {
    let iv = record.intervals.unwrap_or(default_intervals);
    let span = record.aggregations.last().map_or(0, |a| a.at_ns) + u64::from(iv.aggr_us) * 1000;
    let start = Instant::now();
    let mut published = 0u64;
    for round in 0u64.. {
        for a in &record.aggregations {
            let due = Duration::from_nanos(((round * span + a.at_ns) as f64 / speed) as u64);
            while start.elapsed() < due {
                if stop() {
                    return Ok(published);
                }
                std::thread::sleep((due - start.elapsed()).min(Duration::from_millis(50)));
            }
            w.publish_damon(a.monitor, a.target, iv, &a.regions)?;
            w.adjust(published_counter, 1)?;
            published += 1;
        }
        if !repeat || record.aggregations.is_empty() || stop() {
            break;
        }
    }
    Ok(published)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../records/guest-6.12-vaddr-hot4of64.trace");

    #[test]
    fn decodes_ftrace_and_perf_script_lines_exactly() {
        let ftrace = "       kdamond.0-160     [000] .....    16.032047: damon_aggregated: target_id=0 nr_regions=13 140374689447936-140374693646336: 20 96";
        let perf = "kdamond.0   160 [000]    16.032047: damon:damon_aggregated: target_id=0 nr_regions=13 140374689447936-140374693646336: 20 96";
        let want = Event {
            ts_ns: 16_032_047_000,
            monitor: 160,
            target: 0,
            nr_regions: 13,
            region: Region {
                start: 140374689447936,
                end: 140374693646336,
                nr_accesses: 20,
                age: 96,
            },
        };
        assert_eq!(parse_event(ftrace), Some(want));
        assert_eq!(parse_event(perf), Some(want));
        assert_eq!(
            parse_event("kdamond.0-160 [000] 1.0: sched_switch: prev=x"),
            None
        );
        assert_eq!(parse_event("garbage damon_aggregated: target_id=x"), None);
    }

    #[test]
    fn the_shipped_record_holds_complete_aggregations_with_the_hot_range() {
        let r = parse(SHIPPED).unwrap();
        assert_eq!(
            r.intervals,
            Some(Intervals {
                sample_us: 5000,
                aggr_us: 100_000
            })
        );
        assert!(r.aggregations.len() >= 15, "{}", r.aggregations.len());
        for a in &r.aggregations {
            assert_eq!(a.monitor, 160);
            assert!(perfabi::damon::check_regions(
                &a.regions,
                Intervals {
                    sample_us: 5000,
                    aggr_us: 100_000
                },
                4096
            )
            .is_ok());
        }
        // The workload kept 4 MiB at 140374689447936 hot: in every
        // aggregation a region starting there saw at least 18 of 20 samples.
        let hot = 140_374_689_447_936u64;
        assert!(r.aggregations.iter().all(|a| a
            .regions
            .iter()
            .any(|g| g.start == hot && g.nr_accesses >= 18)));
        let gaps: Vec<u64> = r
            .aggregations
            .windows(2)
            .map(|w| w[1].at_ns - w[0].at_ns)
            .collect();
        assert!(
            gaps.iter().all(|&g| (50_000_000..200_000_000).contains(&g)),
            "cadence about 100 ms: {gaps:?}"
        );
    }
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
        let r = parse(&text).unwrap();
        assert_eq!(
            r.intervals,
            Some(Intervals {
                sample_us: 1000,
                aggr_us: 50_000
            })
        );
        assert_eq!(r.aggregations.len(), 2);
        assert_eq!(
            (r.aggregations[1].at_ns, r.aggregations[1].monitor),
            (90, 9)
        );
        assert_eq!(r.aggregations[0].regions[0].nr_accesses, 50);
        assert!(parse("{not json").is_err());
    }
}
