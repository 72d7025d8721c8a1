//! 64 worker processes in three languages write one segment directory
//! while they are killed with SIGKILL at random moments, most of them in
//! the middle of a batch of increments, and started again (a new pid, a
//! new segment, whose creation folds the dead ones, `spec/PERFABI.md`
//! §15.5); `perfabi-prometheus` serves the directory on loopback and the
//! real Prometheus scrapes it every second all the while (issue 32 item 7).
//!
//! The workers: `workers/worker.c` (libperfabi's writer API),
//! `workers/worker.py` (`perfabi.client`) and this test binary's ignored
//! test `rust_worker` (`perfabi_shm::writer`), a third of the slots each,
//! with the same families (so they merge): the counter
//! `workers_requests`, the histogram `workers_latency` and the gauge
//! `workers_slot` (mode `MAX`). Each makes batches of `10 * CHUNK`
//! requests (one counter add and one observation of `i % 1100` each, `i`
//! counting its requests), sleeping after every `CHUNK`, and prints
//! `batch N` once batch `N` is complete.
//!
//! **The increments made**, honestly: the test opens each worker's
//! segment as soon as the worker names it and keeps that descriptor, so
//! the file stays readable after a fold has unlinked it. Once a killed
//! worker has been reaped, the file is read through it as the fold reads a
//! dead writer's (`perfabi::dead::snapshot`, a block left odd by the kill
//! read settled): its exact counts. They must lie between what the worker
//! reported (`N` complete batches) and `N + 1` batches (the one in flight;
//! strictly between them for a kill inside a batch); its histogram must
//! hold one observation per request, but for the one interrupted, and its
//! sum the values of those observations. At the end every worker is
//! killed and read the same way, and the merged totals of the directory —
//! read by the reader library before and after a last fold, and the last
//! sample Prometheus scraped — equal the sums of those exact counts,
//! exactly.
//!
//! **Prometheus**: the raw samples of the run never decrease, `resets()`
//! over the run is 0, and `increase()` over the run lies within the bounds
//! of Prometheus' documented extrapolation (see [`increase_bounds`]).
//!
//! Bounded by time: the kills go on for [`RUN`], and then until each
//! language has had [`MID_BATCH_KILLS`] kills inside a batch, up to
//! [`WITNESS_LIMIT`] more. The last line is `WORKERS-KILLED PASS …` with
//! the figures.

use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Reading, SegmentView, Unit, ValueType};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::directory::SegmentName;
use perfabi_shm::writer::{Config, MemberId, Writer};
use perfabi_test_harness::deadline::{Deadline, WITNESS_LIMIT};
use perfabi_test_harness::http;
use perfabi_test_harness::prometheus::{self, Prometheus, Target};
use perfabi_test_harness::readme::repo_root;

mod common;
#[path = "workers/languages.rs"]
mod languages;

const TEST: &str =
    "workers_in_three_languages_killed_and_restarted_and_prometheus_sees_every_count";
/// The worker slots; slot `s` runs the language `s % 3`.
const SLOTS: usize = 64;
/// How long the kills go on at least.
const RUN: Duration = Duration::from_secs(30);
/// Time between two kills.
const KILL_EVERY: Duration = Duration::from_millis(120);
/// Kills inside a batch each language must have had (the witness).
const MID_BATCH_KILLS: u64 = 5;
/// A worker's pause after each chunk of requests, in microseconds.
const PAUSE_US: u64 = 2_000;
/// Chunks in a batch (as the workers have it).
const CHUNKS: u64 = 10;
/// Observations are `i % SPREAD`.
const SPREAD: u64 = 1100;
/// The histogram's bounds, as the workers have them.
const BOUNDS: [u64; 3] = [10, 100, 1000];
/// The merged counter as Prometheus has it.
const SERIES: &str = "perfabi_workers_requests_total";
const ENV_ARGS: &str = "PERFABI_TEST_WORKER_ARGS";

