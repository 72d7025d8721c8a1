//! The segment as the agent sees it: mapped when it can be, re-checked at
//! every request, and read into one consistent [`Reading`] per request.
//!
//! A read that fails for a reason that clears by itself ([`transient`]:
//! the writer busy past the retry bound, or the very file the agent mapped
//! truncated, overwritten or replaced while being opened, which a live
//! writer repairs at its next heartbeat) keeps the last good reading for at
//! most [`HOLD`] after it, and is counted ([`Source::held_reads`]). Past
//! that bound, or on any other error (no file at the path, another file
//! that is not a segment, an owner not trusted), the reading is emptied and
//! the agent serves no values until a read succeeds. Every change of state
//! is logged once; nothing in here can take the agent down.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use perfabi::damon::Aggregation;
use perfabi::Snapshot;
use perfabi_reader::{Error, Liveness, Options, Segment, SegmentInfo, Trust};

/// How long after the last good read its values are still served while
/// reads fail for a transient reason.
pub const HOLD: Duration = Duration::from_secs(5);

/// What a request read.
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

/// Why a read failed.
struct Failure {
    what: String,
    /// The error may clear by itself ([`transient`]).
    transient: bool,
    /// It concerns the file the last good reading came from.
    same_file: bool,
}

/// Whether `e`, met reading the file that gave the last good reading (and
/// is still at the path), may clear by itself: a busy writer, the file
/// truncated under the mapping (or found too short, or with a hole, when
/// re-checked), its header changed (or found invalid when re-checked), or
/// a race with its replacement. Refusals for safety (owner, permissions,
/// links), I/O errors and size limits are not.
pub fn transient(e: &Error) -> bool {
    matches!(
        e,
        Error::Busy(_)
            | Error::Truncated(_)
            | Error::HeaderChanged(_)
            | Error::Raced(_)
            | Error::NotASegmentFile(..)
            | Error::Sparse { .. }
            | Error::Abi(_)
    )
}

/// The segment at a path, kept mapped across requests.
pub struct Source {
    path: PathBuf,
    trust: Trust,
    hold: Duration,
    seg: Option<Segment>,
    last_problem: Option<String>,
    /// The reading served: the latest good one (possibly held).
    pub reading: Reading,
    /// A buffer the next reading is made in (its allocations are reused).
    next: Reading,
    /// When `reading` was read, and the (device, inode) it came from.
    good: Option<(Instant, (u64, u64))>,
    /// Whether `reading` is held over a transient error.
    pub held: bool,
    /// Requests answered with held values.
    pub held_reads: u64,
    /// Reads reported busy.
    pub busy: u64,
    /// Requests served while the writer was gone.
    pub stale: u64,
    /// Mappings made anew (first mapping, restarts, growth, recoveries).
    pub remaps: u64,
}

impl Source {
    /// A source for `path`, believing segments of the owners `trust`
    /// allows, holding values over transient errors for [`HOLD`]; nothing
    /// is opened yet.
    pub fn new(path: &Path, trust: Trust) -> Source {
        Source::with_hold(path, trust, HOLD)
    }

    /// [`Source::new`] with another hold.
    pub fn with_hold(path: &Path, trust: Trust, hold: Duration) -> Source {
        Source {
            path: path.to_path_buf(),
            trust,
            hold,
            seg: None,
            last_problem: None,
            reading: Reading::default(),
            next: Reading::default(),
            good: None,
            held: false,
            held_reads: 0,
            busy: 0,
            stale: 0,
            remaps: 0,
        }
    }

