//! The segment as the agent sees it: mapped when it can be, looked at
//! before every request, and read only as far as the request needs.
//!
//! Before every request ([`Source::refresh`]) the agent follows the path
//! (one `stat`) and looks at the header ([`Segment::status`]: the writer's
//! liveness is re-checked once a second, or at once when it looks gone).
//! While the segment's epoch and metadata generation stay the same, that
//! is all: the decoded tables ([`Reading::snapshot`]'s instances and
//! families) are kept, nothing is allocated. When they change, or after
//! any failed read, the tables and every value are read anew, consistently
//! ([`Segment::snapshot_into`]). A fetch then reads the value slots it
//! serves ([`Source::read_values`]: one consistent read of their runs on
//! every CPU, so a group the writer updates together is seen whole), and
//! the DAMON regions only if it serves them ([`Source::read_damon`]).
//!
//! A read that fails for a reason that clears by itself ([`transient`]:
//! the writer busy past the retry bound, or the very file the agent mapped
//! truncated, overwritten or replaced while being opened, which a live
//! writer repairs at its next heartbeat) keeps the last good reading for at
//! most [`HOLD`] after it, and is counted ([`Source::held_reads`]): the
//! header and tables for [`HOLD`] after the last good look at them, a
//! value for [`HOLD`] after it was last read (the first request that needs
//! an older one ends the hold). Past that bound, or on any other error (no
//! file at the path, another file that is not a segment, an owner not
//! trusted), the reading is emptied and the agent serves no values until a
//! read succeeds. Every change of state is logged once; nothing in here can
//! take the agent down.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use perfabi::damon::Aggregation;
use perfabi::{HistogramPlace, Snapshot};
use perfabi_reader::{Error, Liveness, Options, Segment, SegmentInfo, Trust};
use perfabi_shm::safe_open::escape_path;

/// How long after the last good read its values are still served while
/// reads fail for a transient reason.
pub const HOLD: Duration = Duration::from_secs(5);

/// What the agent has read.
#[derive(Default)]
pub struct Reading {
    /// Header and writer liveness; `None` while no segment is mapped.
    pub info: Option<SegmentInfo>,
    /// The counters' and families' tables of one generation, and their
    /// values on every CPU (`values[cpu * slots + slot]`): all of them as
    /// read with the tables, then each slot as last read for a fetch.
    pub snapshot: Snapshot,
    /// Latest complete DAMON aggregation of each (kdamond, target), as
    /// last read for a request that needed it.
    pub damon: Vec<Aggregation>,
    /// Regions the writer could not publish.
    pub damon_dropped: u64,
}

