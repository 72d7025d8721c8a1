//! What a reader believes of a writer (spec §10, §11.3): a writer that stops
//! beating is silent, a pid reused by another process is a dead writer, and
//! a handle that names a slot past the table is an error, not a panic.

mod support;

use std::time::Duration;

use perfabi::Semantics;
use perfabi_reader::{Error, Liveness, Options, Segment};
use perfabi_shm::writer::{Config, Writer};
use support::{counters_writer, write_claimed_segment};

#[test]
fn a_live_writer_that_stops_beating_is_silent_until_it_beats_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            max_instances: 4,
            damon_capacity: 0,
            heartbeat_interval: Duration::from_millis(100),
            // The application drives the heartbeat, and here it stops.
            auto_heartbeat: false,
            ..Config::default()
        },
    )
    .unwrap();
    let c = w.add("x", "", Semantics::Counter).unwrap();
    w.adjust(c, 1).unwrap();
    let opts = Options {
        max_silence: Duration::ZERO,
        recheck: Duration::ZERO,
        ..Options::default()
    };
    let mut seg = Segment::open_with(&path, opts).unwrap();
    // Alive if read within 3 intervals of a beat: beat just before, so
    // that a test kept off busy CPUs since the writer's creation does
    // not find it silent already.
    w.heartbeat();
    assert_eq!(seg.info().unwrap().liveness, Liveness::Alive);
    // The process lives; only its heartbeat is late (3 intervals allowed).
    std::thread::sleep(Duration::from_millis(450));
    let l = seg.info().unwrap().liveness;
    assert!(
        matches!(l, Liveness::Silent { silent_for } if silent_for >= Duration::from_millis(300)),
        "{l:?}"
    );
    match seg.snapshot() {
        Err(Error::Stale { dead: false, .. }) => {}
        other => panic!("a silent writer's values were returned: {other:?}"),
    }
    w.heartbeat();
    assert_eq!(seg.info().unwrap().liveness, Liveness::Alive);
    assert!(seg.snapshot().is_ok());
}

/// A segment file of this user whose writer is `pid`, started at `start_ns`.
fn claimed(dir: &std::path::Path, name: &str, pid: u64, start_ns: u64) -> std::path::PathBuf {
    let p = dir.join(name);
    write_claimed_segment(&p, 0, pid, start_ns);
    p
}

#[test]
fn a_pid_reused_by_another_process_is_a_dead_writer() {
    let dir = tempfile::tempdir().unwrap();
    let me = u64::from(std::process::id());
    let started = perfabi_shm::host::process_start_ns(None).unwrap();
    let lenient = Options {
        require_live: false,
        ..Options::default()
    };
    // This process, as it started: alive (the control).
    let p = claimed(dir.path(), "same", me, started);
    let mut seg = Segment::open_with(&p, lenient.clone()).unwrap();
    assert_eq!(seg.info().unwrap().liveness, Liveness::Alive);
    // The same pid, but a writer that started 10 s earlier: another process
    // had the pid, so the writer is gone.
    let p = claimed(
        dir.path(),
        "reused",
        me,
        started.saturating_sub(10_000_000_000),
    );
    let mut seg = Segment::open_with(&p, lenient).unwrap();
    let l = seg.info().unwrap().liveness;
    assert!(matches!(l, Liveness::Dead { .. }), "{l:?}");
    assert!(matches!(
        Segment::open(&p).and_then(|mut s| s.snapshot()),
        Err(Error::Stale { dead: true, .. })
    ));
}

#[test]
fn a_handle_past_the_table_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = counters_writer(&path, 4);
    w.add("x", "", Semantics::Counter).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    let mut out = vec![0u64; seg.nr_cpus()];
    let good = seg.handle("x").unwrap();
    assert!(seg.read(&good, &mut out).is_ok());
    // A handle names only what a lookup found; the core's read of one
    // slot, which takes any, refuses the rest.
    let file = std::fs::File::open(&path).unwrap();
    let md = file.metadata().unwrap();
    let map =
        perfabi_shm::SegmentMap::new(file, &md, perfabi::trust::Origin::File, u64::MAX).unwrap();
    let reg = good.instance().reg_id;
    for slot in [4, 5, u32::MAX] {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            map.values().read_slot_at((slot, reg), None, &mut out, 100)
        }));
        match r {
            Ok(Err(perfabi::Error::OutOfBounds(_))) => {}
            other => panic!("slot {slot} of a 4-entry table: {other:?}"),
        }
    }
    // A buffer of the wrong length is refused too.
    let mut short = vec![0u64; seg.nr_cpus() - 1];
    assert!(seg.read(&good, &mut short).is_err());
}
