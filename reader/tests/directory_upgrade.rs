//! A program upgraded in place (`spec/PERFABI.md` §15.4, §15.5): a new
//! version's writers reword a help or change a family's identity metadata
//! (here a histogram's buckets) while the old version's counts sit in dead
//! files or the kept file. The newest writer's metadata are shown, the
//! kept file never vetoes a family the live writers agree on, and the fold
//! keeps the newest metadata and retires counts no one can add up.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Reading, Unit};
use perfabi_reader::directory::Scrape;
use perfabi_shm::directory::KEPT_NAME;
use perfabi_shm::writer::fold::fold;
use perfabi_shm::writer::Writer;
use perfabi_test_harness::deadline::Deadline;

mod support;
use support::directory::{config, count_requests, create_unfolded, read};

const ENV_DIR: &str = "PERFABI_TEST_UPGRADE_DIR";
const ENV_NAME: &str = "PERFABI_TEST_UPGRADE_NAME";
const ENV_HELP: &str = "PERFABI_TEST_UPGRADE_HELP";
const ENV_FOLD: &str = "PERFABI_TEST_UPGRADE_FOLD";

/// A writer in `dir` whose counter `app.requests` (help `help`) counted
/// `n`; made by [`Writer::create_in`] (which folds) if `folds`, else
/// created under a directory name without folding.
fn counting(dir: &Path, name: &str, help: &str, n: i64, folds: bool) -> Writer {
    let w = if folds {
        Writer::create_in(dir, name, &config(0)).unwrap()
    } else {
        create_unfolded(dir, name, &config(0))
    };
    count_requests(&w, help, n);
    w
}

/// A writer in `dir` whose histogram `app.latency` (log2 buckets from
/// `2^first`) observed `values`; made by [`Writer::create_in`] (which
/// folds).
fn observing(dir: &Path, name: &str, first: u32, values: &[u64]) -> Writer {
    observing_in(
        Writer::create_in(dir, name, &config(0)).unwrap(),
        first,
        values,
    )
}

/// [`observing`] in the writer `w`.
fn observing_in(w: Writer, first: u32, values: &[u64]) -> Writer {
    let f = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Request latency",
            "",
            Unit::NS,
            Buckets::Log2 { first, n: 4 },
        ))
        .unwrap();
    let m = w.add_member(f, "", &[]).unwrap();
    for v in values {
        w.observe(&m, *v).unwrap();
    }
    w
}

fn family<'a>(s: &'a Scrape, name: &str) -> &'a perfabi_reader::directory::MergedFamily {
    s.families
        .iter()
        .find(|f| f.family.name == name)
        .unwrap_or_else(|| panic!("{name} served: {:?}", s.problems))
}

/// A writer process of these tests: `app.requests` with help `HELP` under
/// the name `NAME`, counting 1; folding at its creation only if `FOLD` is
/// set; it closes its segment and exits at once.
#[test]
#[ignore = "a process of the directory_upgrade tests"]
fn writer_process() {
    let dir = PathBuf::from(std::env::var_os(ENV_DIR).expect("run by the upgrade tests only"));
    let name = std::env::var(ENV_NAME).unwrap();
    let help = std::env::var(ENV_HELP).unwrap();
    counting(&dir, &name, &help, 1, std::env::var_os(ENV_FOLD).is_some()).close();
}

/// Runs [`writer_process`], started after every process before it (its
/// `writer_start_ns` is later: the kernel counts start times in clock
/// ticks, so it waits until its start differs from the last one's).
fn run_writer(dir: &Path, name: &str, help: &str, folds: bool) {
    std::thread::sleep(Duration::from_millis(30));
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "writer_process", "--quiet"])
        .env(ENV_DIR, dir)
        .env(ENV_NAME, name)
        .env(ENV_HELP, help)
        .stdout(Stdio::null());
    if folds {
        cmd.env(ENV_FOLD, "1");
    }
    assert!(cmd.status().unwrap().success());
}

