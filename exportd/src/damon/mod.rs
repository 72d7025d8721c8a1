//! The DAMON sources of the exporter and how one is chosen.
//!
//! * [`tracepoint`]: live `damon_aggregated` events from the perf ring
//!   buffers; passive, works with whatever kdamond runs (root or
//!   CAP_PERFMON).
//! * [`sysfs`]: the daemon's own kdamond through DAMON sysfs, when no other
//!   DAMON user exists (root).
//! * [`replay`]: a record (trace text, damo JSON, or a perfabi-cat
//!   recording) published at its recorded cadence; needs nothing.
//!
//! `--source auto` takes the tracepoint if a kdamond already runs (never
//! competing with it), else its own kdamond through sysfs, else the replay
//! record if one was given, else none; it logs which and why.

pub mod replay;
pub mod sysfs;
pub mod tracefs;
pub mod tracepoint;

use std::cell::Cell;
use std::path::Path;

use perfabi::damon::{Aggregation, Intervals};
use perfabi::Semantics;
use perfabi_shm::writer::{InstanceId, Writer};

/// The counters every DAMON source keeps beside the regions it publishes.
pub struct DamonCounters {
    aggregations: InstanceId,
    rejected: InstanceId,
    lost_events: (InstanceId, Cell<u64>),
    unfinished: (InstanceId, Cell<u64>),
    /// Whether a rejected aggregation was logged already (once is enough:
    /// the counter says how many followed).
    rejected_logged: Cell<bool>,
}

impl DamonCounters {
    /// How many instances [`add`](Self::add) registers.
    pub const INSTANCES: usize = 4;

    /// Registers the counters in `w`.
    pub fn add(w: &Writer) -> Result<DamonCounters, perfabi::Error> {
        Ok(DamonCounters {
            aggregations: w.add("exportd.damon_aggregations", "count", Semantics::Counter)?,
            rejected: w.add(
                "exportd.damon_rejected_aggregations",
                "count",
                Semantics::Counter,
            )?,
            lost_events: (
                w.add("exportd.damon_lost_events", "count", Semantics::Counter)?,
                Cell::new(0),
            ),
            unfinished: (
                w.add(
                    "exportd.damon_unfinished_aggregations",
                    "count",
                    Semantics::Counter,
                )?,
                Cell::new(0),
            ),
            rejected_logged: Cell::new(false),
        })
    }

    /// Publishes one complete aggregation and counts it. One the segment
    /// refuses (malformed, or more regions than a ring holds) is skipped and
    /// counted in `exportd.damon_rejected_aggregations`, the first logged:
    /// a source never stops for one bad aggregation.
    pub fn publish(&self, w: &Writer, a: &Aggregation) {
        match w.publish_damon(a) {
            Ok(_) => {
                let _ = w.adjust(self.aggregations, 1);
            }
            Err(e) => {
                let _ = w.adjust(self.rejected, 1);
                if !self.rejected_logged.replace(true) {
                    eprintln!(
                        "perfabi-exportd: DAMON: skipped an aggregation of {} regions (monitor {}, \
                         target {}): {e}; counting such skips in \
                         exportd.damon_rejected_aggregations without logging them",
                        a.regions.len(),
                        a.monitor_id,
                        a.target_id
                    );
                }
            }
        }
    }

    /// Brings the count of events the kernel dropped up to `total`.
    pub fn lost(&self, w: &Writer, total: u64) -> Result<(), String> {
        raise(w, &self.lost_events, total)
    }

    /// Brings the unfinished-aggregation count up to `total`.
    pub fn dropped(&self, w: &Writer, total: u64) -> Result<(), String> {
        raise(w, &self.unfinished, total)
    }
}

