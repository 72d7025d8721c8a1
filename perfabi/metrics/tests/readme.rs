//! The README's "Writing from Rust's metrics" example
//! (`examples/quickstart.rs`, shown there verbatim) run as the README says:
//! its segment lands in the segment directory, and `perfabi-cat` shows
//! its values.

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use perfabi_reader::Reading;
use perfabi_test_harness::{readme, workspace};
use support::*;

#[test]
fn the_readme_example_writes_what_perfabi_cat_shows() {
    readme::example("perfabi/metrics/examples/quickstart.rs");
    let profile = workspace::profile_dir();
    let dir = tempfile::tempdir().unwrap();
    let segments = dir.path().join("perfabi");
    let exe = profile.join("examples/quickstart");
    assert!(
        exe.exists(),
        "{} (cargo test builds the examples; not with --test alone)",
        exe.display()
    );
    let mut child = Command::new(&exe)
        .env("PERFABI_DIR", &segments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
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
    assert_eq!(path.parent(), Some(segments.as_path()), "$PERFABI_DIR");
    assert_eq!(total(&path, "app.requests", "GET"), Reading::Unsigned(3));
    assert_eq!(total(&path, "app.queue_depth", ""), Reading::Signed(7));

    let cat = workspace::perfabi_cat();
    let out = Command::new(cat)
        .arg("--openmetrics")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for want in [
        "perfabi_app_requests_total{method=\"GET\"} 3",
        "perfabi_app_queue_depth 7",
        "perfabi_app_latency_count 1",
        "perfabi_app_latency_sum 4200000",
        "# HELP perfabi_app_latency Request latency (unit: ns)",
    ] {
        assert!(text.lines().any(|l| l == want), "{want:?} in {text}");
    }
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}