/// What [`Source::read_values`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// The slots were read at the generation of the tables.
    Read,
    /// The read failed (or the segment is in trouble since this request's
    /// look at it): the values last read are served, held.
    Held,
    /// The metadata generation moved since the tables were read: nothing
    /// was copied; [`Source::refresh`] reads the tables again.
    Moved,
    /// No values: no segment, or the hold is over.
    Gone,
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
    recheck: Duration,
    seg: Option<Segment>,
    last_problem: Option<String>,
    /// The reading served: the latest good one (possibly held).
    pub reading: Reading,
    /// A buffer the tables are read anew in (its allocations are reused).
    next: Snapshot,
    /// When the reading was last found good, and the (device, inode) it
    /// came from.
    good: Option<(Instant, (u64, u64))>,
    /// The next refresh reads the tables and every value anew: nothing
    /// read yet, a read failed, or the generation moved.
    full: bool,
    /// When each value slot was last read: [`Source::stamp`]s (0: never).
    read_at: Vec<u64>,
    /// What the stamps count from.
    base: Instant,
    /// The rows a fetch's runs are copied into (reused).
    rows: Vec<u64>,
    /// Where the rows hold histograms, for a fetch's check (reused).
    histograms: Vec<HistogramPlace>,
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
            recheck: Options::default().recheck,
            seg: None,
            last_problem: None,
            reading: Reading::default(),
            next: Snapshot::default(),
            good: None,
            full: true,
            read_at: Vec::new(),
            base: Instant::now(),
            rows: Vec::new(),
            histograms: Vec::new(),
            held: false,
            held_reads: 0,
            busy: 0,
            stale: 0,
            remaps: 0,
        }
    }

    /// How often the writer's liveness (and the mapped file's length) is
    /// looked at ([`Options::recheck`], one second unless told otherwise);
    /// for a segment mapped after this call.
    pub fn set_recheck(&mut self, recheck: Duration) {
        self.recheck = recheck;
    }

    /// `now` as a stamp of [`Source::read_at`]: never 0.
    fn stamp(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.base).as_nanos() as u64 + 1
    }

    /// Follows the path and looks at the header, before a request at time
    /// `now`; reads the tables and every value again if the generation
    /// moved or a read failed. `log` gets one line per change of state
    /// (lost, held, recovered), never one per request.
    pub fn refresh(&mut self, now: Instant, log: &mut dyn FnMut(String)) {
        match self.try_refresh(now) {
            Ok(id) => {
                self.good = Some((now, id));
                self.held = false;
                if let Some(p) = self.last_problem.take() {
                    let info = self.reading.info.as_ref().map(|i| i.header);
                    log(format!(
                        "{}: mapped (epoch {:#x}, {} CPUs){}",
                        escape_path(&self.path),
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
            Err(f) => self.failed(f, now, log),
        }
    }

    /// After a failed read at `now`: holds the reading if the failure is
    /// transient and the last good reading recent, else empties it.
    fn failed(&mut self, failure: Failure, now: Instant, log: &mut dyn FnMut(String)) {
        self.full = true;
        let within = self
            .good
            .is_some_and(|(t, _)| now.saturating_duration_since(t) <= self.hold);
        if failure.transient && failure.same_file && within {
            self.held_reads += 1;
            if !self.held {
                log(format!(
                    "{}: {}; answering with the values of the last good read for at most {} s",
                    escape_path(&self.path),
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
        self.drop_reading(failure.what, failure.transient, log);
    }

    /// Serves no values until a read succeeds, for `problem`.
    fn drop_reading(&mut self, problem: String, transient: bool, log: &mut dyn FnMut(String)) {
        if self.reading.info.is_some() {
            log(format!(
                "{}: {problem}{}; serving no values until it is back",
                escape_path(&self.path),
                if self.held && transient {
                    " (held values expired)"
                } else {
                    ""
                }
            ));
        } else if self.last_problem.as_deref() != Some(problem.as_str()) {
            log(format!(
                "{}: {problem}; will retry at every request",
                escape_path(&self.path)
            ));
        }
        self.last_problem = Some(problem);
        self.reading = Reading::default();
        self.good = None;
        self.held = false;
        self.full = true;
    }

    /// Follows the path and looks at the segment; reads its tables and
    /// values into `self.reading` if they are to be read anew. Returns the
    /// (device, inode) of the file read.
    fn try_refresh(&mut self, now: Instant) -> Result<(u64, u64), Failure> {
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
                recheck: self.recheck,
                ..Options::default()
            };
            let seg = Segment::open_with(&self.path, opts).map_err(fail)?;
            self.remaps += 1;
            self.last_problem.get_or_insert_with(String::new);
            self.seg = Some(seg);
            self.full = true;
        }
        let seg = self.seg.as_mut().expect("mapped above");
        let remaps = seg.stats().remaps;
        let fast = !self.full && same_file;
        if let Some(info) = self.reading.info.as_mut().filter(|_| fast) {
            // The usual request: the header only, no allocation.
            let (header, liveness) = seg.status().map_err(fail)?;
            let moved = seg.stats().remaps - remaps;
            self.remaps += moved;
            let s = &self.reading.snapshot;
            if moved == 0 && header.epoch == s.epoch && header.generation == s.generation {
                info.header = header;
                info.liveness = liveness;
                if matches!(liveness, Liveness::Dead { .. } | Liveness::Silent { .. }) {
                    self.stale += 1;
                }
                return Ok(id);
            }
        }
        // The tables and every value, anew.
        let remaps = seg.stats().remaps;
        let info = seg.info().map_err(fail)?;
        self.remaps += seg.stats().remaps - remaps;
        if matches!(
            info.liveness,
            Liveness::Dead { .. } | Liveness::Silent { .. }
        ) {
            self.stale += 1;
        }
        if let Err(e) = seg.snapshot_into(&mut self.next) {
            // No consistent copy of the values came within the retry bound
            // (a writer updating the same CPU block without pause starves
            // whole-block reads, one that died mid-update starves them all).
            if matches!(e, Error::Busy(_)) {
                self.busy += 1;
            }
            return Err(fail(e));
        }
        share_tables(&mut self.reading.snapshot, &mut self.next);
        std::mem::swap(&mut self.reading.snapshot, &mut self.next);
        self.reading.info = Some(info);
        let stamp = self.stamp(now);
        self.read_at.clear();
        self.read_at.resize(self.reading.snapshot.slots, stamp);
        self.full = false;
        Ok(id)
    }

    /// Reads the value slots of `runs` (`(first slot, slots)`, sorted, not
    /// overlapping, inside the tables' slots) on every CPU into
    /// [`Reading::snapshot`]'s values, in one consistent read at the
    /// tables' generation, for a fetch at time `now` after
    /// [`Source::refresh`]. No allocation once the runs have been read.
    pub fn read_values(
        &mut self,
        runs: &[(usize, usize)],
        now: Instant,
        log: &mut dyn FnMut(String),
    ) -> Values {
        if self.reading.info.is_none() {
            return Values::Gone;
        }
        if !self.held && !self.full {
            let Some(seg) = self.seg.as_mut() else {
                return Values::Gone;
            };
            let s = &mut self.reading.snapshot;
            let stride: usize = runs.iter().map(|&(_, len)| len).sum();
            if runs.iter().any(|&(src, len)| src + len > s.slots) {
                // Not runs of these tables: read them again.
                self.full = true;
                return Values::Moved;
            }
            self.rows.resize(s.nr_cpus * stride, 0);
            let read = seg.read_ranges(runs, &mut self.rows).and_then(|g| {
                if g == s.generation {
                    // The histogram values served are consistent copies
                    // (spec §5.1): checked before they replace the held
                    // ones, at their places in the rows.
                    self.histograms.clear();
                    self.histograms
                        .extend(s.histogram_places().iter().filter_map(|p| {
                            Some(HistogramPlace {
                                at: run_offset(runs, p.at, p.words)?,
                                ..*p
                            })
                        }));
                    perfabi::family::check_histograms(&self.histograms, &self.rows, stride)?;
                }
                Ok(g)
            });
            match read {
                Ok(g) if g == s.generation => {
                    for (cpu, row) in self.rows.chunks_exact(stride.max(1)).enumerate() {
                        let out = &mut s.values[cpu * s.slots..(cpu + 1) * s.slots];
                        let mut at = 0;
                        for &(src, len) in runs {
                            out[src..src + len].copy_from_slice(&row[at..at + len]);
                            at += len;
                        }
                    }
                    let stamp = self.stamp(now);
                    for &(src, len) in runs {
                        self.read_at[src..src + len].fill(stamp);
                    }
                    return Values::Read;
                }
                Ok(_) => {
                    self.full = true;
                    return Values::Moved;
                }
                Err(e) => {
                    if matches!(e, Error::Busy(_)) {
                        self.busy += 1;
                    }
                    let f = Failure {
                        transient: transient(&e),
                        same_file: true,
                        what: e.to_string(),
                    };
                    self.failed(f, now, log);
                }
            }
        }
        if !self.held {
            return Values::Gone;
        }
        // Held: only values read at most a hold ago.
        let oldest = self.stamp(now).saturating_sub(self.hold.as_nanos() as u64);
        let fresh = runs.iter().all(|&(src, len)| {
            self.read_at
                .get(src..src + len)
                .is_some_and(|t| t.iter().all(|&t| t != 0 && t >= oldest))
        });
        if fresh {
            return Values::Held;
        }
        // This request was counted as held (by the look before it, or by
        // the read above); it is answered with nothing.
        self.held_reads -= 1;
        let problem = self.last_problem.take().unwrap_or_default();
        self.drop_reading(problem, true, log);
        Values::Gone
    }

    /// Reads the latest DAMON aggregations into [`Reading::damon`], for a
    /// request at time `now` that serves them (after [`Source::refresh`]);
    /// held values stay as they are.
    pub fn read_damon(&mut self, now: Instant, log: &mut dyn FnMut(String)) {
        if self.reading.info.is_none() || self.held {
            return;
        }
        let Some(seg) = self.seg.as_mut() else { return };
        match seg.damon() {
            Ok(d) => {
                let r = &mut self.reading;
                if d.busy_cpus.is_empty() {
                    r.damon = d.aggregations;
                } else {
                    // A busy block may hide a stream's latest regions: keep
                    // what the last reading had for a stream now missing or
                    // older.
                    self.busy += 1;
                    r.damon = merge_newest(&r.damon, d.aggregations);
                }
                r.damon_dropped = seg.damon_dropped();
            }
            Err(e) => {
                let f = Failure {
                    transient: transient(&e),
                    same_file: true,
                    what: e.to_string(),
                };
                self.failed(f, now, log);
            }
        }
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

/// Where the `words` values from slot `first` on are in a CPU's row of
/// the values of `runs` (each run's slots after the earlier runs'), if one
/// run holds them all.
fn run_offset(runs: &[(usize, usize)], first: usize, words: usize) -> Option<usize> {
    let mut at = 0;
    for &(src, len) in runs {
        if src <= first && first + words <= src + len {
            return Some(at + first - src);
        }
        at += len;
    }
    None
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
    use perfabi::{Buckets, FamilySpec, Semantics, Unit};
    use perfabi_shm::writer::{Config, Writer};
    use perfabi_test_harness::forge::{add_to_value, set_cpu_sequence};
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

    /// The total over CPUs of value slot `slot`.
    fn slot_total(s: &Source, slot: usize) -> u64 {
        let snap = &s.reading.snapshot;
        (0..snap.nr_cpus)
            .map(|c| snap.values[c * snap.slots + slot])
            .sum()
    }

    /// A request for `x` at `t`, as the agent makes it: the look before
    /// it, then the read of x's slot; x's total, if it has a value.
    fn fetch(s: &mut Source, t: Instant, logs: &mut Vec<String>) -> Option<u64> {
        s.refresh(t, &mut |m| logs.push(m));
        let x = s.reading.snapshot.instances.iter().find(|i| i.name == "x");
        let slot = x?.slot as usize;
        match s.read_values(&[(slot, 1)], t, &mut |m| logs.push(m)) {
            Values::Read | Values::Held => total(s),
            Values::Moved | Values::Gone => None,
        }
    }

    #[test]
    fn a_busy_writer_keeps_the_last_values_until_the_hold_ends() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("seg");
        let _w = writer(&path);
        let mut s = Source::with_hold(&path, Trust::OwnerOrRoot, Duration::from_secs(5));
        let mut logs = Vec::new();
        let t0 = Instant::now();
        let got = fetch(&mut s, t0, &mut logs);
        assert_eq!((got, s.held, s.held_reads), (Some(42), false, 0));
        let seq = set_cpu_sequence(&path, 0, None);
        let got = fetch(&mut s, t0 + Duration::from_secs(1), &mut logs);
        assert_eq!((got, s.held, s.held_reads), (Some(42), true, 1));
        // The value was read at t0: held until t0 + 5 s.
        let got = fetch(&mut s, t0 + Duration::from_secs(5), &mut logs);
        assert_eq!((got, s.held, s.held_reads), (Some(42), true, 2));
        assert!(s.busy >= 2);
        // Past the hold: no values, no segment information.
        let got = fetch(&mut s, t0 + Duration::from_millis(5001), &mut logs);
        assert_eq!((got, s.held, s.held_reads), (None, false, 2));
        assert!(s.reading.info.is_none());
        fetch(&mut s, t0 + Duration::from_secs(7), &mut logs);
        assert!(s.reading.info.is_none());
        // Whole again: values at once.
        set_cpu_sequence(&path, 0, Some(seq));
        let got = fetch(&mut s, t0 + Duration::from_secs(8), &mut logs);
        assert_eq!((got, s.held), (Some(42), false));
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
        fetch(&mut s, t0, &mut logs);
        // Truncated, then its header overwritten: the same file, held.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(0).unwrap();
        let got = fetch(&mut s, t0, &mut logs);
        assert_eq!((got, s.held), (Some(42), true));
        f.set_len(1 << 20).unwrap();
        f.write_all_at(&[0x5a; 4096], 0).unwrap();
        let got = fetch(&mut s, t0, &mut logs);
        assert_eq!((got, s.held, s.held_reads), (Some(42), true, 2));
        // Another file at the path that is no segment: not held.
        drop(w);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, [0x5a; 8192]).unwrap();
        let got = fetch(&mut s, t0, &mut logs);
        assert_eq!((got, s.held), (None, false));
        // A segment again, then gone: no values at once.
        let _w = writer(&path);
        assert_eq!(fetch(&mut s, t0, &mut logs), Some(42));
        std::fs::remove_file(&path).unwrap();
        let got = fetch(&mut s, t0, &mut logs);
        assert_eq!((got, s.held), (None, false));
        assert!(
            logs.last().unwrap().contains("no segment at this path"),
            "{logs:#?}"
        );
    }

    /// Between metadata changes a request reads only its slots, in one
    /// consistent read: a group the writer raises together is seen whole,
    /// the slots not asked for keep the value they had, and a new
    /// generation is said (and read in full at the next look).
    #[test]
    fn a_fetch_reads_its_slots_whole_and_sees_a_new_generation() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("seg");
        let w = std::sync::Arc::new(Writer::create(&path, &Config::default()).unwrap());
        let ids: Vec<_> = (0..8)
            .map(|c| {
                w.add(&format!("g.c{c}"), "count", Semantics::Counter)
                    .unwrap()
            })
            .collect();
        let other = w.add("other", "count", Semantics::Counter).unwrap();
        w.adjust(other, 5).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (w, stop) = (w.clone(), stop.clone());
            let group: Vec<_> = ids.iter().map(|&i| (i, 1)).collect();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    w.adjust_group(&group).unwrap();
                    n += 1;
                }
                n
            })
        };
        let mut s = Source::new(&path, Trust::OwnerOrRoot);
        let mut log = |m: String| println!("{m}");
        s.refresh(Instant::now(), &mut log);
        let slot = |s: &Source, n: &str| {
            s.reading
                .snapshot
                .instances
                .iter()
                .find(|i| i.name == n)
                .unwrap()
                .slot as usize
        };
        let (first, other_slot) = (slot(&s, "g.c0"), slot(&s, "other"));
        assert_eq!(
            slot(&s, "g.c7"),
            first + 7,
            "the group's slots follow each other"
        );
        let runs = [(first, 8)];
        // The writer is seen writing before the reads are counted: on busy
        // CPUs they could otherwise all end before it starts.
        let until = perfabi_test_harness::deadline::Deadline::witness();
        let mut written = false;
        while !written && !until.passed() {
            let now = Instant::now();
            s.refresh(now, &mut log);
            written =
                s.read_values(&runs, now, &mut log) == Values::Read && slot_total(&s, first) > 0;
            std::thread::yield_now();
        }
        until.assert(written, "the writer's first group update");
        let (mut torn, mut read) = (0u64, 0u64);
        for _ in 0..20_000 {
            let now = Instant::now();
            s.refresh(now, &mut log);
            match s.read_values(&runs, now, &mut log) {
                Values::Read => read += 1,
                v => panic!("{v:?}"),
            }
            let totals: Vec<u64> = (first..first + 8).map(|k| slot_total(&s, k)).collect();
            torn += u64::from(totals.iter().any(|&t| t != totals[0]));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = writer.join().unwrap();
        println!("{read} reads against {rounds} group updates: {torn} torn");
        assert_eq!(torn, 0);
        // A slot no fetch asked for keeps the value it was read with.
        w.adjust(other, 1).unwrap();
        s.refresh(Instant::now(), &mut log);
        assert_eq!(s.read_values(&runs, Instant::now(), &mut log), Values::Read);
        assert_eq!(slot_total(&s, other_slot), 5);
        // A new counter: the read says the generation moved; the next look
        // reads the tables and every value.
        w.add("late", "count", Semantics::Counter).unwrap();
        assert_eq!(
            s.read_values(&runs, Instant::now(), &mut log),
            Values::Moved
        );
        s.refresh(Instant::now(), &mut log);
        assert_eq!(slot_total(&s, other_slot), 6);
        assert!(s.reading.snapshot.find("late").is_some());
    }

    /// Spec §5.1: a fetch's read in which a histogram's count is not its
    /// buckets' sum (the test adds 1 to CPU 0's count behind the writer)
    /// replaces no value: it fails like any read of a malformed segment
    /// (logged with its reason, the last good values held), and once the
    /// count is its buckets' sum again the values are read again.
    #[test]
    fn a_fetch_whose_histogram_count_is_not_its_buckets_sum_replaces_no_value() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("seg");
        let w = Writer::create(
            &path,
            &Config {
                heartbeat_interval: Duration::ZERO,
                auto_heartbeat: false,
                max_families: 2,
                max_members: 2,
                ..Config::default()
            },
        )
        .unwrap();
        let spec = FamilySpec::histogram("lat", "", "", Unit::NS, Buckets::Explicit(vec![10]));
        let m = w.add_member(w.add_family(&spec).unwrap(), "", &[]).unwrap();
        w.observe(&m, 5).unwrap();
        w.observe(&m, 50).unwrap();
        let mut s = Source::new(&path, Trust::OwnerOrRoot);
        let mut logs = Vec::new();
        let mut log = |l: String| logs.push(l);
        let t = Instant::now();
        s.refresh(t, &mut log);
        let member = &s.reading.snapshot.family("lat").unwrap().members[0];
        let runs = [(member.value_slot as usize, member.words as usize)];
        assert_eq!(s.read_values(&runs, t, &mut log), Values::Read);
        let good = s.reading.snapshot.values.clone();
        add_to_value(&path, 0, runs[0].0 as u64, 1);
        s.refresh(t, &mut log);
        assert_eq!(s.read_values(&runs, t, &mut log), Values::Held);
        assert!(s.held);
        assert_eq!(s.reading.snapshot.values, good, "no value replaced");
        add_to_value(&path, 0, runs[0].0 as u64, u64::MAX);
        s.refresh(t, &mut log);
        assert_eq!(s.read_values(&runs, t, &mut log), Values::Read);
        assert!(!s.held);
        assert_eq!(s.reading.snapshot.values, good);
        assert!(
            logs[1].contains("histogram count is not the sum of its buckets in CPU 0"),
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
