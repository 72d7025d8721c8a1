//! The recorder in-process (`metrics::with_local_recorder`): threads
//! updating one gauge, and each kind of refusal, read back with the
//! reader library.

mod support;

use std::path::{Path, PathBuf};

use metrics::{counter, describe_histogram, gauge, histogram, with_local_recorder, Unit};
use perfabi_metrics::{BuildError, PerfabiBuilder, PerfabiRecorder};
use perfabi_reader::{Histogram, Reading};
use perfabi_shm::writer::Config;
use support::*;

fn recorder(dir: &Path, b: PerfabiBuilder) -> (PerfabiRecorder, PathBuf) {
    let path = dir.join("m.perfabi");
    let r = b.path(&path).build().expect("the recorder builds");
    (r, path)
}

#[test]
fn gauge_updates_from_threads_end_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (r, path) = recorder(dir.path(), PerfabiBuilder::new());
    with_local_recorder(&r, || {
        let g = gauge!("pool.busy");
        std::thread::scope(|s| {
            for t in 0..4 {
                let g = g.clone();
                s.spawn(move || {
                    for _ in 0..5_000 {
                        // Halves: each rounds away, the total does not.
                        if t % 2 == 0 {
                            g.increment(0.5);
                        } else {
                            g.increment(1.5);
                            g.decrement(1.0);
                        }
                    }
                });
            }
        });
        assert_eq!(total(&path, "pool.busy", ""), Reading::Signed(10_000));
        g.set(-0.5);
        assert_eq!(total(&path, "pool.busy", ""), Reading::Signed(-1));
        g.set(f64::NAN);
        assert_eq!(total(&path, "pool.busy", ""), Reading::Signed(-1), "kept");
        assert_eq!(dropped(&path, "value"), 1);
    });
}

#[test]
fn full_tables_refuse_new_series_and_count_their_updates() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        max_instances: 64,
        max_families: 3, // the recorder's own, and two
        max_members: 16,
        damon_capacity: 0,
        ..Config::default()
    };
    let (r, path) = recorder(dir.path(), PerfabiBuilder::new().config(config));
    with_local_recorder(&r, || {
        counter!("a").increment(1);
        counter!("b").increment(2);
        let c = counter!("c");
        c.increment(5);
        c.increment(5);
        histogram!("h").record_many(1.0, 3);
        assert_eq!(total(&path, "a", ""), Reading::Unsigned(1));
        assert_eq!(total(&path, "b", ""), Reading::Unsigned(2));
        assert_eq!(dropped(&path, "capacity"), 5);
        // A series of "a" with other label keys than its first.
        counter!("a", "k" => "v").increment(1);
        assert_eq!(
            dropped(&path, "kind"),
            1,
            "other label keys than its first series"
        );
        // Ever new series on a full segment: each counted, the map bounded
        // (4,096 kept and said; the rest counted only).
        for i in 0..5000 {
            counter!(format!("n{i}")).increment(1);
        }
        assert_eq!(dropped(&path, "capacity"), 5 + 5000);
    });
}

#[test]
fn names_labels_and_buckets_perfabi_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let b = PerfabiBuilder::new()
        .buckets_for_metric("tiny", &[0.1, 0.2])
        .unwrap();
    let (r, path) = recorder(dir.path(), b);
    with_local_recorder(&r, || {
        counter!("x").increment(1);
        counter!("x_total").increment(1); // the same clash key (§5)
        counter!("bad name").increment(1);
        counter!("q", "queue" => "has space").increment(1); // an instance has none
        counter!("m", "series" => "a", "z" => "b").increment(1); // a label key = the dimension
        counter!("p", "cpu" => "0", "z" => "b").increment(1); // a key readers add
        histogram!("tiny").record(0.1); // 0.1 and 0.2 both round to 0
        describe_histogram!("late", Unit::Seconds, "x");
        histogram!("late").record(1.0);
        // The same description again is no change; another is refused.
        describe_histogram!("late", Unit::Seconds, "x");
        assert_eq!(dropped(&path, "description"), 0);
        describe_histogram!("late", Unit::Milliseconds, "x");
        assert_eq!(dropped(&path, "description"), 1);
        assert_eq!(dropped(&path, "name"), 2);
        assert_eq!(dropped(&path, "labels"), 3);
        assert_eq!(dropped(&path, "buckets"), 1);
        assert_eq!(total(&path, "x", ""), Reading::Unsigned(1));
        let mut buckets = vec![0; 32];
        buckets[20] = 1; // 1e9 ns <= 2^30
        assert_eq!(
            total(&path, "late", ""),
            Reading::Histogram(Histogram {
                count: 1,
                sum: 1_000_000_000,
                buckets
            })
        );
    });
}

