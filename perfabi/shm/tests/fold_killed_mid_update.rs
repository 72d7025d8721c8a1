//! A writer killed with SIGKILL inside a multi-word update (a histogram
//! observation) leaves its block's sequence odd for ever; the fold reads
//! that block settled (`spec/PERFABI.md` §15.5, `perfabi::dead`) and keeps
//! its counts: every completed update, and at most the one interrupted
//! update of each thread, never lost, never twice.
//!
//! The workers are this test binary again, running the ignored test
//! `observer`; each of its threads stores, after every completed update,
//! how many it completed into a file the test maps too (the workers'
//! account survives their SIGKILL).
#![cfg(not(loom))]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Kind, Reading, SegmentView, Unit};
use perfabi_shm::directory::{SegmentName, KEPT_NAME};
use perfabi_shm::writer::{fold, Config, MethodChoice, Writer};
use perfabi_test_harness::deadline::Deadline;

const ENV_DIR: &str = "PERFABI_TEST_OBSERVER_DIR";
const ENV_ACCOUNT: &str = "PERFABI_TEST_OBSERVER_ACCOUNT";
const ENV_LOCK: &str = "PERFABI_TEST_OBSERVER_LOCK_METHOD";
const THREADS: usize = 2;
/// The values observed: `i % SPREAD` for update `i`.
const SPREAD: u64 = 1000;

/// The account file, mapped shared: one word per thread.
fn account(path: &Path) -> (memmap2::MmapMut, std::fs::File) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    // SAFETY: the file is this test's own (a private temporary folder), of
    // fixed length, never truncated while mapped; its words are accessed
    // only as atomics (`words`).
    let map = unsafe { memmap2::MmapMut::map_mut(&f) }.unwrap();
    (map, f)
}

fn words(map: &memmap2::MmapMut) -> &[AtomicU64] {
    assert!(map.len() >= THREADS * 8 && map.as_ptr().align_offset(8) == 0);
    // SAFETY: the mapping is page aligned and at least THREADS words long
    // (checked); `AtomicU64` has the size and alignment of `u64`, and every
    // process reaches these words only through atomic operations.
    unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<AtomicU64>(), THREADS) }
}

/// The worker: a counter add and a histogram observation per update, from
/// `THREADS` threads in a tight loop, each thread's completed updates
/// stored in the account after each update; until killed.
#[test]
#[ignore = "a worker process of a_kill_inside_an_observation_loses_nothing_and_counts_nothing_twice"]
fn observer() {
    let (Some(dir), Some(acct)) = (std::env::var_os(ENV_DIR), std::env::var_os(ENV_ACCOUNT)) else {
        panic!("run by a_kill_inside_an_observation_loses_nothing_and_counts_nothing_twice only");
    };
    let config = Config {
        max_instances: 64,
        damon_capacity: 0,
        method: if std::env::var_os(ENV_LOCK).is_some() {
            MethodChoice::Lock
        } else {
            MethodChoice::Auto
        },
        ..Config::default()
    };
    let w = Writer::create_in(dir, "observer", &config).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests",
            "",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let m = w.add_member(req, "", &[]).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Latency",
            "",
            Unit::NS,
            Buckets::Log2 { first: 4, n: 8 },
        ))
        .unwrap();
    let l = w.add_member(lat, "", &[]).unwrap();
    let (map, _f) = account(Path::new(&acct));
    let done = words(&map);
    std::thread::scope(|s| {
        for slot in done {
            let (w, m, l) = (&w, &m, &l);
            s.spawn(move || {
                for i in 0u64.. {
                    w.member_add(m, 1).unwrap();
                    w.observe(l, i % SPREAD).unwrap();
                    slot.store(i + 1, Ordering::Release);
                }
            });
        }
    });
}

/// The sum of `0 % SPREAD, 1 % SPREAD, .., (n - 1) % SPREAD`.
fn sum_of_first(n: u64) -> u64 {
    let full = n / SPREAD;
    let rest = n % SPREAD;
    full * (SPREAD * (SPREAD - 1) / 2) + rest * (rest.saturating_sub(1)) / 2
}

/// A segment file's words, copied (the writer is dead: they are settled).
fn file_words(path: &Path) -> Vec<AtomicU64> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect()
}