#[test]
fn the_newest_live_writers_help_is_shown_and_the_counts_merge() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // This process started before the one it starts below; its file's
    // name sorts first, so the help shown is not the first file's.
    let old = counting(&dir, "a", "Requests", 3, true);
    let until = Deadline::after(Duration::from_secs(30));
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--ignored", "--exact", "live_writer_process", "--quiet"])
        .env(ENV_DIR, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    let mut child = perfabi_test_harness::KillOnDrop(child.spawn().unwrap());
    while !dir.join("ready").exists() {
        assert!(!until.passed(), "the newer writer never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = read(&dir);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let f = family(&s, "app.requests");
    assert_eq!(f.family.help, "Requests served, per route");
    assert_eq!(f.readings, [Reading::Unsigned(3 + 4)]);
    assert_eq!(f.writers, 2);
    drop(child.0.stdin.take());
    assert!(child.0.wait().unwrap().success());
    drop(old);
}

/// The newer live writer of
/// [`the_newest_live_writers_help_is_shown_and_the_counts_merge`]: counts
/// 4 under a reworded help, says `ready`, and lives until its stdin ends.
#[test]
#[ignore = "a process of the directory_upgrade tests"]
fn live_writer_process() {
    let dir = PathBuf::from(std::env::var_os(ENV_DIR).expect("run by the upgrade tests only"));
    std::thread::sleep(Duration::from_millis(30));
    let w = counting(&dir, "z", "Requests served, per route", 4, false);
    std::fs::write(dir.join("ready"), b"").unwrap();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    w.close();
}

#[test]
fn the_kept_file_vetoes_no_family_and_the_fold_retires_its_old_buckets() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // Version 1: buckets from 2^10 ns, three observations, then gone.
    observing(&dir, "app", 10, &[100, 2000, 5000]).close();
    // Version 2 moves the buckets up (another identity, §15.4); its
    // creation folds version 1 into the kept file.
    let v2 = observing(&dir, "app", 12, &[100, 9000]);
    assert!(dir.join(KEPT_NAME).exists(), "version 1 was folded");
    let s = read(&dir);
    let f = family(&s, "app.latency");
    let Reading::Histogram(h) = &f.readings[0] else {
        panic!("{:?}", f.readings)
    };
    assert_eq!(h.count, 2, "version 2's observations alone");
    assert_eq!(f.writers, 1);
    assert_eq!(
        f.family.buckets,
        Some(Buckets::Log2 { first: 12, n: 4 }),
        "version 2's buckets"
    );
    // The kept file's old counts are left out, and said so, naming it.
    let [p] = &s.problems[..] else {
        panic!("one problem: {:?}", s.problems)
    };
    println!("{} {p}", p.code);
    assert_eq!(p.code, "family-conflict");
    assert_eq!(p.family.as_deref(), Some("app.latency"));
    assert_eq!(p.file, dir.join(KEPT_NAME));
    assert!(p.message.contains("buckets"), "{p}");
    // Version 2 gone, the fold folds it and retires version 1's counts.
    v2.close();
    let r = fold(&dir).unwrap();
    assert_eq!(r.folded, 1, "{r:?}");
    assert!(r.left.is_empty(), "{r:?}");
    assert_eq!(r.retired.len(), 1, "{r:?}");
    assert!(r.retired[0].contains("app.latency"), "{r:?}");
    let s = read(&dir);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let f = family(&s, "app.latency");
    assert_eq!(f.family.buckets, Some(Buckets::Log2 { first: 12, n: 4 }));
    let Reading::Histogram(h) = &f.readings[0] else {
        panic!("{:?}", f.readings)
    };
    assert_eq!((h.count, h.sum), (2, 9100), "version 2's counts kept");
}

#[test]
fn the_fold_keeps_the_help_of_the_writer_that_started_last() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // Two dead writers folded in one batch: the newer one's name sorts
    // first, so name order would keep the older help.
    run_writer(&dir, "z", "Requests", false);
    run_writer(&dir, "a", "Requests served", false);
    let s = read(&dir);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(family(&s, "app.requests").family.help, "Requests served");
    let r = fold(&dir).unwrap();
    assert_eq!(
        (r.folded, r.left.len(), r.retired.len()),
        (2, 0, 0),
        "{r:?}"
    );
    let s = read(&dir);
    assert_eq!(s.segments, 0, "both folded");
    let f = family(&s, "app.requests");
    assert_eq!(f.family.help, "Requests served");
    assert_eq!(f.readings, [Reading::Unsigned(2)]);
    // A later writer's help replaces the kept one's when it is folded
    // (here by its own creation's fold: it closes, the next fold takes it).
    run_writer(&dir, "m", "Requests, all routes", true);
    fold(&dir).unwrap();
    let s = read(&dir);
    assert_eq!(s.segments, 0);
    let f = family(&s, "app.requests");
    assert_eq!(f.family.help, "Requests, all routes");
    assert_eq!(f.readings, [Reading::Unsigned(3)]);
}

#[test]
fn a_dead_writers_file_of_old_buckets_is_left_out_and_live_writers_that_disagree_refuse() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let unfolded = |name: &str, first: u32, values: &[u64]| {
        observing_in(create_unfolded(&dir, name, &config(0)), first, values)
    };
    // Version 1 gone, its file not folded yet; version 2 live.
    let v1 = unfolded("old", 10, &[100, 2000, 5000]);
    let v1_file = v1.path().unwrap().to_path_buf();
    v1.close();
    let v2 = unfolded("new", 12, &[100, 9000]);
    let s = read(&dir);
    let f = family(&s, "app.latency");
    let Reading::Histogram(h) = &f.readings[0] else {
        panic!("{:?}", f.readings)
    };
    assert_eq!(h.count, 2, "version 2's alone");
    let [p] = &s.problems[..] else {
        panic!("one problem: {:?}", s.problems)
    };
    println!("{} {p}", p.code);
    assert_eq!(
        (p.code, p.file.as_path()),
        ("family-conflict", v1_file.as_path())
    );
    // A second live writer of yet other buckets: two live writers
    // disagree, so the family is refused whole, said once (not also the
    // dead file left out of it).
    let v3 = unfolded("other", 14, &[1]);
    let s = read(&dir);
    assert!(s.families.iter().all(|f| f.family.name != "app.latency"));
    let [p] = &s.problems[..] else {
        panic!("one problem: {:?}", s.problems)
    };
    println!("{} {p}", p.code);
    assert_eq!(p.code, "family-conflict");
    assert!(p.message.contains("refused"), "{p}");
    for w in [&v2, &v3] {
        let name = w.path().unwrap().file_name().unwrap().to_str().unwrap();
        assert!(p.message.contains(name), "{p} names {name}");
    }
    drop((v2, v3));
}
