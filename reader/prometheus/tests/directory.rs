//! perfabi-prometheus serving a directory of segments (`spec/PERFABI.md`
//! §15) written by worker processes: merged totals exact over loopback,
//! writers appearing and leaving, `--writer-label` keeping them apart, a
//! conflicting family refused naming both files while the rest is served,
//! hostile files spoiling only themselves, and a writer killed with
//! SIGKILL and folded while the scraped counter never goes backwards.
//!
//! The workers are this test binary again, running the ignored test
//! `worker` (never counted as a pass on its own).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;

mod common;

const ENV_DIR: &str = "PERFABI_TEST_PROM_DIR";
const ENV_COUNT: &str = "PERFABI_TEST_PROM_COUNT";
const ENV_BYTES: &str = "PERFABI_TEST_PROM_BYTES";

/// A worker: `COUNT` requests (route `a`) and `COUNT` observations, a
/// gauge of 1 in flight, then `done` on stdout; it closes its segment when
/// stdin closes, unless it is killed first. With `BYTES` set, its requests
/// family counts bytes (a conflict with the others', which count requests:
/// a help of its own would not be one, §15.4).
#[test]
#[ignore = "a worker process of the directory tests"]
fn worker() {
    let (Some(dir), Some(n)) = (std::env::var_os(ENV_DIR), std::env::var_os(ENV_COUNT)) else {
        panic!("run by the directory tests only");
    };
    let n: u64 = n.to_str().unwrap().parse().unwrap();
    let unit = match std::env::var_os(ENV_BYTES) {
        Some(_) => Unit::BYTES,
        None => Unit::COUNT,
    };
    let w = Writer::create_in(dir, "worker", &Config::default()).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests served",
            "route",
            Kind::Counter,
            unit,
        ))
        .unwrap();
    let m = w.add_member(req, "a", &[]).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Request latency",
            "",
            Unit::NS,
            Buckets::Log2 { first: 4, n: 8 },
        ))
        .unwrap();
    let l = w.add_member(lat, "", &[]).unwrap();
    let inflight = w
        .add_family(&FamilySpec::new(
            "app.inflight",
            "Requests in flight",
            "",
            Kind::Gauge,
            Unit::COUNT,
        ))
        .unwrap();
    let g = w.add_member(inflight, "", &[]).unwrap();
    w.member_add(&g, 1).unwrap();
    for i in 0..n {
        w.member_add(&m, 1).unwrap();
        w.observe(&l, i % 1000).unwrap();
    }
    println!("done");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    w.close();
}

/// A worker process.
struct Worker {
    child: Child,
    count: u64,
}

