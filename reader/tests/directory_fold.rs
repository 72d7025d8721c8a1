//! Folding dead writers' counts into the kept file (`spec/PERFABI.md`
//! §15.5): exact totals after a fold, after folds stopped dead (SIGKILL)
//! at every step, and across folds that add to an older kept file.

use std::path::Path;

use perfabi::{Buckets, FamilySpec, Kind, Reading, Semantics, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::writer::fold::{fold, CRASH_ENV};

use perfabi_shm::writer::Writer;

mod support;
use support::directory::config;

/// A writer in `dir` that counted `n` requests (a family and a 1.0
/// counter), observed `n` latencies and peaked at `n`.
fn writer(dir: &Path, n: u64) -> Writer {
    let w = Writer::create_in(dir, "w", &config(64)).unwrap();
    let f = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests",
            "route",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let m = w.add_member(f, "home", &[("method", "GET")]).unwrap();
    w.member_add(&m, n as i64).unwrap();
    let h = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Latency",
            "",
            Unit::NS,
            Buckets::Log2 { first: 2, n: 6 },
        ))
        .unwrap();
    let hm = w.add_member(h, "", &[]).unwrap();
    for v in 0..n {
        w.observe(&hm, v).unwrap();
    }
    let p = w
        .add_family(&FamilySpec::new(
            "app.peak",
            "Peak",
            "",
            Kind::Peak,
            Unit::COUNT,
        ))
        .unwrap();
    w.peak(&w.add_member(p, "", &[]).unwrap(), n).unwrap();
    let old = w.add("old.bytes", "bytes", Semantics::Counter).unwrap();
    w.adjust(old, 2 * n as i64).unwrap();
    w
}

/// (requests, observations, sum of observations, peak, old.bytes, segment files read)
fn totals(dir: &Path) -> (u64, u64, u64, u64, u64, usize) {
    let s = Directory::open(dir, DirectoryOptions::default())
        .unwrap()
        .read()
        .unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let mut t = (0, 0, 0, 0, 0, s.segments);
    for f in &s.families {
        assert!(f.family.name != "perfabi.folded");
        for r in &f.readings {
            match (f.family.name.as_str(), r) {
                ("app.requests", Reading::Unsigned(n)) => t.0 += n,
                ("app.latency", Reading::Histogram(h)) => {
                    t.1 += h.count;
                    t.2 += h.sum;
                }
                ("app.peak", Reading::Unsigned(n)) => t.3 = t.3.max(*n),
                ("old.bytes", Reading::Unsigned(n)) => t.4 += n,
                (name, r) => panic!("{name}: {r:?}"),
            }
        }
    }
    t
}

fn expected(ns: &[u64]) -> (u64, u64, u64, u64, u64) {
    let s: u64 = ns.iter().sum();
    let sums: u64 = ns.iter().map(|n| n * n.saturating_sub(1) / 2).sum();
    (s, s, sums, ns.iter().copied().max().unwrap_or(0), 2 * s)
}

fn check(dir: &Path, ns: &[u64]) -> usize {
    let t = totals(dir);
    assert_eq!((t.0, t.1, t.2, t.3, t.4), expected(ns), "{t:?}");
    t.5
}

#[test]
fn a_fold_keeps_closed_writers_counts_and_removes_their_files() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let live = writer(&dir, 5);
    writer(&dir, 7).close();
    assert_eq!(check(&dir, &[5, 7]), 2);
    // Creating a writer in the directory folds the closed one.
    let w11 = writer(&dir, 11);
    assert_eq!(
        check(&dir, &[5, 7, 11]),
        2,
        "7's file folded into the kept file"
    );
    w11.close();
    let r = fold(&dir).unwrap();
    println!("{r:?}");
    assert_eq!((r.folded, r.left.len(), r.busy), (1, 0, false));
    assert_eq!(
        check(&dir, &[5, 7, 11]),
        1,
        "the live writer's file alone is left"
    );
    // Another round adds to the kept file.
    writer(&dir, 13).close();
    let r = fold(&dir).unwrap();
    assert_eq!(r.folded, 1, "{r:?}");
    assert_eq!(check(&dir, &[5, 7, 11, 13]), 1);
    // The next fold drops the identity of 13's file, gone now; then there
    // is nothing to do, and the kept file is left as it is.
    assert_eq!(fold(&dir).unwrap().folded, 0);
    assert_eq!(check(&dir, &[5, 7, 11, 13]), 1);
    let kept = dir.join(perfabi_shm::directory::KEPT_NAME);
    let before = std::fs::metadata(&kept).unwrap();
    assert_eq!(fold(&dir).unwrap().folded, 0);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&kept).unwrap().ino(), before.ino());
    drop(live);
}

const ENV_DIR: &str = "PERFABI_TEST_FOLD_DIR";

/// A folding process for `a_fold_stopped_dead_at_any_step_loses_and_doubles_nothing`.
#[test]
#[ignore = "a process of a_fold_stopped_dead_at_any_step_loses_and_doubles_nothing"]
fn folder() {
    let dir = std::env::var_os(ENV_DIR).expect("run by the crash test only");
    fold(Path::new(&dir)).unwrap();
}

#[test]
fn a_fold_stopped_dead_at_any_step_loses_and_doubles_nothing() {
    use std::os::unix::process::ExitStatusExt;
    for step in ["written", "renamed", "unlinked"] {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("segs");
        let live = writer(&dir, 5);
        // An older kept file, so that a fold adds to one.
        writer(&dir, 3).close();
        fold(&dir).unwrap();
        let (a, b) = (writer(&dir, 7), writer(&dir, 11));
        a.close();
        b.close();
        let ns = [5, 3, 7, 11];
        check(&dir, &ns);
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "folder", "--quiet"])
            .env(ENV_DIR, &dir)
            .env(CRASH_ENV, step)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "{step}: the fold stopped dead ({status})"
        );
        let files = check(&dir, &ns);
        println!("killed after '{step}': totals exact, {files} segment files read");
        // The next fold finishes the work: totals still exact, dead files
        // and the crashed fold's temporary file gone.
        let r = fold(&dir).unwrap();
        assert!(r.left.is_empty(), "{r:?}");
        assert_eq!(check(&dir, &ns), 1, "{step}");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".perfabi"))
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["fold.lock", "fold.owner.lock", "kept.perfabi-kept"],
            "{step}"
        );
        drop(live);
    }
}
