//! Readers and the fold choose a family's reference file by one rule
//! (`spec/PERFABI.md` §15.4, §15.5): a live writer's metadata above every
//! dead file's, then the writer that started last, the kept file's family
//! ranked by the start of the writer whose metadata it keeps. So a fold
//! retires only counts readers leave out already, and a partial fold never
//! flips the metadata readers show: no total readers show drops.
//!
//! Each writer runs in its own process ([`histogram_process`]), started
//! after the one before it, so that their `writer_start_ns` differ.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Kind, Reading, Unit};
use perfabi_reader::directory::Scrape;
use perfabi_reader::{Options, Segment};
use perfabi_shm::directory::reference::KeptIndex;
use perfabi_shm::directory::KEPT_NAME;
use perfabi_shm::writer::fold::{fold, MAX_BATCH};
use perfabi_shm::writer::Writer;
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::KillOnDrop;

mod support;
use support::directory::{config, create_unfolded, read};

const ENV_DIR: &str = "PERFABI_TEST_REFERENCE_DIR";
const ENV_NAME: &str = "PERFABI_TEST_REFERENCE_NAME";
const ENV_FIRST: &str = "PERFABI_TEST_REFERENCE_FIRST";
const ENV_COUNT: &str = "PERFABI_TEST_REFERENCE_COUNT";
const ENV_LIVE: &str = "PERFABI_TEST_REFERENCE_LIVE";

/// A writer in `dir` (created without folding) named `name`.
fn create(dir: &Path, name: &str) -> Writer {
    create_unfolded(dir, name, &config(0))
}

/// A writer process of these tests: histogram `app.latency` of log2
/// buckets from `2^FIRST` ns, `COUNT` observations of 100 ns, under the
/// name `NAME`, never folding; with `LIVE` set it says `ready-NAME` and
/// lives until its stdin ends, else it closes its segment and exits.
#[test]
#[ignore = "a process of the directory_reference tests"]
fn histogram_process() {
    let var = |k| std::env::var(k).expect("run by the reference tests only");
    let dir = PathBuf::from(var(ENV_DIR));
    let name = var(ENV_NAME);
    let first: u32 = var(ENV_FIRST).parse().unwrap();
    let count: u64 = var(ENV_COUNT).parse().unwrap();
    let w = create(&dir, &name);
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
    for _ in 0..count {
        w.observe(&m, 100).unwrap();
    }
    if std::env::var_os(ENV_LIVE).is_some() {
        std::fs::write(dir.join(format!("ready-{name}")), b"").unwrap();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    }
    w.close();
}

fn command(dir: &Path, name: &str, first: u32, count: u64) -> Command {
    // Started after every process before it: the kernel counts start
    // times in clock ticks (10 ms here).
    std::thread::sleep(Duration::from_millis(30));
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "histogram_process", "--quiet"])
        .env(ENV_DIR, dir)
        .env(ENV_NAME, name)
        .env(ENV_FIRST, first.to_string())
        .env(ENV_COUNT, count.to_string())
        .stdout(Stdio::null());
    cmd
}

/// Runs a writer process that observes `count` times into buckets from
/// `2^first` and exits (a dead writer's file, not folded); returns its
/// file.
fn dead(dir: &Path, name: &str, first: u32, count: u64) -> PathBuf {
    let before = files(dir);
    assert!(command(dir, name, first, count).status().unwrap().success());
    let mut new: Vec<PathBuf> = files(dir).difference(&before).cloned().collect();
    assert_eq!(new.len(), 1, "{new:?}");
    new.pop().unwrap()
}

/// A writer process as [`dead`]'s that stays live until dropped.
fn live(dir: &Path, name: &str, first: u32, count: u64) -> KillOnDrop {
    let mut cmd = command(dir, name, first, count);
    cmd.env(ENV_LIVE, "1").stdin(Stdio::piped());
    let child = KillOnDrop(cmd.spawn().unwrap());
    let until = Deadline::after(Duration::from_secs(30));
    while !dir.join(format!("ready-{name}")).exists() {
        assert!(!until.passed(), "the live writer never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn files(dir: &Path) -> std::collections::BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "perfabi"))
                .collect()
        })
        .unwrap_or_default()
}

/// `MAX_BATCH - 1` dead writers' files of another family, named to sort
/// between `a` and `z`: with a file named `a…`, they fill a fold's batch,
/// and a file named `z…` waits for the next fold.
fn fillers(dir: &Path) {
    for _ in 0..MAX_BATCH - 1 {
        let w = create(dir, "m");
        let f = w
            .add_family(&FamilySpec::new(
                "filler.count",
                "Filler",
                "",
                Kind::Counter,
                Unit::COUNT,
            ))
            .unwrap();
        w.member_add(&w.add_member(f, "", &[]).unwrap(), 1).unwrap();
        w.close();
    }
}

/// `app.latency`'s merged observation count and first bucket, and the
/// files left out of it.
fn latency(s: &Scrape) -> (u64, u32, Vec<PathBuf>) {
    let f = s
        .families
        .iter()
        .find(|f| f.family.name == "app.latency")
        .unwrap_or_else(|| panic!("app.latency served: {:?}", s.problems));
    let Reading::Histogram(h) = &f.readings[0] else {
        panic!("{:?}", f.readings)
    };
    let Some(Buckets::Log2 { first, .. }) = f.family.buckets else {
        panic!("{:?}", f.family.buckets)
    };
    let left = s
        .problems
        .iter()
        .filter(|p| p.family.as_deref() == Some("app.latency"))
        .inspect(|p| assert_eq!(p.code, "family-conflict", "{p}"))
        .map(|p| p.file.clone())
        .collect();
    (h.count, first, left)
}