impl Worker {
    /// Starts a worker in `dir` counting `count` (in bytes if
    /// `in_bytes`), once it has counted them all.
    fn start(dir: &Path, count: u64, in_bytes: bool) -> Worker {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--ignored", "--exact", "worker", "--nocapture", "--quiet"])
            .env(ENV_DIR, dir)
            .env(ENV_COUNT, count.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if in_bytes {
            cmd.env(ENV_BYTES, "1");
        }
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                if line.map(|l| l.trim() == "done").unwrap_or(false) {
                    let _ = tx.send(());
                }
            }
        });
        let d = Deadline::witness();
        d.assert(
            done.recv_timeout(perfabi_test_harness::deadline::WITNESS_LIMIT)
                .is_ok(),
            "the worker counted",
        );
        Worker { child, count }
    }

    /// Its pid.
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends it cleanly (its segment closed).
    fn finish(mut self) {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }

    /// Kills it with SIGKILL where it stands (its segment not closed).
    fn kill(mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /metrics` (OpenMetrics): the page.
fn scrape(addr: SocketAddr) -> String {
    let mut s = common::connect(addr);
    let r = common::ask(
        &mut s,
        "GET",
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0"),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.ends_with("# EOF\n"), "{}", r.body);
    r.body
}

/// The value of the sample `series` (name and labels as on the page).
fn value(page: &str, series: &str) -> Option<u64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

/// A fresh directory for writers, in a temporary one.
fn directory() -> (tempfile::TempDir, PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    (top, dir)
}

/// Scrapes until `ok(page)` or the witness limit.
fn scrape_until(addr: SocketAddr, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let d = Deadline::witness();
    loop {
        let page = scrape(addr);
        if ok(&page) {
            return page;
        }
        if d.passed() {
            d.fail(format_args!("{what}; last page:\n{page}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The endpoint's log once every line of the scrapes so far is in it: a
/// scrape of the directory made writable by others for a moment (refused
/// whole: a `503`, logged after the earlier lines) is awaited, bounded by
/// time, and the directory's mode restored.
fn settled_log(e: &common::Running, dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir).unwrap().permissions().mode();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o002)).unwrap();
    let mut s = common::connect(e.addr);
    let r = common::ask(&mut s, "GET", "/metrics", None).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    assert_eq!(r.status, 503, "{}", r.body);
    let d = Deadline::witness();
    loop {
        let log = e.log();
        if log.iter().any(|l| l.contains("answering 503")) {
            return log;
        }
        if d.passed() {
            d.fail(format_args!("the 503 logged: {log:#?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn merged_totals_are_exact_as_writers_come_and_go() {
    let (_top, dir) = directory();
    let a = Worker::start(&dir, 100, false);
    let b = Worker::start(&dir, 250, false);
    let e = common::start(&dir, &[]);
    let apart = common::start(&dir, &["--writer-label"]);
    let page = scrape(e.addr);
    assert_eq!(
        value(&page, "perfabi_directory_segments"),
        Some(2),
        "{page}"
    );
    assert_eq!(
        value(&page, "perfabi_app_requests_total{route=\"a\"}"),
        Some(350),
        "{page}"
    );
    assert_eq!(value(&page, "perfabi_app_latency_count"), Some(350));
    assert_eq!(
        value(&page, "perfabi_app_latency_bucket{le=\"+Inf\"}"),
        Some(350)
    );
    // Two live writers' gauges, summed (the family's mode).
    assert_eq!(value(&page, "perfabi_app_inflight"), Some(2), "{page}");
    // The same metadata lines as a segment's page.
    assert!(page.contains("# TYPE perfabi_app_requests counter\n# HELP perfabi_app_requests Requests served (unit: count)\n"), "{page}");
    assert!(page.contains("# TYPE perfabi_app_latency histogram\n"));
    assert!(!page.contains("perfabi_directory_problems{"), "{page}");

    // Kept apart: each writer's series under `writer`.
    let page = scrape(apart.addr);
    for w in [&a, &b] {
        let series = format!(
            "perfabi_app_requests_total{{route=\"a\",writer=\"worker.{}\"}}",
            w.pid()
        );
        assert_eq!(value(&page, &series), Some(w.count), "{series} in\n{page}");
    }

    // A new writer appears at the next scrape; one that closes keeps its
    // counts but not its gauge.
    let c = Worker::start(&dir, 1000, false);
    let page = scrape(e.addr);
    assert_eq!(value(&page, "perfabi_directory_segments"), Some(3));
    assert_eq!(
        value(&page, "perfabi_app_requests_total{route=\"a\"}"),
        Some(1350)
    );
    a.finish();
    let page = scrape(e.addr);
    assert_eq!(
        value(&page, "perfabi_app_requests_total{route=\"a\"}"),
        Some(1350),
        "{page}"
    );
    assert_eq!(value(&page, "perfabi_app_inflight"), Some(2), "{page}");
    // The Prometheus text format: the same samples.
    let mut s = common::connect(e.addr);
    let text = common::ask(&mut s, "GET", "/metrics", None).unwrap().body;
    // Both pages as prometheus_client's parsers read them.
    for py in &perfabi_test_harness::python::openmetrics_parsers(
        "merged_totals_are_exact_as_writers_come_and_go",
    ) {
        for (module, page) in [
            ("prometheus_client.openmetrics.parser", &page),
            ("prometheus_client.parser", &text),
        ] {
            let samples = common::parse(py, module, page);
            for want in [
                "counter perfabi_app_requests_total [('route', 'a')] 1350.0",
                "gauge perfabi_directory_segments [] 3.0",
            ] {
                assert!(samples.contains(want), "{module}: {want} in\n{samples}");
            }
        }
    }
    assert!(
        text.contains("# TYPE perfabi_app_requests_total counter\n"),
        "{text}"
    );
    assert_eq!(
        value(&text, "perfabi_app_requests_total{route=\"a\"}"),
        Some(1350)
    );
    drop((b, c));
}

#[test]
fn a_conflict_and_hostile_files_spoil_only_themselves() {
    let (_top, dir) = directory();
    let good = Worker::start(&dir, 300, false);
    let odd = Worker::start(&dir, 40, true);
    // Hostile entries named as segments: garbage, a link to a good
    // segment, a FIFO (opening one must not block).
    let garbage = dir.join("evil.4242.00000000000000aa.perfabi");
    std::fs::write(&garbage, vec![0xa5u8; 8192]).unwrap();
    let good_file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("worker.{}.", good.pid()))
        })
        .unwrap();
    std::os::unix::fs::symlink(&good_file, dir.join("link.4243.00000000000000bb.perfabi")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(dir.join("fifo.4244.00000000000000cc.perfabi"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let e = common::start(&dir, &[]);
    let page = scrape(e.addr);
    // The conflicting family is refused whole; the others merge both.
    assert!(!page.contains("perfabi_app_requests"), "{page}");
    assert_eq!(
        value(&page, "perfabi_app_latency_count"),
        Some(340),
        "{page}"
    );
    assert_eq!(
        value(&page, "perfabi_directory_segments"),
        Some(2),
        "{page}"
    );
    assert_eq!(
        value(
            &page,
            "perfabi_directory_problems{code=\"family-conflict\"}"
        ),
        Some(1),
        "{page}"
    );
    for py in &perfabi_test_harness::python::openmetrics_parsers(
        "a_conflict_and_hostile_files_spoil_only_themselves",
    ) {
        let samples = common::parse(py, "prometheus_client.openmetrics.parser", &page);
        assert!(
            samples.contains("gauge perfabi_directory_problems [('code', 'family-conflict')] 1.0"),
            "{samples}"
        );
    }
    let bad: u64 = page
        .lines()
        .filter(|l| l.starts_with("perfabi_directory_problems{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(bad, 4, "a conflict and three hostile files:\n{page}");
    // Logged once each, the conflict naming both files.
    let again = scrape(e.addr);
    assert_eq!(value(&again, "perfabi_app_latency_count"), Some(340));
    let log = settled_log(&e, &dir);
    let conflict: Vec<&String> = log.iter().filter(|l| l.contains("app.requests")).collect();
    assert_eq!(conflict.len(), 1, "{log:#?}");
    for w in [&good, &odd] {
        assert!(
            conflict[0].contains(&format!("worker.{}.", w.pid())),
            "{conflict:?} names both files"
        );
    }
    for name in ["evil.4242", "link.4243", "fifo.4244"] {
        assert_eq!(
            log.iter().filter(|l| l.contains(name)).count(),
            1,
            "{name} logged once: {log:#?}"
        );
    }
    // The odd writer's file removed (its writer closed): the conflict ends
    // at the next scrape, and the family is served again.
    odd.finish();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if !n.starts_with(&format!("worker.{}.", good.pid())) && n.starts_with("worker.") {
            std::fs::remove_file(&p).unwrap();
        }
    }
    let page = scrape(e.addr);
    assert_eq!(
        value(&page, "perfabi_app_requests_total{route=\"a\"}"),
        Some(300),
        "{page}"
    );
    assert_eq!(
        value(
            &page,
            "perfabi_directory_problems{code=\"family-conflict\"}"
        ),
        None
    );
}

#[test]
fn a_killed_writer_is_folded_and_the_counter_never_goes_backwards() {
    let (_top, dir) = directory();
    let first = Worker::start(&dir, 700, false);
    let e = common::start(&dir, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let addr = e.addr;
    let watcher = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let (mut last, mut scrapes) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let page = scrape(addr);
                let now = value(&page, "perfabi_app_requests_total{route=\"a\"}").unwrap_or(0);
                assert!(now >= last, "went backwards: {last} then {now}\n{page}");
                last = now;
                scrapes += 1;
            }
            scrapes
        })
    };
    let made = first.count;
    first.kill();
    // Each new writer folds the dead ones into the kept file.
    let second = Worker::start(&dir, 55, false);
    let made = made + second.count;
    scrape_until(addr, "the dead writer folded", |_| {
        dir.join(perfabi_shm::directory::KEPT_NAME).exists()
    });
    let page = scrape(addr);
    assert_eq!(
        value(&page, "perfabi_app_requests_total{route=\"a\"}"),
        Some(made),
        "{page}"
    );
    assert_eq!(
        value(&page, "perfabi_directory_segments"),
        Some(1),
        "{page}"
    );
    let third = Worker::start(&dir, 5, false);
    second.kill();
    let made = made + third.count;
    let page = scrape(addr);
    assert_eq!(
        value(&page, "perfabi_app_requests_total{route=\"a\"}"),
        Some(made)
    );
    stop.store(true, Ordering::Relaxed);
    let scrapes = watcher.join().unwrap();
    assert!(scrapes > 0);
    println!("{scrapes} scrapes while writers were killed and folded; none went backwards");
}

/// A directory's page has no per-CPU series: `--cpu` is refused, saying
/// so, and a flag for directories on a segment file too.
#[test]
fn flags_that_do_not_apply_are_refused() {
    let (_top, dir) = directory();
    let exe = perfabi_test_harness::bin(
        "perfabi-prometheus",
        env!("CARGO_BIN_EXE_perfabi-prometheus"),
    );
    let out = Command::new(&exe)
        .arg(&dir)
        .args(["--cpu", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cpu does not apply"));
    let file = dir.join("plain.seg");
    drop(Writer::create(&file, &Config::default()).unwrap());
    let out = Command::new(&exe)
        .arg(&file)
        .args(["--writer-label=w", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(&exe)
        .arg(&dir)
        .args(["--writer-label=__x", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a reserved label name");
}

/// `--max-segments`: past it the rest are left out, the page served with
/// what was read and the limit counted (code `limit`) and logged once.
#[test]
fn the_segment_limit_is_a_problem_not_a_failure() {
    let (_top, dir) = directory();
    let _a = Worker::start(&dir, 10, false);
    let _b = Worker::start(&dir, 20, false);
    let e = common::start(&dir, &["--max-segments", "1"]);
    let page = scrape(e.addr);
    assert_eq!(
        value(&page, "perfabi_directory_segments"),
        Some(1),
        "{page}"
    );
    let total = value(&page, "perfabi_app_requests_total{route=\"a\"}");
    assert!(total == Some(10) || total == Some(20), "{page}");
    assert_eq!(
        value(&page, "perfabi_directory_problems{code=\"limit\"}"),
        Some(1),
        "{page}"
    );
    scrape(e.addr);
    let log = settled_log(&e, &dir);
    assert_eq!(
        log.iter()
            .filter(|l| l.contains("max_segments") || l.contains("limit of 1"))
            .count(),
        1,
        "{log:#?}"
    );
}
