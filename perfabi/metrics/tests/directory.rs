//! Every program writes, one reader sees them all: three processes of the
//! example program write through the recorder into one segment directory,
//! and the reader library's `Directory` reads them as one: counters and
//! histograms summed, gauges over the live writers, and a writer's
//! counts kept after it exits.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use perfabi_reader::directory::{Directory, DirectoryOptions, Scrape};
use perfabi_reader::{Histogram, Reading};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::workspace::profile_dir;

/// The merged value of `family`'s series `instance`.
fn merged(s: &Scrape, family: &str, instance: &str) -> Option<Reading> {
    let f = s.families.iter().find(|f| f.family.name == family)?;
    let k = f
        .family
        .members
        .iter()
        .position(|m| m.instance == instance)?;
    Some(f.readings[k].clone())
}

#[test]
fn three_processes_read_as_one() {
    let exe = profile_dir().join("examples/metrics_app");
    assert!(
        exe.exists(),
        "{} (cargo test builds the examples; not with --test alone)",
        exe.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let segments = dir.path().join("segments");
    let (tx, rx) = mpsc::channel();
    let mut children: Vec<Child> = (0..3)
        .map(|_| {
            let mut c = Command::new(&exe)
                .arg(&segments)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut out = BufReader::new(c.stdout.take().unwrap());
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = out.read_line(&mut line);
                let _ = tx.send(line);
            });
            c
        })
        .collect();
    for _ in 0..3 {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("each example prints its segment's path once written");
        assert!(line.trim_end().ends_with(".perfabi"), "{line:?}");
    }

    let mut d = Directory::open(&segments, DirectoryOptions::default()).unwrap();
    let s = d.read().unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.segments, 3);
    assert_eq!(
        merged(&s, "app.requests", "GET,200"),
        Some(Reading::Unsigned(15))
    );
    assert_eq!(
        merged(&s, "app.work", "io"),
        Some(Reading::Unsigned(120_000))
    );
    assert_eq!(merged(&s, "app.queue", "a"), Some(Reading::Signed(3 * 768)));
    assert_eq!(
        merged(&s, "app.request_size", ""),
        Some(Reading::Histogram(Histogram {
            count: 9,
            sum: 15_600,
            buckets: vec![3, 3, 3]
        }))
    );
    assert_eq!(
        merged(&s, perfabi_metrics::DROPPED, "value"),
        Some(Reading::Unsigned(6))
    );

    // One exits: its counts stay, its gauge leaves the sum.
    let mut gone = children.remove(0);
    drop(gone.stdin.take());
    assert!(gone.wait().unwrap().success());
    let deadline = Deadline::after(Duration::from_secs(60));
    loop {
        let s = d.read().unwrap();
        if merged(&s, "app.queue", "a") == Some(Reading::Signed(2 * 768)) {
            assert_eq!(
                merged(&s, "app.work", "io"),
                Some(Reading::Unsigned(120_000))
            );
            assert_eq!(
                merged(&s, "app.requests", "GET,200"),
                Some(Reading::Unsigned(15))
            );
            break;
        }
        if deadline.passed() {
            deadline.fail(format!(
                "the exited writer's gauge left the sum: {:?}",
                merged(&s, "app.queue", "a")
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for mut c in children {
        drop(c.stdin.take());
        assert!(c.wait().unwrap().success());
    }
}
