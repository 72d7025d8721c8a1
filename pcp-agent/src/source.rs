//! The segment as the agent sees it: mapped when it can be, re-checked at
//! every request, and read into one consistent [`Reading`] per request. A
//! missing, truncated or invalid segment is logged once and leaves the
//! agent serving no values until the segment is back; nothing in here can
//! take the agent down.

use std::path::{Path, PathBuf};

use perfabi::damon::Aggregation;
use perfabi::Snapshot;
use perfabi_reader::{Error, Liveness, Options, Segment, SegmentInfo, Trust};

/// What the latest request read.
#[derive(Default)]
pub struct Reading {
    /// Header and writer liveness; `None` while no segment is mapped.
    pub info: Option<SegmentInfo>,
    /// All counters on all CPUs, consistent with one generation.
    pub snapshot: Snapshot,
    /// Latest complete DAMON aggregation of each (kdamond, target).
    pub damon: Vec<Aggregation>,
    /// Regions the writer could not publish.
    pub damon_dropped: u64,
}

/// The segment at a path, kept mapped across requests.
pub struct Source {
    path: PathBuf,
    trust: Trust,
    seg: Option<Segment>,
    last_problem: Option<String>,
    /// The latest reading.
    pub reading: Reading,
    /// Reads reported busy.
    pub busy: u64,
    /// Requests served while the writer was gone.
    pub stale: u64,
    /// Mappings made anew (first mapping, restarts, growth, recoveries).
    pub remaps: u64,
}

impl Source {
    /// A source for `path`, believing segments of the owners `trust`
    /// allows; nothing is opened yet.
    pub fn new(path: &Path, trust: Trust) -> Source {
        Source {
            path: path.to_path_buf(),
            trust,
            seg: None,
            last_problem: None,
            reading: Reading::default(),
            busy: 0,
            stale: 0,
            remaps: 0,
        }
    }

    /// Re-checks the segment and reads it; `log` gets one line per change
    /// of state (lost, recovered), never one per request.
    pub fn refresh(&mut self, log: &mut dyn FnMut(String)) {
        if let Err(problem) = self.try_refresh() {
            if self.seg.take().is_some() || self.reading.info.is_some() {
                log(format!(
                    "{}: {problem}; serving no values until it is back",
                    self.path.display()
                ));
            } else if self.last_problem.as_deref() != Some(problem.as_str()) {
                log(format!(
                    "{}: {problem}; will retry at every request",
                    self.path.display()
                ));
            }
            self.last_problem = Some(problem);
            self.reading = Reading::default();
            return;
        }
        if let Some(p) = self.last_problem.take() {
            let info = self.reading.info.as_ref().map(|i| i.header);
            log(format!(
                "{}: mapped (epoch {:#x}, {} CPUs){}",
                self.path.display(),
                info.map_or(0, |h| h.epoch),
                info.map_or(0, |h| h.nr_cpus),
                if p.is_empty() {
                    String::new()
                } else {
                    format!(" after: {p}")
                }
            ));
        }
    }

    fn try_refresh(&mut self) -> Result<(), String> {
        // The reader keeps a removed file mapped; the agent follows the path.
        match std::fs::symlink_metadata(&self.path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err("no segment at this path".into())
            }
            Err(e) => return Err(e.to_string()),
        }
        if self.seg.is_none() {
            let opts = Options {
                require_live: false,
                trust: self.trust.clone(),
                ..Options::default()
            };
            let seg = Segment::open_with(&self.path, opts).map_err(|e| e.to_string())?;
            self.remaps += 1;
            self.last_problem.get_or_insert_with(String::new);
            self.seg = Some(seg);
        }
        let seg = self.seg.as_mut().expect("mapped above");
        let remaps = seg.stats().remaps;
        let info = seg.info().map_err(|e| e.to_string())?;
        self.remaps += seg.stats().remaps - remaps;
        if matches!(
            info.liveness,
            Liveness::Dead { .. } | Liveness::Silent { .. }
        ) {
            self.stale += 1;
        }
        match seg.snapshot_into(&mut self.reading.snapshot) {
            Ok(()) => {}
            // No consistent copy of the values came within the retry bound
            // (a writer updating the same CPU block without pause starves
            // whole-block reads). Keep the previous values if they are of
            // this generation; else export the names with no values yet.
            Err(Error::Busy(_)) => {
                self.busy += 1;
                let s = &mut self.reading.snapshot;
                if s.generation != info.header.generation || s.epoch != info.header.epoch {
                    let instances = seg.instances().map_err(|e| e.to_string())?;
                    *s = Snapshot {
                        generation: info.header.generation,
                        epoch: info.header.epoch,
                        instances,
                        nr_cpus: info.header.nr_cpus,
                        slots: 0,
                        values: Vec::new(),
                    };
                }
            }
            Err(e) => return Err(e.to_string()),
        }
        let d = seg.damon().map_err(|e| e.to_string())?;
        if d.busy_cpus.is_empty() {
            self.reading.damon = d.aggregations;
        } else {
            // A busy block may hide a stream's latest regions: keep what the
            // last reading had for a stream now missing or older.
            self.busy += 1;
            self.reading.damon = merge_newest(&self.reading.damon, d.aggregations);
        }
        self.reading.damon_dropped = seg.damon_dropped();
        self.reading.info = Some(info);
        Ok(())
    }
}

/// `new`, plus each stream of `old` that `new` lacks, each stream at its
/// newest aggregation; sorted by (monitor, target).
fn merge_newest(old: &[Aggregation], new: Vec<Aggregation>) -> Vec<Aggregation> {
    let mut by: std::collections::BTreeMap<(u64, u64), Aggregation> = old
        .iter()
        .map(|a| ((a.monitor_id, a.target_id), a.clone()))
        .collect();
    for a in new {
        let key = (a.monitor_id, a.target_id);
        if by.get(&key).is_none_or(|o| o.aggregation <= a.aggregation) {
            by.insert(key, a);
        }
    }
    by.into_values().collect()
}
