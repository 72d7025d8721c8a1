//! What a fold costs and when it runs (`spec/PERFABI.md` §15.5): a fold
//! folds at most a batch of dead writers' files (so it holds the lock for
//! a bounded time), readers reading all the while still get every read
//! right; a live writer's file costs a fold one header read (nothing is
//! mapped); and a writer's heartbeat thread folds its directory without
//! any new writer starting.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use perfabi::Reading;
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::directory::SegmentName;
use perfabi_shm::writer::fold::{fold, MAX_BATCH};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;

mod support;
use support::directory::count_requests;

fn config() -> Config {
    Config {
        nr_cpus: Some(2),
        max_instances: 16,
        damon_capacity: 0,
        ..Config::default()
    }
}

fn count(w: &Writer, n: i64) {
    count_requests(w, "Requests", n);
}

/// A closed writer's file in `dir`, made without `create_in` (which would
/// fold the ones before it), that counted `n`.
fn dead_file(dir: &Path, n: i64) {
    let name = SegmentName::new("w").unwrap().to_string();
    let w = Writer::create(dir.join(name), &config()).unwrap();
    count(&w, n);
    w.close();
}

fn requests(d: &mut Directory) -> (u64, usize) {
    let s = d.read().unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let n = s
        .families
        .iter()
        .filter(|f| f.family.name == "app.requests")
        .flat_map(|f| f.readings.iter())
        .map(|r| match r {
            Reading::Unsigned(n) => *n,
            _ => 0,
        })
        .sum();
    (n, s.segments)
}

#[test]
fn a_fold_takes_a_batch_and_readers_meanwhile_read_every_count_once() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let files = 3 * MAX_BATCH + 5;
    for _ in 0..files {
        dead_file(&dir, 3);
    }
    let total = 3 * files as u64;
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (dir, stop, reads) = (dir.clone(), stop.clone(), reads.clone());
        std::thread::spawn(move || {
            let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                // Every read, whatever fold runs, has every count once.
                let n = reads.load(Ordering::Relaxed);
                assert_eq!(requests(&mut d).0, total, "read {n}");
                reads.store(n + 1, Ordering::Relaxed);
            }
        })
    };
    let deadline = Deadline::witness();
    let mut folds = Vec::new();
    let (mut longest, mut held) = (Duration::ZERO, Duration::ZERO);
    loop {
        // A read between every two folds (and during them, by chance).
        let before = reads.load(Ordering::Relaxed);
        while reads.load(Ordering::Relaxed) < before + 2 {
            deadline.assert(!reader.is_finished(), "the reader reads");
            std::thread::sleep(Duration::from_micros(200));
        }
        let t = std::time::Instant::now();
        let r = fold(&dir).unwrap();
        longest = longest.max(t.elapsed());
        held = held.max(r.held);
        assert!(r.left.is_empty(), "{r:?}");
        assert!(r.folded <= MAX_BATCH, "{r:?}");
        if !r.busy {
            folds.push(r.folded);
            if !r.more {
                break;
            }
        }
        deadline.assert(!deadline.passed(), "the folds drained the directory");
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let reads = reads.load(Ordering::Relaxed);
    assert!(folds.len() >= 4, "{files} files need 4 batches: {folds:?}");
    assert_eq!(folds.iter().sum::<usize>(), files);
    let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
    assert_eq!(requests(&mut d), (total, 0));
    println!(
        "{files} dead files folded in batches {folds:?} (the longest fold {longest:?}, \
         waiting for readers included; the longest lock hold {held:?}); {reads} reads \
         meanwhile, all exact"
    );
}

#[test]
fn a_live_writers_file_is_judged_on_its_header_and_never_mapped() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let live = Writer::create_in(&dir, "live", &config()).unwrap();
    count(&live, 1);
    // A copy of the live writer's first page under another segment name:
    // a live writer's header in a file far shorter than the segment it
    // claims. Mapping it would fail (and report it); judged on its header
    // (and on its liveness lock, held here as a writer holds its own,
    // spec §10), it is a live writer's, and left alone without a look
    // further.
    let page = std::fs::read(live.path().unwrap()).unwrap()[..4096].to_vec();
    let name = dir.join(SegmentName::new("copy").unwrap().to_string());
    std::fs::write(&name, page).unwrap();
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&name)
        .unwrap();
    use perfabi_shm::writer::live_lock::{LOCK_LEN, LOCK_START};
    assert!(perfabi_shm::directory::lock::try_lock_range(
        &held,
        perfabi_shm::directory::lock::Want::Write,
        LOCK_START,
        LOCK_LEN
    )
    .unwrap());
    let r = fold(&dir).unwrap();
    assert_eq!((r.folded, r.left.len(), r.busy), (0, 0, false), "{r:?}");
    assert!(name.exists());
}

#[test]
fn the_heartbeat_thread_folds_its_directory() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // A live writer beating every 10 ms folds every 20 beats or so.
    let live = Writer::create_in(
        &dir,
        "live",
        &Config {
            heartbeat_interval: Duration::from_millis(20),
            ..config()
        },
    )
    .unwrap();
    count(&live, 1);
    // Dead files appear after its creation; no writer starts after them.
    for _ in 0..5 {
        dead_file(&dir, 2);
    }
    let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
    assert_eq!(requests(&mut d), (11, 6));
    let deadline = Deadline::witness();
    loop {
        let (n, segments) = requests(&mut d);
        assert_eq!(n, 11);
        if segments == 1 {
            break;
        }
        deadline.assert(!deadline.passed(), "the heartbeat thread folded");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(dir.join(perfabi_shm::directory::KEPT_NAME).exists());
    drop(live);
}