/// How many of the segment's CPU blocks have an odd sequence.
fn odd_blocks(path: &Path) -> usize {
    let w = file_words(path);
    let view = SegmentView::new(&w).unwrap();
    let layout = view.layout();
    (0..layout.nr_cpus)
        .filter(|&c| {
            w[layout.cpu_block_word(c) + perfabi::layout::CPU_SEQ_WORD].load(Ordering::Relaxed) & 1
                == 1
        })
        .count()
}

/// (requests, observations, their sum) in the kept file.
fn kept(dir: &Path) -> (u64, u64, u64) {
    let path = dir.join(KEPT_NAME);
    if !path.exists() {
        return (0, 0, 0);
    }
    let w = file_words(&path);
    let snap = SegmentView::new(&w).unwrap().snapshot(16).unwrap();
    let mut out = (0, 0, 0);
    for f in &snap.families {
        for m in &f.members {
            match (f.name.as_str(), snap.reading(f, m)) {
                ("app.requests", Reading::Unsigned(n)) => out.0 = n,
                ("app.latency", Reading::Histogram(h)) => {
                    assert_eq!(h.count, h.buckets.iter().sum::<u64>());
                    (out.1, out.2) = (h.count, h.sum);
                }
                _ => {}
            }
        }
    }
    out
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| SegmentName::parse(n).is_some())
        .map(|n| dir.join(n))
        .collect()
}

#[test]
fn a_kill_inside_an_observation_loses_nothing_and_counts_nothing_twice() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let acct = top.path().join("account");
    let deadline = Deadline::after(Duration::from_secs(90));
    let (mut kills, mut odd_kills, mut odd_by_method) = (0u64, 0u64, [0u64; 2]);
    let mut total = (0u64, 0u64, 0u64);
    // Until kills inside an update have landed with both methods (or the
    // time is up: a failure, as a kill lands inside an update often).
    while odd_by_method.iter().any(|&n| n < 2) && !deadline.passed() {
        let lock = kills % 2 == 1;
        std::fs::write(&acct, vec![0u8; 4096]).unwrap();
        let (map, _f) = account(&acct);
        let done = words(&map);
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--ignored", "--exact", "observer", "--nocapture", "--quiet"])
            .env(ENV_DIR, &dir)
            .env(ENV_ACCOUNT, &acct)
            .stdout(Stdio::null());
        if lock {
            cmd.env(ENV_LOCK, "1");
        }
        let mut child = cmd.spawn().unwrap();
        // Killed once every thread is well into its loop.
        let started = Deadline::after(Duration::from_secs(30));
        while done.iter().any(|d| d.load(Ordering::Acquire) < 2_000) {
            started.assert(!started.passed(), "the observer's threads started");
            std::thread::sleep(Duration::from_millis(1));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        let completed: Vec<u64> = done.iter().map(|d| d.load(Ordering::Acquire)).collect();
        let files = segments(&dir);
        assert_eq!(files.len(), 1, "{files:?}");
        let odd = odd_blocks(&files[0]);
        if odd > 0 {
            odd_kills += 1;
            odd_by_method[lock as usize] += 1;
        }
        let report = fold::fold(&dir).unwrap();
        assert!(
            report.left.is_empty() && report.folded == 1,
            "the dead writer's file is folded ({odd} blocks odd): {report:?}"
        );
        assert!(segments(&dir).is_empty());
        let now = kept(&dir);
        let (req, obs, sum) = (now.0 - total.0, now.1 - total.1, now.2 - total.2);
        let n: u64 = completed.iter().sum();
        let exact_sum: u64 = completed.iter().map(|&c| sum_of_first(c)).sum();
        let slack = THREADS as u64;
        assert!(
            (n..=n + slack).contains(&req) && (n..=n + slack).contains(&obs),
            "kill {kills} ({odd} blocks odd, lock {lock}): completed {n}, kept {req} requests, \
             {obs} observations"
        );
        assert!(
            (exact_sum..=exact_sum + slack * (SPREAD - 1)).contains(&sum),
            "kill {kills}: sum {sum}, completed updates' sum {exact_sum}"
        );
        total = now;
    }
    deadline.assert(
        odd_by_method.iter().all(|&n| n >= 2),
        format!("kills landed inside an update with both methods: {odd_by_method:?} of {kills}"),
    );
    println!(
        "{kills} workers killed with SIGKILL, {odd_kills} inside an update (rseq or lock: \
         {odd_by_method:?}); every fold kept the completed updates, at most the interrupted one more"
    );
}