fn started(file: &Path) -> u64 {
    let mut seg = Segment::open(file).unwrap();
    seg.info().unwrap().header.writer_start_ns
}

/// The start the kept file records for `family`.
fn kept_started(dir: &Path, family: &str) -> Option<u64> {
    let opts = Options {
        require_live: false,
        ..Options::default()
    };
    let snap = Segment::open_with(dir.join(KEPT_NAME), opts)
        .unwrap()
        .snapshot()
        .unwrap();
    KeptIndex::of(&snap).started.get(family).copied()
}

#[test]
fn finding_1_a_live_writers_metadata_keep_the_kept_counts_readers_show() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // Version 1 (buckets from 2^10): 3 observations, folded.
    dead(&dir, "app", 10, 3);
    assert_eq!(fold(&dir).unwrap().folded, 1);
    // Version 1 still runs (2 observations); version 2 (buckets from
    // 2^12), started later, crashed after 5.
    let _old = live(&dir, "old", 10, 2);
    let new = dead(&dir, "new", 12, 5);
    let s = read(&dir);
    assert_eq!(
        latency(&s),
        (3 + 2, 10, vec![new.clone()]),
        "the live writer is the reference: the kept counts and its own"
    );
    // The fold chooses as readers do: it retires version 2's counts,
    // never the kept ones readers show.
    let r = fold(&dir).unwrap();
    println!("{r:?}");
    assert_eq!(r.folded, 1, "{r:?}");
    let [retired] = &r.retired[..] else {
        panic!("{r:?}")
    };
    assert!(
        retired.starts_with(new.file_name().unwrap().to_str().unwrap()),
        "{retired}"
    );
    assert!(!new.exists());
    let s = read(&dir);
    assert_eq!(latency(&s), (3 + 2, 10, vec![]), "no count lost");
}

/// Folds `dir` until `file` is gone (a fold reads for a bounded time, so
/// a busy machine may take more than one), checking after every fold that
/// readers see `app.latency` as `shown`, with `file` left out while it is
/// there if `left_out`; returns every fold's retired families.
fn fold_until_gone(dir: &Path, file: &Path, shown: (u64, u32), left_out: bool) -> Vec<String> {
    let until = Deadline::after(Duration::from_secs(60));
    let mut retired = Vec::new();
    while file.exists() {
        assert!(!until.passed(), "{} never folded", file.display());
        retired.extend(fold(dir).unwrap().retired);
        let (count, first, left) = latency(&read(dir));
        let still: Vec<PathBuf> = [file.to_path_buf()]
            .into_iter()
            .filter(|f| left_out && f.exists())
            .collect();
        assert_eq!(
            (count, first, left),
            (shown.0, shown.1, still),
            "{retired:?}"
        );
    }
    retired
}

#[test]
fn finding_1_a_batch_cut_short_retires_no_count_readers_show() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // Version 1 (buckets from 2^10): 3 observations, folded.
    dead(&dir, "app", 10, 3);
    assert_eq!(fold(&dir).unwrap().folded, 1);
    // A version 2 writer (buckets from 2^12) died; then version 1 came
    // back and died too, its file last in name order.
    let v2 = dead(&dir, "a", 12, 2);
    let v1 = dead(&dir, "z", 10, 4);
    fillers(&dir);
    let s = read(&dir);
    assert_eq!(latency(&s), (3 + 4, 10, vec![v2.clone()]));
    // The batch is full before the newest writer's file: it is still the
    // reference, so version 2's counts are retired, not the kept ones.
    let r = fold(&dir).unwrap();
    assert!(r.more && v1.exists(), "{r:?}");
    let mut retired = r.retired;
    let left: Vec<PathBuf> = [v2.clone()].into_iter().filter(|f| f.exists()).collect();
    assert_eq!(latency(&read(&dir)), (3 + 4, 10, left), "no count lost");
    retired.extend(fold_until_gone(&dir, &v2, (3 + 4, 10), true));
    retired.extend(fold_until_gone(&dir, &v1, (3 + 4, 10), false));
    let [retired] = &retired[..] else {
        panic!("{retired:?}")
    };
    assert!(
        retired.starts_with(v2.file_name().unwrap().to_str().unwrap()),
        "{retired}"
    );
}

#[test]
fn finding_2_a_partial_fold_never_flips_the_metadata_readers_show() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // Version 1 (buckets from 2^10) died after 3 observations; version 2
    // (from 2^12), started later, died after 2. Version 1's file sorts
    // last, past a full batch.
    let v1 = dead(&dir, "z", 10, 3);
    let v2 = dead(&dir, "a", 12, 2);
    let v2_started = started(&v2);
    fillers(&dir);
    let s = read(&dir);
    assert_eq!(latency(&s), (2, 12, vec![v1.clone()]), "version 2 shown");
    // The fold folds version 2 and leaves version 1 for the next batch.
    let r = fold(&dir).unwrap();
    assert!(r.more && r.retired.is_empty(), "{r:?}");
    assert!(v1.exists() && !v2.exists());
    // The kept family ranks by its reference's start, which the kept
    // file records, above version 1's file.
    let s = read(&dir);
    assert_eq!(latency(&s), (2, 12, vec![v1.clone()]), "still version 2");
    assert_eq!(kept_started(&dir, "app.latency"), Some(v2_started));
    // The next folds retire version 1's counts, as readers left them out.
    let retired = fold_until_gone(&dir, &v1, (2, 12), true);
    let [retired] = &retired[..] else {
        panic!("{retired:?}")
    };
    assert!(
        retired.starts_with(v1.file_name().unwrap().to_str().unwrap()),
        "{retired}"
    );
    assert_eq!(kept_started(&dir, "app.latency"), Some(v2_started));
}
