//! Trace text of `damon_aggregated` events, as ftrace or `perf script`
//! print it:
//!
//! ```text
//!   kdamond.0-160  [000] .....  16.032047: damon_aggregated: target_id=0 nr_regions=13 140374689447936-140374693646336: 20 96
//!   kdamond.0   160 [000]  16.032047: damon:damon_aggregated: target_id=0 nr_regions=13 140374689447936-140374693646336: 20 96
//! ```
//!
//! The tracepoint does not carry the intervals: a `PERFABI-TRACE-BEGIN …
//! sample_us=N aggr_us=M` line gives them, and may say what the workload
//! was (`workload=START END HOT_END PID`, see [`Workload`]).

use perfabi::damon::{Intervals, Region};

use super::assemble::{Assembler, Event};
use super::{Record, Workload};

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
    // A time past u64 nanoseconds (about 584 years) is malformed: the line
    // is skipped like any other that does not parse, not wrapped around.
    s.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac.get(..9)?.parse::<u64>().ok()?)
}

/// Parses trace text (see the module documentation) into complete
/// aggregations in time order, each with the nanoseconds since the text's
/// earliest event (not its first: a trace need not be in time order, and
/// times before the first would all collapse to 0). Aggregations cut by the start or end of the text are left
/// out. Their intervals are those of the text's `PERFABI-TRACE-BEGIN` line,
/// or `default` without one; its workload, if it gives one, is the
/// record's.
pub fn parse(text: &str, default: Intervals) -> Record {
    let mut intervals = default;
    let mut workload = None;
    let mut asm = Assembler::default();
    let mut out = Vec::new();
    let mut earliest = u64::MAX;
    for line in text.lines() {
        if line.starts_with("PERFABI-TRACE-BEGIN") {
            let field = |k: &str| {
                line.split_ascii_whitespace()
                    .find_map(|t| t.strip_prefix(k)?.parse::<u32>().ok())
            };
            if let (Some(sample_us), Some(aggr_us)) = (field("sample_us="), field("aggr_us=")) {
                intervals = Intervals { sample_us, aggr_us };
            }
            workload = workload_of(line).or(workload);
            continue;
        }
        let Some(e) = parse_event(line) else { continue };
        earliest = earliest.min(e.ts_ns);
        if let Some(a) = asm.push(e, |_| intervals) {
            out.push(a);
        }
    }
    // Every aggregation's time is one of its events', so none is before
    // `earliest`.
    for (at_ns, _) in &mut out {
        *at_ns -= earliest;
    }
    out.sort_by_key(|(at_ns, _)| *at_ns);
    Record {
        aggregations: out,
        workload,
    }
}

