//! The recording format: timestamped snapshots of a segment, one JSON object
//! per line, written by `perfabi-cat --record` and read back by the
//! exporter's replay source.
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

use std::prelude::rust_2021::*;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::damon::{Aggregation, Intervals, Region};

/// One aggregation, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedAggregation {
    /// Monitor id.
    pub monitor_id: u64,
    /// Target id.
    pub target_id: u64,
    /// Aggregation index in the recorded segment.
    pub aggregation: u64,
    /// Sampling interval, µs.
    pub sample_us: u32,
    /// Aggregation interval, µs.
    pub aggr_us: u32,
    /// Regions in address order.
    pub regions: Vec<Region>,
}

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
    /// The latest complete aggregation of each (monitor, target).
    pub damon: Vec<RecordedAggregation>,
}

impl From<&Aggregation> for RecordedAggregation {
    fn from(a: &Aggregation) -> Self {
        Self {
            monitor_id: a.monitor_id,
            target_id: a.target_id,
            aggregation: a.aggregation,
            sample_us: a.intervals.sample_us,
            aggr_us: a.intervals.aggr_us,
            regions: a.regions.clone(),
        }
    }
}

impl RecordedAggregation {
    /// The intervals.
    pub fn intervals(&self) -> Intervals {
        Intervals {
            sample_us: self.sample_us,
            aggr_us: self.aggr_us,
        }
    }
}

/// One line of a record (no trailing newline).
pub fn to_line(s: &Snapshot) -> String {
    serde_json::to_string(s).expect("a snapshot is plain data")
}

/// The aggregations of a record, each once (at its first appearance), with
/// the time it appeared. Lines that are not snapshots are errors.
pub fn aggregations(text: &str) -> Result<Vec<(u64, RecordedAggregation)>, String> {
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
