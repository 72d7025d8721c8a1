//! Segment directories, the writers' side (`spec/PERFABI.md` §15):
//! `Writer::create_in` names its file so that no two creations share one,
//! creates the directory if absent, and refuses a directory others could
//! replace files in.
#![cfg(not(loom))]

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use perfabi_shm::directory::{self, SegmentName};
use perfabi_shm::writer::{Config, Writer};

fn small() -> Config {
    Config {
        nr_cpus: Some(2),
        max_instances: 16,
        damon_capacity: 64,
        ..Config::default()
    }
}

#[test]
fn create_in_makes_the_directory_and_a_fresh_name_per_creation() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let a = Writer::create_in(&dir, "worker", &small()).unwrap();
    let b = Writer::create_in(&dir, "worker", &small()).unwrap();
    let md = std::fs::symlink_metadata(&dir).unwrap();
    assert!(md.is_dir());
    assert_eq!(md.mode() & 0o022, 0, "created without group/other write");
    let names: Vec<SegmentName> = [&a, &b]
        .iter()
        .map(|w| {
            let p = w.path().unwrap();
            assert_eq!(p.parent().unwrap(), dir);
            SegmentName::parse(p.file_name().unwrap()).expect("a segment name")
        })
        .collect();
    assert_ne!(names[0], names[1]);
    for n in &names {
        assert_eq!(n.name, "worker");
        assert_eq!(n.pid, std::process::id());
    }
    // Only the two segments are listed: no temporary file is left behind.
    let listed: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| SegmentName::parse(&e.unwrap().file_name()))
        .collect();
    assert_eq!(listed.len(), 2);
    // Besides them, the locks of the folds each creation runs (§15.5).
    let mut others: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| SegmentName::parse(std::ffi::OsStr::new(n)).is_none())
        .collect();
    others.sort();
    assert_eq!(others, [directory::LOCK_NAME, directory::OWNER_LOCK_NAME]);
    let md = std::fs::symlink_metadata(dir.join(directory::LOCK_NAME)).unwrap();
    assert_eq!(
        md.mode() & 0o777,
        0o644,
        "readers of any user take the lock"
    );
    let md = std::fs::symlink_metadata(dir.join(directory::OWNER_LOCK_NAME)).unwrap();
    assert_eq!(md.mode() & 0o777, 0o600, "only the writers' user folds");
}

#[test]
fn create_in_refuses_bad_names_and_open_directories() {
    let top = tempfile::tempdir().unwrap();
    let err = Writer::create_in(top.path(), "a/b", &small())
        .err()
        .expect("a name with '/' is refused");
    assert!(err.to_string().contains("invalid writer name"), "{err}");
    // A directory anyone may replace files in (0777, not sticky) is refused.
    let open = top.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Writer::create_in(&open, "w", &small())
        .err()
        .expect("an open directory is refused");
    println!("refused as: {err}");
    assert_eq!(
        std::fs::read_dir(&open).unwrap().count(),
        0,
        "nothing created"
    );
    // Sticky, it is accepted (as /dev/shm is).
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    Writer::create_in(&open, "w", &small()).unwrap();
}

#[test]
fn a_directory_squatted_by_another_user_is_refused() {
    if !perfabi_test_harness::need_root("a_directory_squatted_by_another_user_is_refused") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("perfabi-squatted");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(4242), Some(4242)).unwrap();
    let err = Writer::create_in(&dir, "w", &small())
        .err()
        .expect("another user's directory is refused");
    assert!(err.to_string().contains("refusing"), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn the_default_directory_follows_perfabi_dir() {
    // The only test here that touches the environment.
    std::env::set_var(directory::ENV_DIR, "/tmp/somewhere");
    assert_eq!(
        directory::default_dir(),
        std::path::Path::new("/tmp/somewhere")
    );
    std::env::set_var(directory::ENV_DIR, "");
    let uid = rustix::process::geteuid().as_raw();
    assert_eq!(
        directory::default_dir(),
        std::path::PathBuf::from(format!("/dev/shm/perfabi-{uid}"))
    );
    std::env::remove_var(directory::ENV_DIR);
    assert!(directory::valid_name(&directory::program_name()));
}

/// What a listing costs (spec §15.2): 100,000 entries that are not segment
/// names, and 100,000 segment names of an owner not accepted (one
/// `fstatat` each), beside a directory of one segment name: the one
/// segment name is kept among the others, and none of an owner not
/// accepted is. Prints the three costs (best of 3) and their ratios.
#[test]
fn a_listings_cost_follows_its_entries_and_only_accepted_segments_are_kept() {
    use std::time::{Duration, Instant};
    let top = tempfile::Builder::new()
        .prefix("perfabi-listing.")
        .tempdir_in("/dev/shm")
        .unwrap();
    let fill = |name: &str, entry: &dyn Fn(u32) -> String| {
        let dir = top.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        for k in 1..=100_000 {
            std::fs::File::create(dir.join(entry(k))).unwrap();
        }
        std::fs::File::create(dir.join("w.1.00000000000000ff.perfabi")).unwrap();
        perfabi_shm::safe_open::Folder::open(&dir).unwrap()
    };
    let others = fill("others", &|k| format!("junk{k}"));
    let named = fill("named", &|k| format!("x.{k}.00000000000000ff.perfabi"));
    let alone = top.path().join("alone");
    std::fs::create_dir(&alone).unwrap();
    std::fs::File::create(alone.join("w.1.00000000000000ff.perfabi")).unwrap();
    let alone = perfabi_shm::safe_open::Folder::open(&alone).unwrap();
    let best = |folder: &perfabi_shm::safe_open::Folder, accept: bool| {
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            let l = directory::list(folder, |_| false, |_| accept).unwrap();
            best = best.min(t.elapsed());
            assert!(!l.truncated && !l.full);
        }
        best
    };
    let kept = directory::list(&others, |_| false, |_| true).unwrap();
    assert_eq!(
        kept.names.len(),
        1,
        "the one segment name among 100,000 others"
    );
    let refused = directory::list(&named, |_| false, |_| false).unwrap();
    assert_eq!(refused.refused_count, 100_001);
    assert!(refused.names.is_empty());
    let (t_alone, t_others, t_named) =
        (best(&alone, true), best(&others, true), best(&named, false));
    println!(
        "listing: 1 entry {t_alone:?}; 100,000 other names {t_others:?} ({:.0} ns an entry); \
         100,000 segment names refused by owner {t_named:?} ({:.0} ns an entry, {:.1}x the other names)",
        t_others.as_nanos() as f64 / 1e5,
        t_named.as_nanos() as f64 / 1e5,
        t_named.as_secs_f64() / t_others.as_secs_f64()
    );
}
