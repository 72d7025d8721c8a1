//! A real program using the `metrics` macros (`examples/metrics_app.rs`),
//! writing through the recorder into a segment directory: every value it
//! writes is read back exactly with the reader library, with its help,
//! unit, dimension and labels, and every refusal is said once and counted.

mod support;

use std::io::{BufRead, BufReader, Read as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use perfabi_reader::{Buckets, Histogram, Kind, Reading, Unit};
use perfabi_test_harness::workspace::profile_dir;
use support::*;

#[test]
fn example_program_writes_every_kind_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let segments = dir.path().join("segments");
    let exe = profile_dir().join("examples/metrics_app");
    assert!(
        exe.exists(),
        "{} (cargo test builds the examples; not with --test alone)",
        exe.display()
    );
    let mut child = Command::new(&exe)
        .arg(&segments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    // Its first line is the segment's path, once every metric is written;
    // waited for by time, never forever.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the example prints its segment's path");
    let path = PathBuf::from(line.trim_end());
    assert_eq!(path.parent(), Some(segments.as_path()), "{line:?}");
    let file = path.file_name().unwrap().to_str().unwrap();
    assert!(
        file.starts_with("metrics_app.") && file.ends_with(".perfabi"),
        "named after the program: {file}"
    );

    // Counters: a described one with two labels (either order: one series).
    let (f, m) = family(&path, "app.requests");
    assert_eq!(
        (f.kind, f.unit, f.help.as_str()),
        (Kind::Counter, Unit::COUNT, "Requests served")
    );
    assert_eq!(f.dimension, perfabi_metrics::series::SERIES);
    assert_eq!(
        m,
        vec![
            Read {
                instance: "GET,200".into(),
                labels: labels(&[("method", "GET"), ("status", "200")]),
                total: Reading::Unsigned(5),
            },
            Read {
                instance: "POST,500".into(),
                labels: labels(&[("method", "POST"), ("status", "500")]),
                total: Reading::Unsigned(1),
            },
        ]
    );
    // absolute: the largest value given.
    let (f, m) = family(&path, "app.jobs_done");
    assert_eq!(
        (f.dimension.as_str(), f.help.as_str()),
        ("", ""),
        "not described in time"
    );
    assert_eq!(m[0].total, Reading::Unsigned(12));
    // One label: the dimension; 4 threads x 10,000 increments.
    let (f, m) = family(&path, "app.work");
    assert_eq!(f.dimension, "pool");
    assert_eq!(
        (m[0].instance.as_str(), &m[0].total),
        ("io", &Reading::Unsigned(40_000))
    );

    // Gauges: 1.5 + 0.25 - 1.0 KiB = 768 bytes; -2.5 rounds to -3.
    let (f, _) = family(&path, "app.queue");
    assert_eq!(
        (f.kind, f.unit, f.help.as_str()),
        (Kind::Gauge, Unit::BYTES, "Data queued")
    );
    assert_eq!(total(&path, "app.queue", "a"), Reading::Signed(768));
    assert_eq!(total(&path, "app.temperature", ""), Reading::Signed(-3));

    // Histograms: seconds in ns, LOG2 from 2^10 ns; explicit buckets.
    let (f, _) = family(&path, "app.latency");
    assert_eq!((f.kind, f.unit), (Kind::Histogram, Unit::NS));
    assert_eq!(f.buckets, Some(Buckets::Log2 { first: 10, n: 32 }));
    let mut buckets = vec![0; 32];
    buckets[22 - 10] = 1; // 3,100,000 ns <= 2^22
    buckets[29 - 10] = 1; // 500,000,000 ns <= 2^29
    assert_eq!(
        total(&path, "app.latency", ""),
        Reading::Histogram(Histogram {
            count: 2,
            sum: 503_100_000,
            buckets
        })
    );
    let (f, _) = family(&path, "app.request_size");
    assert_eq!(f.buckets, Some(Buckets::Explicit(vec![100, 1000])));
    assert_eq!(
        total(&path, "app.request_size", ""),
        Reading::Histogram(Histogram {
            count: 3,
            sum: 5200,
            buckets: vec![1, 1, 1]
        })
    );

    // Refusals, counted by reason.
    for (reason, n) in [
        ("name", 1),
        ("kind", 1),
        ("value", 2),
        ("labels", 1),
        ("description", 1),
        ("capacity", 0),
        ("buckets", 0),
        ("other", 0),
    ] {
        assert_eq!(dropped(&path, reason), n, "dropped{{reason={reason}}}");
    }

    drop(child.stdin.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}: {stderr}");
    // Each refusal said once, on one line naming what and where it is counted.
    for reason in ["name", "kind", "labels", "description"] {
        let tail = format!("counted in perfabi.metrics.dropped{{reason=\"{reason}\"}}");
        assert_eq!(stderr.matches(&tail).count(), 1, "{reason}: {stderr}");
    }
    assert_eq!(
        stderr.matches("reason=\"value\"").count(),
        2,
        "once per metric: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 6, "{stderr}");
}