    /// Re-checks the segment and reads it at time `now`; `log` gets one
    /// line per change of state (lost, held, recovered), never one per
    /// request.
    pub fn refresh(&mut self, now: Instant, log: &mut dyn FnMut(String)) {
        let failure = match self.try_refresh() {
            Ok(id) => {
                std::mem::swap(&mut self.reading, &mut self.next);
                self.good = Some((now, id));
                self.held = false;
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
                return;
            }
            Err(f) => f,
        };
        let within = self
            .good
            .is_some_and(|(t, _)| now.saturating_duration_since(t) <= self.hold);
        if failure.transient && failure.same_file && within {
            self.held_reads += 1;
            if !self.held {
                log(format!(
                    "{}: {}; answering with the values of the last good read for at most {} s",
                    self.path.display(),
                    failure.what,
                    self.hold.as_secs_f64()
                ));
            }
            self.held = true;
            self.last_problem = Some(failure.what);
            return;
        }
        // A transient error keeps the mapping (the reader follows the
        // file); any other drops it, to open the path anew next time.
        if !failure.transient {
            self.seg = None;
        }
        let problem = failure.what;
        if self.reading.info.is_some() {
            log(format!(
                "{}: {problem}{}; serving no values until it is back",
                self.path.display(),
                if self.held && failure.transient {
                    " (held values expired)"
                } else {
                    ""
                }
            ));
        } else if self.last_problem.as_deref() != Some(problem.as_str()) {
            log(format!(
                "{}: {problem}; will retry at every request",
                self.path.display()
            ));
        }
        self.last_problem = Some(problem);
        self.reading = Reading::default();
        self.good = None;
        self.held = false;
    }

