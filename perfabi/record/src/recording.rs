//! The recording format: timestamped snapshots of a segment, one JSON object
//! per line, written by `perfabi-cat --record` and read back by the
//! exporter's replay source. An aggregation is recorded as the one DAMON
//! type, [`perfabi::damon::Aggregation`], its intervals as two fields.
//!
//! ```text
//! {"t_ns":0,"epoch":"0x…","generation":4,"counters":{"net.rx_bytes":1500},
//!  "damon":[{"monitor_id":160,"target_id":0,"aggregation":7,"sample_us":5000,
//!            "aggr_us":100000,"regions":[{"start":4096,"end":8192,"nr_accesses":20,"age":3}]}]}
//! ```
//!
//! `t_ns` counts from the first line. Counter values are totals over CPUs
//! (signed values as negative numbers). An aggregation appears in every
//! snapshot taken while it is the latest; readers of a record keep the first
//! appearance of each (monitor, target, aggregation).

use std::collections::{BTreeMap, BTreeSet};

use perfabi::damon::Aggregation;
use serde::{Deserialize, Serialize};

/// One line of a record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Nanoseconds since the first line.
    pub t_ns: u64,
    /// Epoch of the recorded segment, as hex text.
    pub epoch: String,
    /// Its metadata generation.
    pub generation: u64,
    /// Counter totals by name.
    pub counters: BTreeMap<String, serde_json::Value>,
    /// The latest complete aggregation of each (monitor, target), with the
    /// aggregation index the recorded segment gave it.
    pub damon: Vec<Aggregation>,
}

/// One line of a record (no trailing newline).
pub fn to_line(s: &Snapshot) -> String {
    serde_json::to_string(s).expect("a snapshot is plain data")
}

/// The aggregations of a record, each once (at its first appearance), with
/// the time it appeared. Lines that are not snapshots are errors.
pub fn aggregations(text: &str) -> Result<Vec<(u64, Aggregation)>, String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let s: Snapshot = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        for a in s.damon {
            if seen.insert((a.monitor_id, a.target_id, a.aggregation)) {
                out.push((s.t_ns, a));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::damon::{Intervals, Region};

    #[test]
    fn a_line_keeps_the_documented_format_and_reads_back() {
        let a = Aggregation {
            monitor_id: 160,
            target_id: 0,
            aggregation: 7,
            intervals: Intervals {
                sample_us: 5000,
                aggr_us: 100_000,
            },
            regions: vec![Region {
                start: 4096,
                end: 8192,
                nr_accesses: 20,
                age: 3,
            }],
        };
        let s = Snapshot {
            t_ns: 0,
            epoch: "0x1".into(),
            generation: 4,
            counters: BTreeMap::from([("net.rx_bytes".to_string(), 1500.into())]),
            damon: vec![a.clone()],
        };
        let line = to_line(&s);
        assert_eq!(
            line,
            r#"{"t_ns":0,"epoch":"0x1","generation":4,"counters":{"net.rx_bytes":1500},"damon":[{"monitor_id":160,"target_id":0,"aggregation":7,"sample_us":5000,"aggr_us":100000,"regions":[{"start":4096,"end":8192,"nr_accesses":20,"age":3}]}]}"#
        );
        assert_eq!(aggregations(&line).unwrap(), vec![(0, a)]);
        assert!(aggregations("{not json").is_err());
    }
}