#[test]
fn builder_refuses_with_clear_errors() {
    for bad in [&[][..], &[1.0, 1.0], &[-1.0], &[f64::NAN]] {
        let e = PerfabiBuilder::new()
            .buckets_for_metric("h", bad)
            .unwrap_err();
        assert!(matches!(e, BuildError::Buckets(_)), "{bad:?}: {e}");
    }
    let too_many: Vec<f64> = (0..32).map(f64::from).collect();
    assert!(PerfabiBuilder::new()
        .buckets_for_metric("h", &too_many)
        .is_err());

    let dir = tempfile::tempdir().unwrap();
    let no_families = Config {
        max_families: 0,
        max_members: 0,
        damon_capacity: 0,
        ..Config::default()
    };
    let e = PerfabiBuilder::new()
        .config(no_families)
        .path(dir.path().join("m.perfabi"))
        .build()
        .expect_err("a segment without family tables is refused");
    assert!(e.to_string().contains("Config::max_families"), "{e}");
    let e = PerfabiBuilder::new()
        .path(dir.path().join("no/such/dir/m.perfabi"))
        .build()
        .expect_err("a missing folder is refused");
    assert!(matches!(e, BuildError::Create(_)), "{e}");
}

#[test]
fn installs_once_per_process() {
    let dir = tempfile::tempdir().unwrap();
    let w = PerfabiBuilder::new()
        .directory(dir.path())
        .name("installed")
        .install()
        .expect("the first install");
    let path = w.path().unwrap().to_path_buf();
    assert!(path.starts_with(dir.path()));
    counter!("global.hits").increment(7);
    assert_eq!(total(&path, "global.hits", ""), Reading::Unsigned(7));
    let e = PerfabiBuilder::new()
        .directory(dir.path())
        .install()
        .err()
        .expect("a second install is refused");
    assert!(matches!(e, BuildError::AlreadyInstalled), "{e}");
    // Segments only: the directory also holds the writers' fold lock.
    let segments: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| perfabi_shm::directory::SegmentName::parse(&e.unwrap().file_name()))
        .collect();
    assert_eq!(
        segments.len(),
        1,
        "the refused install's segment is removed: {segments:?}"
    );
}

#[test]
fn a_gauge_declares_the_mode_the_builder_gives_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = PerfabiBuilder::new()
        .gauge_mode_for_metric("pool.peak_busy", perfabi::GaugeMode::Max)
        .gauge_mode_for_metric("pool.done", perfabi::GaugeMode::Max);
    let (r, path) = recorder(dir.path(), b);
    with_local_recorder(&r, || {
        gauge!("pool.peak_busy").set(3.0);
        gauge!("pool.busy").set(2.0);
        counter!("pool.done").increment(1); // not a gauge: no mode
        let (f, m) = family(&path, "pool.peak_busy");
        assert_eq!(
            (f.gauge_mode, &m[0].total),
            (perfabi::GaugeMode::Max, &Reading::Signed(3))
        );
        assert_eq!(
            family(&path, "pool.busy").0.gauge_mode,
            perfabi::GaugeMode::Sum
        );
        assert_eq!(total(&path, "pool.done", ""), Reading::Unsigned(1));
        assert_eq!(dropped(&path, "kind"), 0);
    });
}