    /// Reads the segment into `self.next`; returns the (device, inode) of
    /// the file read.
    fn try_refresh(&mut self) -> Result<(u64, u64), Failure> {
        // The reader keeps a removed file mapped; the agent follows the path.
        let id = match std::fs::symlink_metadata(&self.path) {
            Ok(md) => (md.dev(), md.ino()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Failure {
                    what: "no segment at this path".into(),
                    transient: false,
                    same_file: false,
                })
            }
            Err(e) => {
                return Err(Failure {
                    what: e.to_string(),
                    transient: false,
                    same_file: false,
                })
            }
        };
        // An error is transient only for the file the last good read came
        // from, still at the path.
        let same_file = self.good.is_some_and(|(_, g)| g == id);
        let fail = |e: Error| Failure {
            transient: transient(&e),
            same_file,
            what: e.to_string(),
        };
        if self.seg.is_none() {
            let opts = Options {
                require_live: false,
                trust: self.trust.clone(),
                ..Options::default()
            };
            let seg = Segment::open_with(&self.path, opts).map_err(fail)?;
            self.remaps += 1;
            self.last_problem.get_or_insert_with(String::new);
            self.seg = Some(seg);
        }
        let seg = self.seg.as_mut().expect("mapped above");
        let remaps = seg.stats().remaps;
        let info = seg.info().map_err(fail)?;
        self.remaps += seg.stats().remaps - remaps;
        if matches!(
            info.liveness,
            Liveness::Dead { .. } | Liveness::Silent { .. }
        ) {
            self.stale += 1;
        }
        let next = &mut self.next;
        if let Err(e) = seg.snapshot_into(&mut next.snapshot) {
            // No consistent copy of the values came within the retry bound
            // (a writer updating the same CPU block without pause starves
            // whole-block reads, one that died mid-update starves them all).
            if matches!(e, Error::Busy(_)) {
                self.busy += 1;
            }
            return Err(fail(e));
        }
        share_tables(&mut self.reading.snapshot, &mut next.snapshot);
        let d = seg.damon().map_err(fail)?;
        if d.busy_cpus.is_empty() {
            next.damon = d.aggregations;
        } else {
            // A busy block may hide a stream's latest regions: keep what the
            // last reading had for a stream now missing or older.
            self.busy += 1;
            next.damon = merge_newest(&self.reading.damon, d.aggregations);
        }
        next.damon_dropped = seg.damon_dropped();
        next.info = Some(info);
        Ok(id)
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

/// The two readings decode the tables each in their own cache; keeps one
/// decoding per generation. A writer that changes its tables without a
/// generation change (anything is possible in a file its owner writes)
/// would otherwise give readings of one generation different families, and
/// the metrics built from one would serve the other's values. `next`, just
/// read at the generation `last` holds, takes `last`'s tables (which the
/// metrics were built from), and `last` the fresh ones (it is read into
/// next); only if both copied the same value slots, so that every member
/// still lies inside `next`'s values.
fn share_tables(last: &mut perfabi::Snapshot, next: &mut perfabi::Snapshot) {
    if last.epoch == next.epoch
        && last.generation == next.generation
        && last.slots == next.slots
        && last.nr_cpus == next.nr_cpus
        && !last.families.is_empty()
    {
        std::mem::swap(&mut last.families, &mut next.families);
        std::mem::swap(&mut last.instances, &mut next.instances);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::Semantics;
    use perfabi_shm::writer::{Config, Writer};
    use perfabi_test_harness::forge::set_cpu_sequence;
    use std::os::unix::fs::FileExt;

    /// A segment with one counter at 42, written by nobody afterwards.
    fn writer(path: &Path) -> Writer {
        let w = Writer::create(
            path,
            &Config {
                heartbeat_interval: Duration::ZERO,
                auto_heartbeat: false,
                ..Config::default()
            },
        )
        .unwrap();
        let id = w.add("x", "count", Semantics::Counter).unwrap();
        w.adjust(id, 42).unwrap();
        w
    }

    fn total(s: &Source) -> Option<u64> {
        let snap = &s.reading.snapshot;
        let inst = snap.instances.iter().find(|i| i.name == "x")?;
        (snap.slots > 0).then(|| snap.total(inst))
    }

    #[test]
    fn a_busy_writer_keeps_the_last_values_until_the_hold_ends() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("seg");
        let _w = writer(&path);
        let mut s = Source::with_hold(&path, Trust::OwnerOrRoot, Duration::from_secs(5));
        let mut logs = Vec::new();
        let t0 = Instant::now();
        s.refresh(t0, &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held, s.held_reads), (Some(42), false, 0));
        let seq = set_cpu_sequence(&path, 0, None);
        s.refresh(t0 + Duration::from_secs(1), &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held, s.held_reads), (Some(42), true, 1));
        s.refresh(t0 + Duration::from_secs(5), &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held, s.held_reads), (Some(42), true, 2));
        assert!(s.busy >= 2);
        // Past the hold: no values, no segment information.
        s.refresh(t0 + Duration::from_millis(5001), &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held, s.held_reads), (None, false, 2));
        assert!(s.reading.info.is_none());
        s.refresh(t0 + Duration::from_secs(7), &mut |m| logs.push(m));
        assert!(s.reading.info.is_none());
        // Whole again: values at once.
        set_cpu_sequence(&path, 0, Some(seq));
        s.refresh(t0 + Duration::from_secs(8), &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held), (Some(42), false));
        assert_eq!(logs.len(), 4, "{logs:#?}");
        assert!(logs[1].contains("answering with the values of the last good read"));
        assert!(logs[2].contains("(held values expired); serving no values"));
        assert!(logs[3].contains("mapped"));
    }

    #[test]
    fn a_broken_file_is_held_a_missing_or_replaced_one_is_not() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("seg");
        let w = writer(&path);
        let mut s = Source::new(&path, Trust::OwnerOrRoot);
        let mut logs = Vec::new();
        let t0 = Instant::now();
        s.refresh(t0, &mut |m| logs.push(m));
        // Truncated, then its header overwritten: the same file, held.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(0).unwrap();
        s.refresh(t0, &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held), (Some(42), true));
        f.set_len(1 << 20).unwrap();
        f.write_all_at(&[0x5a; 4096], 0).unwrap();
        s.refresh(t0, &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held, s.held_reads), (Some(42), true, 2));
        // Another file at the path that is no segment: not held.
        drop(w);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, [0x5a; 8192]).unwrap();
        s.refresh(t0, &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held), (None, false));
        // A segment again, then gone: no values at once.
        let _w = writer(&path);
        s.refresh(t0, &mut |m| logs.push(m));
        assert_eq!(total(&s), Some(42));
        std::fs::remove_file(&path).unwrap();
        s.refresh(t0, &mut |m| logs.push(m));
        assert_eq!((total(&s), s.held), (None, false));
        assert!(
            logs.last().unwrap().contains("no segment at this path"),
            "{logs:#?}"
        );
    }

    #[test]
    fn only_errors_that_clear_by_themselves_are_transient() {
        let p = PathBuf::from("/x");
        assert!(transient(&Error::Busy(perfabi::Error::BusyMetadata)));
        assert!(transient(&Error::Truncated(p.clone())));
        assert!(transient(&Error::HeaderChanged(p.clone())));
        assert!(transient(&Error::Raced(p.clone())));
        assert!(!transient(&Error::NotFound(p.clone())));
        assert!(!transient(&Error::Untrusted {
            path: p.clone(),
            uid: 7
        }));
        assert!(!transient(&Error::Writable(p.clone(), 7)));
        assert!(!transient(&Error::Symlink(p)));
    }
}