/// Adds to counter `id` what `total` grew by since the last call.
fn raise(w: &Writer, (id, seen): &(InstanceId, Cell<u64>), total: u64) -> Result<(), String> {
    let new = total.saturating_sub(seen.replace(total));
    if new > 0 {
        w.adjust(*id, new as i64).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The intervals of the DAMON sysfs kdamond whose thread is `monitor`, read
/// (never written) from `admin`.
pub fn intervals_of(admin: &Path, monitor: u64) -> Option<Intervals> {
    let kd = admin.join("kdamonds");
    let n: u32 = std::fs::read_to_string(kd.join("nr_kdamonds"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (0..n).find_map(|i| {
        let d = kd.join(i.to_string());
        let num = |p: &str| -> Option<u32> {
            std::fs::read_to_string(d.join(p)).ok()?.trim().parse().ok()
        };
        (u64::from(num("pid")?) == monitor).then_some(())?;
        Some(Intervals {
            sample_us: num("contexts/0/monitoring_attrs/intervals/sample_us")?,
            aggr_us: num("contexts/0/monitoring_attrs/intervals/aggr_us")?,
        })
    })
}

/// Which DAMON source to run (`--source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Choice {
    /// No DAMON source (the default unless --replay is given).
    None,
    /// The best one available here (see the module documentation).
    Auto,
    /// Live damon_aggregated events (root or CAP_PERFMON).
    Tracepoint,
    /// Own kdamond through DAMON sysfs (root; refuses if DAMON is in use).
    Sysfs,
    /// The --replay record.
    Replay,
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        let v = self.to_possible_value().expect("no variant is skipped");
        f.write_str(v.get_name())
    }
}

/// An opened DAMON source.
pub enum Source {
    /// Live tracepoint events.
    Tracepoint(tracepoint::TracepointSource),
    /// The daemon's own kdamond.
    Sysfs(sysfs::OwnKdamond),
    /// A record.
    Replay(perfabi_record::damon::Record),
}

/// How `auto` decides: each candidate, in order, with why it was not taken.
pub struct Decision {
    /// The opened source, if any.
    pub source: Option<Source>,
    /// One line saying which and why.
    pub why: String,
}

/// Opens the source `choice` names. `sysfs_opts` is used when the sysfs
/// source is chosen; `record` when replay is.
pub fn open(
    choice: Choice,
    sysfs_opts: &sysfs::Options,
    record: Option<perfabi_record::damon::Record>,
    perf_pages_log2: u32,
) -> Result<Decision, String> {
    let admin = Path::new(sysfs::ADMIN);
    match choice {
        Choice::None => Ok(Decision {
            source: None,
            why: "no DAMON source (--source none)".into(),
        }),
        Choice::Replay => {
            let r = record.ok_or("--source replay needs --replay FILE")?;
            Ok(Decision {
                why: format!("replaying {} aggregations", r.aggregations.len()),
                source: Some(Source::Replay(r)),
            })
        }
        Choice::Tracepoint => {
            let t = tracepoint::TracepointSource::open(perf_pages_log2)?;
            Ok(Decision {
                why: format!("tracepoint damon:damon_aggregated on {} CPUs", t.cpus()),
                source: Some(Source::Tracepoint(t)),
            })
        }
        Choice::Sysfs => {
            let k = sysfs::OwnKdamond::start(admin, sysfs_opts)?;
            Ok(Decision {
                why: format!(
                    "sysfs: own kdamond (pid {}) on {:?}",
                    k.pid, sysfs_opts.target
                ),
                source: Some(Source::Sysfs(k)),
            })
        }
        Choice::Auto => {
            let mut not = Vec::new();
            let running = sysfs::running_kdamonds();
            if !running.is_empty() {
                let pids: Vec<String> = running.iter().map(|(p, _)| p.to_string()).collect();
                match tracepoint::TracepointSource::open(perf_pages_log2) {
                    Ok(t) => {
                        return Ok(Decision {
                            why: format!(
                                "auto chose the tracepoint: {} kdamond(s) already run (pid {}), \
                                 so their damon_aggregated events are read passively on {} CPUs",
                                running.len(),
                                pids.join(", "),
                                t.cpus()
                            ),
                            source: Some(Source::Tracepoint(t)),
                        })
                    }
                    Err(e) => not.push(format!("tracepoint: {e}")),
                }
                not.push(format!(
                    "sysfs: kdamond(s) pid {} already run and are not ours",
                    pids.join(", ")
                ));
            } else {
                match sysfs::OwnKdamond::start(admin, sysfs_opts) {
                    Ok(k) => {
                        return Ok(Decision {
                            why: format!(
                                "auto chose sysfs: no kdamond runs, so this daemon started its own \
                                 (pid {}) on {:?}",
                                k.pid, sysfs_opts.target
                            ),
                            source: Some(Source::Sysfs(k)),
                        })
                    }
                    Err(e) => not.push(format!("sysfs: {e}")),
                }
            }
            if let Some(r) = record {
                return Ok(Decision {
                    why: format!(
                        "auto chose replay ({} aggregations); no live source: {}",
                        r.aggregations.len(),
                        not.join("; ")
                    ),
                    source: Some(Source::Replay(r)),
                });
            }
            Ok(Decision {
                source: None,
                why: format!("auto found no DAMON source: {}", not.join("; ")),
            })
        }
    }
}