/// The `workload=START END HOT_END PID` of a `PERFABI-TRACE-BEGIN` line:
/// four numbers, or none.
fn workload_of(line: &str) -> Option<Workload> {
    let mut toks = line.split_ascii_whitespace();
    let first = toks.find_map(|t| t.strip_prefix("workload="))?;
    let mut n = std::iter::once(first)
        .chain(toks)
        .map(|t| t.parse::<u64>().ok());
    let mut next = || n.next().flatten();
    Some(Workload {
        start: next()?,
        end: next()?,
        hot_end: next()?,
        pid: next()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str =
        include_str!("../../../../exportd/records/guest-6.12-vaddr-hot4of64.trace");

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
    fn a_time_past_u64_nanoseconds_is_malformed_not_wrapped() {
        let line = |ts: &str| {
            format!("kdamond.0-160 [000] ..... {ts}: damon_aggregated: target_id=0 nr_regions=1 4096-8192: 20 96")
        };
        // u64::MAX ns is 18446744073.709551615 s.
        assert_eq!(
            parse_event(&line("18446744073.709551615")).map(|e| e.ts_ns),
            Some(u64::MAX)
        );
        for ts in [
            "18446744073.709551616",
            "18446744074.000000",
            "99999999999999999999.0",
        ] {
            assert_eq!(parse_event(&line(ts)), None, "{ts}");
        }
        // Skipped like any malformed line: the others still count.
        let iv = Intervals {
            sample_us: 5000,
            aggr_us: 100_000,
        };
        let text = [line("1.0"), line("18446744074.000000"), line("1.1")].join("\n");
        let times: Vec<u64> = parse(&text, iv)
            .aggregations
            .iter()
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(times, [0, 100_000_000]);
    }

    #[test]
    fn a_backwards_trace_keeps_its_spacing_from_its_earliest_event() {
        let iv = Intervals {
            sample_us: 5000,
            aggr_us: 100_000,
        };
        let text: String = (1..=5)
            .rev()
            .map(|s| format!("kdamond.0-160 [000] ..... {s}.000000: damon_aggregated: target_id=0 nr_regions=1 4096-8192: {s} 0\n"))
            .collect();
        let r = parse(&text, iv).aggregations;
        // Stamped 5, 4, 3, 2, 1 s: 4, 3, 2, 1, 0 s after the earliest,
        // returned sorted by time.
        let got: Vec<(u64, u32)> = r
            .iter()
            .map(|(t, a)| (*t, a.regions[0].nr_accesses))
            .collect();
        assert_eq!(
            got,
            [
                (0, 1),
                (1_000_000_000, 2),
                (2_000_000_000, 3),
                (3_000_000_000, 4),
                (4_000_000_000, 5)
            ]
        );
    }

    #[test]
    fn a_workload_is_said_whole_or_not_at_all() {
        let iv = Intervals {
            sample_us: 5000,
            aggr_us: 100_000,
        };
        let event = "kdamond.0-160 [000] ..... 16.032047: damon_aggregated: target_id=0 nr_regions=1 4096-8192: 20 96";
        let with = |begin: &str| parse(&format!("{begin}\n{event}\n"), iv).workload;
        assert_eq!(with(""), None);
        assert_eq!(
            with("PERFABI-TRACE-BEGIN intervals sample_us=5000 aggr_us=100000"),
            None
        );
        assert_eq!(with("PERFABI-TRACE-BEGIN workload=1 2 3"), None);
        assert_eq!(with("PERFABI-TRACE-BEGIN workload=1 2 x 4"), None);
        assert_eq!(
            with("PERFABI-TRACE-BEGIN workload=4096 65536 8192 42 sample_us=5000"),
            Some(Workload {
                start: 4096,
                end: 65536,
                hot_end: 8192,
                pid: 42
            })
        );
        assert_eq!(parse(event, iv).aggregations.len(), 1);
    }

    #[test]
    fn the_shipped_record_holds_complete_aggregations_with_the_hot_range() {
        let unsaid = Intervals {
            sample_us: 7,
            aggr_us: 700,
        };
        let Record {
            aggregations: r,
            workload,
        } = parse(SHIPPED, unsaid);
        // 64 MiB mapped, its first 4 MiB kept hot, by process 156.
        let w = workload.expect("the shipped trace says its workload");
        assert_eq!(
            w,
            Workload {
                start: 140_374_689_447_936,
                end: 140_374_689_447_936 + (64 << 20),
                hot_end: 140_374_689_447_936 + (4 << 20),
                pid: 156,
            }
        );
        assert!(r.iter().all(|(_, a)| a.intervals
            == Intervals {
                sample_us: 5000,
                aggr_us: 100_000
            }));
        assert!(r.len() >= 15, "{}", r.len());
        for (_, a) in &r {
            assert_eq!(a.monitor_id, 160);
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
        // The workload kept its first 4 MiB hot: in every aggregation a
        // region starting there saw at least 18 of 20 samples.
        assert!(r.iter().all(|(_, a)| a
            .regions
            .iter()
            .any(|g| g.start == w.start && g.nr_accesses >= 18)));
        let gaps: Vec<u64> = r.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(
            gaps.iter().all(|&g| (50_000_000..200_000_000).contains(&g)),
            "cadence about 100 ms: {gaps:?}"
        );
    }
}
