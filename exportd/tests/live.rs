//! The live DAMON sources on this machine. They run only when asked:
//! `PERFABI_LIVE_DAMON=1` (off in CI), because a kdamond here belongs to
//! the host environment and tests must not depend on it. Only the passive
//! tracepoint source runs here (root or CAP_PERFMON); the sysfs source,
//! which creates a kdamond, is tested in the qemu guest (`kmod/test/run`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use perfabi_reader::Segment;

const BIN: &str = env!("CARGO_BIN_EXE_perfabi-exportd");
const ADMIN: &str = "/sys/kernel/mm/damon/admin/kdamonds";

fn asked(test: &str) -> bool {
    let on = std::env::var("PERFABI_LIVE_DAMON").is_ok_and(|v| v == "1");
    if !on {
        perfabi_test_harness::skip(
            test,
            "set PERFABI_LIVE_DAMON=1 to run the live tracepoint source against this host's kdamond",
        );
    }
    on
}

fn sysfs_state() -> String {
    let n = std::fs::read_to_string(format!("{ADMIN}/nr_kdamonds")).unwrap_or_default();
    let states: Vec<String> = (0..n.trim().parse::<u32>().unwrap_or(0))
        .map(|i| std::fs::read_to_string(format!("{ADMIN}/{i}/state")).unwrap_or_default())
        .collect();
    format!("{} {:?}", n.trim(), states)
}

#[test]
fn the_tracepoint_source_publishes_the_host_kdamonds_aggregations_passively() {
    if !asked("the_tracepoint_source_publishes_the_host_kdamonds_aggregations_passively") {
        return;
    }
    let before = sysfs_state();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let child = Command::new(BIN)
        .arg("--path")
        .arg(&path)
        .args(["--source", "tracepoint"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let aggs = loop {
        if let Ok(mut seg) = Segment::open(&path) {
            if let Ok(a) = seg.damon().map(|d| d.aggregations) {
                if !a.is_empty() {
                    break a;
                }
            }
        }
        assert!(
            Instant::now() < end,
            "no aggregation in 30 s: does a kdamond run here?"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    perfabi_test_harness::send(child.id(), perfabi_test_harness::Signal::TERM);
    let out = child.wait_with_output().unwrap();
    println!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    let kdamonds: Vec<u64> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with("kdamond"))
        })
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for a in &aggs {
        assert!(
            kdamonds.contains(&a.monitor_id),
            "monitor {} is not a kdamond",
            a.monitor_id
        );
        assert!(perfabi::damon::check_regions(&a.regions, a.intervals, 4096).is_ok());
        println!(
            "kdamond {} target {}: {} regions, sample {} us, aggregation {} us",
            a.monitor_id,
            a.target_id,
            a.regions.len(),
            a.intervals.sample_us,
            a.intervals.aggr_us
        );
    }
    assert_eq!(sysfs_state(), before, "the source changed DAMON");
}