/// The families every worker has (`workers/worker.c` and
/// `workers/worker.py` make the same), added to `w`, and their one member
/// each: (requests, latency, slot).
fn families(w: &Writer) -> (MemberId, MemberId, MemberId) {
    let req = w
        .add_family(&FamilySpec::new(
            "workers_requests",
            "Requests served",
            "",
            Kind::Counter,
            Unit::NONE,
        ))
        .unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "workers_latency",
            "Request latency",
            "",
            Unit::NONE,
            Buckets::Explicit(BOUNDS.to_vec()),
        ))
        .unwrap();
    let slots = w
        .add_family(&FamilySpec {
            value_type: ValueType::I64,
            ..FamilySpec::gauge(
                "workers_slot",
                "The highest live worker slot",
                "",
                Unit::NONE,
                GaugeMode::Max,
            )
        })
        .unwrap();
    (
        w.add_member(req, "", &[]).unwrap(),
        w.add_member(lat, "", &[]).unwrap(),
        w.add_member(slots, "", &[]).unwrap(),
    )
}

/// The Rust worker (`workers/worker.c`'s twin): `DIR SLOT CHUNK PAUSE_US`
/// in `PERFABI_TEST_WORKER_ARGS`; runs until killed.
#[test]
#[ignore = "a worker process of workers_in_three_languages_killed_and_restarted_…"]
fn rust_worker() {
    let Ok(args) = std::env::var(ENV_ARGS) else {
        panic!("run by {TEST} only");
    };
    let args: Vec<&str> = args.split('\t').collect();
    let [dir, slot, chunk, pause_us] = args[..] else {
        panic!("{ENV_ARGS}: DIR SLOT CHUNK PAUSE_US, tab-separated");
    };
    let (slot, chunk, pause_us): (i64, u64, u64) = (
        slot.parse().unwrap(),
        chunk.parse().unwrap(),
        pause_us.parse().unwrap(),
    );
    let w = Writer::create_in(dir, "worker-rs", &Config::default()).unwrap();
    let (req, lat, sl) = families(&w);
    w.member_set(&sl, slot + 1).unwrap();
    println!("segment {}", w.path().unwrap().display());
    let mut i = 0u64;
    for batch in 1u64.. {
        for _ in 0..CHUNKS {
            for _ in 0..chunk {
                w.member_add(&req, 1).unwrap();
                w.observe(&lat, i % SPREAD).unwrap();
                i += 1;
            }
            std::thread::sleep(Duration::from_micros(pause_us));
        }
        println!("batch {batch}");
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    C,
    Python,
    Rust,
}

impl Lang {
    const ALL: [Lang; 3] = [Lang::C, Lang::Python, Lang::Rust];

    fn of(slot: usize) -> Lang {
        Lang::ALL[slot % 3]
    }

    /// Requests per chunk: Python's calls cost more, so it makes fewer
    /// (each worker stays light: 64 of them share the machine).
    fn chunk(self) -> u64 {
        match self {
            Lang::Python => 20,
            Lang::C | Lang::Rust => 100,
        }
    }
}

/// How the test runs each language's worker.
struct Programs {
    c: PathBuf,
    python_path: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Programs {
    /// The C worker compiled against libperfabi installed in a private
    /// prefix, and the Python package for the Python worker
    /// ([`languages`]); `None` (a skip, a failure under CI) if a tool is
    /// missing.
    fn build() -> Option<Programs> {
        if !languages::tools(TEST) {
            return None;
        }
        let tmp = tempfile::Builder::new()
            .prefix("perfabi-workers.")
            .tempdir()
            .unwrap();
        let pkg_config_path = languages::install_libperfabi(&tmp.path().join("prefix"));
        let c = tmp.path().join("worker-c");
        languages::compile_c(
            &repo_root().join("reader/prometheus/tests/workers/worker.c"),
            &pkg_config_path,
            &c,
        );
        let python_path = languages::python_package(&tmp.path().join("python"));
        Some(Programs {
            c,
            python_path,
            _tmp: tmp,
        })
    }

    fn command(&self, lang: Lang, dir: &Path, slot: usize) -> Command {
        let chunk = lang.chunk().to_string();
        let (slot, pause) = (slot.to_string(), PAUSE_US.to_string());
        match lang {
            Lang::C => {
                let mut c = Command::new(&self.c);
                c.arg(dir).args([&slot, &chunk, &pause]);
                c
            }
            Lang::Python => {
                let mut c = Command::new("python3");
                c.arg(repo_root().join("reader/prometheus/tests/workers/worker.py"))
                    .arg(dir)
                    .args([&slot, &chunk, &pause])
                    .env("PYTHONPATH", &self.python_path);
                c
            }
            Lang::Rust => {
                let mut c = Command::new(std::env::current_exe().unwrap());
                c.args([
                    "--ignored",
                    "--exact",
                    "rust_worker",
                    "--nocapture",
                    "--quiet",
                ])
                .env(
                    ENV_ARGS,
                    format!("{}\t{slot}\t{chunk}\t{pause}", dir.display()),
                );
                c
            }
        }
    }
}

/// A running worker: its process, its segment (opened by the test), and
/// the batches it has reported complete.
struct Worker {
    lang: Lang,
    child: Child,
    segment: File,
    batches: Arc<AtomicU64>,
    lines: JoinHandle<()>,
}

/// What a killed worker had done, read from its own segment.
#[derive(Debug, Default, Clone, Copy)]
struct Account {
    requests: u64,
    count: u64,
    sum: u64,
    /// Blocks its kill left odd (inside an update), read settled.
    settled: usize,
    /// Its kill landed inside a batch (strictly between two reports).
    mid_batch: bool,
    /// Requests of the batches it reported complete.
    reported: u64,
    /// The most its batch in flight could add (one batch).
    in_flight: u64,
}

/// The sum of `0 % SPREAD, 1 % SPREAD, .., (n - 1) % SPREAD`.
fn sum_of_first(n: u64) -> u64 {
    let (full, rest) = (n / SPREAD, n % SPREAD);
    full * (SPREAD * (SPREAD - 1) / 2) + rest * rest.saturating_sub(1) / 2
}

impl Worker {
    fn start(programs: &Programs, dir: &Path, slot: usize) -> Worker {
        let lang = Lang::of(slot);
        let mut child = programs
            .command(lang, dir, slot)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start the {lang:?} worker: {e}"));
        let out = child.stdout.take().unwrap();
        let batches = Arc::new(AtomicU64::new(0));
        let (tx, named) = mpsc::channel();
        let lines = {
            let batches = Arc::clone(&batches);
            std::thread::spawn(move || {
                let mut out = BufReader::new(out);
                let mut line = String::new();
                // Only whole lines: a worker killed in the middle of a
                // report leaves its last line cut ("batch " or "batch 12"
                // of "batch 123"), which reports nothing.
                while out.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if let Some(whole) = line.strip_suffix('\n') {
                        if let Some(p) = whole.strip_prefix("segment ") {
                            let _ = tx.send(PathBuf::from(p));
                        } else if let Some(n) = whole.strip_prefix("batch ") {
                            batches.store(n.trim().parse().unwrap(), Ordering::Relaxed);
                        }
                    }
                    line.clear();
                }
            })
        };
        let path = named
            .recv_timeout(WITNESS_LIMIT)
            .unwrap_or_else(|_| panic!("the {lang:?} worker of slot {slot} named its segment"));
        // Opened before anything may kill it: readable after a fold
        // unlinks it.
        let segment = File::open(&path).unwrap();
        Worker {
            lang,
            child,
            segment,
            batches,
            lines,
        }
    }

    /// SIGKILL, reaped; then its segment read as the fold reads a dead
    /// writer's, and checked against what it reported.
    fn kill(mut self) -> Account {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert_eq!(
            status.code(),
            None,
            "the {:?} worker exited by itself: {status}",
            self.lang
        );
        // Its stdout is closed: every report it made is in.
        self.lines.join().unwrap();
        let reported = self.batches.load(Ordering::Relaxed);
        let a = read_account(&self.segment);
        let batch = CHUNKS * self.lang.chunk();
        let (lo, hi) = (reported * batch, (reported + 1) * batch);
        assert!(
            (lo..=hi).contains(&a.requests),
            "{:?} worker: {} requests in its segment, {reported} batches of {batch} reported",
            self.lang,
            a.requests
        );
        // One observation per request (the counter is added first), but
        // for the one a kill interrupted.
        assert!(
            a.count + 1 >= a.requests && a.count <= a.requests,
            "{:?} worker: {} observations for {} requests",
            self.lang,
            a.count,
            a.requests
        );
        assert!(
            (sum_of_first(a.count.saturating_sub(1))..=sum_of_first(a.count + 1)).contains(&a.sum),
            "{:?} worker: observations' sum {} for {} observations",
            self.lang,
            a.sum,
            a.count
        );
        Account {
            mid_batch: lo < a.requests && a.requests < hi,
            reported: lo,
            in_flight: batch,
            ..a
        }
    }
}

/// A dead writer's segment, read through `file` (a copy of its words).
fn read_account(file: &File) -> Account {
    let len = file.metadata().unwrap().len();
    let mut bytes = vec![0u8; usize::try_from(len).unwrap()];
    file.read_exact_at(&mut bytes, 0).unwrap();
    let words: Vec<perfabi::Word> = bytes
        .chunks_exact(8)
        .map(|c| perfabi::Word::new(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect();
    let layout = *SegmentView::new(&words).unwrap().layout();
    let dead = perfabi::dead::snapshot(&words, layout, perfabi::protocol::DEFAULT_RETRIES).unwrap();
    let snap = &dead.snapshot;
    let mut a = Account {
        settled: dead.settled_blocks,
        ..Account::default()
    };
    for f in &snap.families {
        for m in &f.members {
            match (f.name.as_str(), snap.reading(f, m)) {
                ("workers_requests", Reading::Unsigned(n)) => a.requests = n,
                ("workers_latency", Reading::Histogram(h)) => {
                    assert_eq!(h.count, h.buckets.iter().sum::<u64>());
                    (a.count, a.sum) = (h.count, h.sum);
                }
                _ => {}
            }
        }
    }
    a
}

/// (requests, observations, their sum, the slot gauge) merged over the
/// directory by the reader library; no problem allowed.
fn merged(dir: &Path) -> (u64, u64, u64, Option<i64>) {
    let mut d = Directory::open(dir, DirectoryOptions::default()).unwrap();
    let s = d.read().unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let mut out = (0, 0, 0, None);
    for f in &s.families {
        match (f.family.name.as_str(), f.readings.first()) {
            ("workers_requests", Some(Reading::Unsigned(n))) => out.0 = *n,
            ("workers_latency", Some(Reading::Histogram(h))) => {
                (out.1, out.2) = (h.count, h.sum);
            }
            ("workers_slot", Some(Reading::Signed(n))) => out.3 = Some(*n),
            _ => {}
        }
    }
    out
}

/// A random number (std's hasher keys are random per `RandomState`).
fn random() -> u64 {
    RandomState::new().build_hasher().finish()
}

/// The raw samples `(time, value)` of `series` over the last `window`
/// seconds, from Prometheus' API.
fn samples(p: &Prometheus, series: &str, window: u64) -> Vec<(f64, f64)> {
    let q = format!("{series}[{window}s]");
    let path = format!("/api/v1/query?query={}", http::encode(&q));
    let r = http::get(p.address, &path, &[]).unwrap();
    assert_eq!(r.status, 200, "{q}: {}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let result = v["data"]["result"].as_array().unwrap();
    assert_eq!(result.len(), 1, "{q}: one series: {}", r.body);
    result[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s[0].as_f64().unwrap(),
                s[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// What Prometheus' `increase()` over `samples` may give, by its documented
/// extrapolation (`extrapolatedRate` in promql/functions.go, 2.42): the
/// growth between the first and last sample, `last - first`, scaled by
/// `(sampled + start + end) / sampled`, where `start` is at most the time
/// to the range's start, and never more than the time at which the
/// counter, extended backwards at its average rate, would reach zero (so
/// the start adds at most `first`), and `end` at most 1.1 average
/// intervals. Hence `last - first <= increase <= last + (last - first) *
/// 1.1 * avg / sampled`. The run's first sample is 0 (the families exist
/// before any worker counts), so the lower bound is the increments made.
fn increase_bounds(samples: &[(f64, f64)]) -> (f64, f64) {
    let (t0, first) = samples[0];
    let (t1, last) = samples[samples.len() - 1];
    let sampled = t1 - t0;
    let avg = sampled / (samples.len() - 1) as f64;
    (last - first, last + (last - first) * 1.1 * avg / sampled)
}

/// The accounts of the killed workers, by language.
#[derive(Default)]
struct Tally {
    total: Account,
    kills: [u64; 3],
    mid_batch: [u64; 3],
    settled: usize,
}

impl Tally {
    fn add(&mut self, lang: Lang, a: Account) {
        let k = Lang::ALL.iter().position(|&l| l == lang).unwrap();
        self.kills[k] += 1;
        self.mid_batch[k] += u64::from(a.mid_batch);
        self.settled += a.settled;
        self.total.requests += a.requests;
        self.total.count += a.count;
        self.total.sum += a.sum;
        self.total.reported += a.reported;
        self.total.in_flight += a.in_flight;
    }
}

#[test]
fn workers_in_three_languages_killed_and_restarted_and_prometheus_sees_every_count() {
    if !prometheus::available(TEST) {
        return;
    }
    let Some(programs) = Programs::build() else {
        return;
    };
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let endpoint = common::start(&dir, &[]);
    let prom = Prometheus::start(&[Target::new("workers", endpoint.addr)]);
    let began = Instant::now();
    // The families at zero before any worker: Prometheus' first sample is
    // 0, so increase() over the run is the whole of the increments made.
    let zero = Writer::create_in(&dir, "zero", &Config::default()).unwrap();
    families(&zero);
    prom.until(WITNESS_LIMIT, "Prometheus scraped the families at 0", |p| {
        (p.query(SERIES)?.0 == 0.0).then_some(())
    });
    zero.close();

    let mut workers: Vec<Option<Worker>> = (0..SLOTS)
        .map(|s| Some(Worker::start(&programs, &dir, s)))
        .collect();
    let mut started = SLOTS as u64;
    let mut tally = Tally::default();

    // The kills: a random slot every KILL_EVERY, started again at once
    // (its creation folds the dead), for RUN and until every language has
    // had kills inside a batch.
    let run = Deadline::after(RUN);
    let witness = Deadline::after(RUN + WITNESS_LIMIT);
    while !run.passed() || tally.mid_batch.iter().any(|&n| n < MID_BATCH_KILLS) {
        if witness.passed() {
            witness.fail(format_args!(
                "{MID_BATCH_KILLS} kills inside a batch in each language (C, Python, Rust: {:?} \
                 of {:?} kills)",
                tally.mid_batch, tally.kills
            ));
        }
        std::thread::sleep(KILL_EVERY);
        let slot = usize::try_from(random() % SLOTS as u64).unwrap();
        let w = workers[slot].take().unwrap();
        let lang = w.lang;
        tally.add(lang, w.kill());
        workers[slot] = Some(Worker::start(&programs, &dir, slot));
        started += 1;
    }

    // Every slot live: the slot gauge (MAX over live writers) is the
    // highest slot's; with that worker dead, its gauge is gone.
    assert_eq!(merged(&dir).3, Some(SLOTS as i64));
    let last = workers[SLOTS - 1].take().unwrap();
    tally.add(last.lang, last.kill());
    assert_eq!(merged(&dir).3, Some(SLOTS as i64 - 1));
    // The end: every worker killed and read.
    for w in workers.iter_mut().filter_map(Option::take) {
        let lang = w.lang;
        tally.add(lang, w.kill());
    }
    let total = tally.total;
    let (requests, count, sum, gauge) = merged(&dir);
    assert_eq!(
        (requests, count, sum),
        (total.requests, total.count, total.sum),
        "merged (requests, observations, sum) against the workers' own segments"
    );
    assert_eq!(gauge, None, "no live writer, no gauge");
    let unfolded = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| SegmentName::parse(&e.as_ref().unwrap().file_name()).is_some())
        .count();
    // One more fold, with every worker gone: only the kept file is left,
    // with the same totals.
    let report = perfabi_shm::writer::fold::fold(&dir).unwrap();
    assert!(report.left.is_empty(), "{report:?}");
    assert_eq!(merged(&dir).0, total.requests);
    assert_eq!(merged(&dir).1, total.count);

    // Prometheus: its last sample is the total, none went down, and
    // increase() over the run is within its extrapolation of it.
    let series = SERIES;
    prom.until(WITNESS_LIMIT, "Prometheus scraped the final total", |p| {
        let (v, _) = p.query(series)?;
        (v == total.requests as f64).then_some(())
    });
    let window = began.elapsed().as_secs() + 1;
    let raw = samples(&prom, series, window);
    assert!(
        raw.windows(2).all(|w| w[0].1 <= w[1].1),
        "the scraped total went down: {raw:?}"
    );
    assert_eq!(raw.last().unwrap().1, total.requests as f64);
    assert_eq!(raw[0].1, 0.0, "the first sample is the families at zero");
    let resets = prom
        .query(&format!("resets({series}[{window}s])"))
        .unwrap()
        .0;
    assert_eq!(resets, 0.0, "resets() over the run");
    let count_resets = prom
        .query(&format!("resets(perfabi_workers_latency_count[{window}s])"))
        .unwrap()
        .0;
    assert_eq!(count_resets, 0.0, "resets() of the histogram's count");
    // The histogram too: its count and sum as the workers' own.
    for (q, want) in [
        ("perfabi_workers_latency_count", total.count),
        ("perfabi_workers_latency_sum", total.sum),
    ] {
        assert_eq!(prom.query(q).map(|r| r.0), Some(want as f64), "{q}");
    }
    let increase = prom
        .query(&format!("increase({series}[{window}s])"))
        .unwrap()
        .0;
    let (lo, hi) = increase_bounds(&raw);
    assert!(
        lo <= increase && increase <= hi,
        "increase() {increase} outside [{lo}, {hi}] (the total {})",
        total.requests
    );
    let kills: u64 = tally.kills.iter().sum();
    // What the workers reported, and the bound on the rest: one batch in
    // flight per kill.
    assert!(total.reported <= total.requests && total.requests <= total.reported + total.in_flight);
    println!(
        "WORKERS-KILLED PASS: {started} workers started (C, Python, Rust: 64 at a time), {kills} \
         killed with SIGKILL (C, Python, Rust: {:?}; inside a batch: {:?}; inside an update: \
         {}), {} folded by the restarts, {unfolded} left to the last fold; merged total {} \
         requests, {} observations (sum {}) equal the workers' own counts ({} reported \
         in complete batches, the {} more within the batches in flight, at most {}); Prometheus: {} \
         samples over {window} s, none lower than the one before, resets() 0, increase() {:.0} \
         in [{lo:.0}, {hi:.0}]",
        tally.kills,
        tally.mid_batch,
        tally.settled,
        kills as usize - unfolded,
        total.requests,
        total.count,
        total.sum,
        total.reported,
        total.requests - total.reported,
        total.in_flight,
        raw.len(),
        increase,
    );
}
