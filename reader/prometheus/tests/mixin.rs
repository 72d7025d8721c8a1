//! The monitoring mixin (`reader/prometheus/mixin`: Prometheus rules and
//! a Grafana dashboard) checked as its users meet it:
//!
//! * `promtool check rules` is clean and `promtool test rules` passes
//!   (each alert fires on a host in trouble, stays quiet on a healthy one);
//! * the committed dashboard JSON is what `dashboard.py` writes;
//! * a real Prometheus loads the rules and scrapes real sources, each
//!   through perfabi-prometheus: perfabi-exportd's segment, perfabi-bpfd's
//!   pinned segment (root: CI runs as root) and a segment directory with
//!   one writer and one refused file. Every recording rule, every
//!   dashboard query and every alert's signal (the expression before its
//!   one comparison with a number) then returns data, and every rule
//!   evaluates without error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::prometheus::{self, Prometheus, Target};
use perfabi_test_harness::{http, run_limited, workspace, KillOnDrop};

mod common;

const TEST: &str = "every_rule_and_dashboard_query_returns_data_from_real_sources";
const PROMTOOL: &str = "/usr/bin/promtool";

fn mixin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mixin")
}

/// `promtool ARGS` in the mixin's folder: its status and output.
fn promtool(args: &[&str]) -> (bool, String) {
    let out = run_limited(
        Command::new(PROMTOOL).args(args).current_dir(mixin()),
        Duration::from_secs(60),
    );
    (
        out.status.is_some_and(|s| s.success()),
        format!("{}{}", out.stdout, out.stderr),
    )
}

#[test]
fn the_rules_are_clean_and_their_unit_tests_pass() {
    let test = "the_rules_are_clean_and_their_unit_tests_pass";
    if !perfabi_test_harness::need_file(test, Path::new(PROMTOOL), "apt-get install prometheus") {
        return;
    }
    let (ok, out) = promtool(&["check", "rules", "rules.yml"]);
    println!("{out}");
    assert!(ok, "promtool check rules: {out}");
    assert!(
        !out.to_lowercase().contains("warn"),
        "promtool warns: {out}"
    );
    let (ok, out) = promtool(&["test", "rules", "rules_test.yml"]);
    println!("{out}");
    assert!(ok, "promtool test rules: {out}");
}

#[test]
fn the_dashboard_json_is_what_its_script_writes() {
    let out = run_limited(
        Command::new("python3")
            .arg(mixin().join("dashboard.py"))
            .arg("--check"),
        Duration::from_secs(60),
    );
    assert!(
        out.status.is_some_and(|s| s.success()),
        "{}{}",
        out.stdout,
        out.stderr
    );
}

/// The dashboard's queries, with its variables given values: every job
/// and instance, and a rate interval of a few scrapes (Prometheus here
/// scrapes every second).
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(mixin().join("dashboards/perfabi-host.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "15s")
                .replace("$job", ".+")
                .replace("$instance", ".+");
            out.push((p["title"].as_str().unwrap().to_string(), expr));
        }
    }
    assert!(out.len() >= 30, "the dashboard has {} queries", out.len());
    out
}

/// `query` evaluated now: whether it returns a sample with a finite value.
fn has_data(p: &Prometheus, query: &str) -> Result<bool, String> {
    let path = format!("/api/v1/query?query={}", http::encode(query));
    let r = http::get(p.address, &path, &[]).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&r.body).map_err(|e| e.to_string())?;
    if r.status != 200 || v["status"] != "success" {
        return Err(format!("{}: {}", r.status, r.body));
    }
    Ok(v["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["value"][1].as_str()?.parse::<f64>().ok())
        .any(f64::is_finite))
}

/// An alert's signal: its expression before its one top-level comparison
/// with a number (rules.yml writes every alert so).
fn signal(query: &str) -> String {
    for op in [" == ", " != ", " >= ", " <= ", " > ", " < "] {
        if let Some((left, right)) = query.rsplit_once(op) {
            if right.trim().parse::<f64>().is_ok() {
                return left.trim().to_string();
            }
        }
    }
    panic!("the alert {query:?} is not SIGNAL OP NUMBER");
}

/// perfabi-bpfd pinning its segment in a folder of its own on bpffs,
/// stopped with SIGTERM (it unpins) and the folder removed on drop.
struct Bpfd {
    process: Option<KillOnDrop>,
    dir: PathBuf,
}

impl Bpfd {
    fn start() -> Bpfd {
        let exe =
            workspace::workspace_bin(&workspace::profile_dir(), "perfabi-bpf", "perfabi-bpfd");
        let dir = PathBuf::from(format!("/sys/fs/bpf/perfabi-mixin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let process = KillOnDrop(
            Command::new(exe)
                .arg("--pin")
                .arg(dir.join("kernel"))
                .arg("--unpin-on-exit")
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let b = Bpfd {
            process: Some(process),
            dir,
        };
        let until = Deadline::after(Duration::from_secs(60));
        while !b.pin().exists() && !until.passed() {
            std::thread::sleep(Duration::from_millis(50));
        }
        until.assert(b.pin().exists(), "perfabi-bpfd pinned its segment");
        b
    }

    fn pin(&self) -> PathBuf {
        self.dir.join("kernel")
    }
}

impl Drop for Bpfd {
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            perfabi_test_harness::send(p.0.id(), perfabi_test_harness::Signal::TERM);
            let until = Deadline::after(Duration::from_secs(20));
            while p.0.try_wait().ok().flatten().is_none() && !until.passed() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = std::fs::remove_file(self.pin());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Disk requests the block histograms can see while the test runs: a MiB
/// written and synced to a file on the root filesystem every 200 ms.
fn disk_traffic(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    use std::io::Write;
    std::thread::spawn(move || {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let block = vec![0x5au8; 1 << 20];
        while !stop.load(Ordering::Relaxed) {
            let mut f = std::fs::File::create(dir.path().join("traffic")).unwrap();
            f.write_all(&block).unwrap();
            f.sync_all().unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

#[test]
fn every_rule_and_dashboard_query_returns_data_from_real_sources() {
    if !prometheus::available(TEST) || !perfabi_test_harness::need_root(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();

    // perfabi-exportd's segment.
    let exportd = workspace::workspace_bin(
        &workspace::profile_dir(),
        "perfabi-exportd",
        "perfabi-exportd",
    );
    let seg = tmp.path().join("perfabi.seg");
    let _exportd = KillOnDrop(
        Command::new(exportd)
            .arg("--path")
            .arg(&seg)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let until = Deadline::after(Duration::from_secs(30));
    while !seg.exists() && !until.passed() {
        std::thread::sleep(Duration::from_millis(20));
    }
    until.assert(seg.exists(), "perfabi-exportd wrote its segment");

    // perfabi-bpfd's.
    let bpfd = Bpfd::start();

    // A directory: one writer, and a link named as a segment (refused:
    // the problem the directory gauges count).
    let apps = tmp.path().join("apps");
    let w = Writer::create_in(&apps, "app", &Config::default()).unwrap();
    let f = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests served",
            "",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    w.member_add(&w.add_member(f, "", &[]).unwrap(), 3).unwrap();
    std::os::unix::fs::symlink(&seg, apps.join("evil.1.00000000000000aa.perfabi")).unwrap();

    let endpoints = [
        ("perfabi-exportd", common::start(&seg, &[])),
        ("perfabi-bpfd", common::start(&bpfd.pin(), &[])),
        ("perfabi-apps", common::start(&apps, &[])),
    ];
    let targets: Vec<Target> = endpoints
        .iter()
        .map(|(job, e)| Target::new(job, e.addr))
        .collect();
    let rules = mixin().join("rules.yml");
    let p = Prometheus::with_scrape_configs(&format!(
        "rule_files:\n  - {}\n{}",
        rules.display(),
        prometheus::scrape_configs(&targets)
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = disk_traffic(stop.clone());

    // The rules as Prometheus loaded them.
    let loaded = p.until(Duration::from_secs(30), "the rules are loaded", |p| {
        let r = http::get(p.address, "/api/v1/rules", &[]).ok()?;
        let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
        let groups = v["data"]["groups"].as_array()?.clone();
        (groups.len() == 2).then_some(groups)
    });
    let mut queries: Vec<(String, String)> = Vec::new();
    for g in &loaded {
        for r in g["rules"].as_array().unwrap() {
            let q = r["query"].as_str().unwrap().to_string();
            let name = r["name"].as_str().unwrap().to_string();
            match r["type"].as_str().unwrap() {
                "recording" => queries.push((format!("record {name}"), name)),
                "alerting" => queries.push((format!("alert {name}"), signal(&q))),
                other => panic!("a rule of type {other}"),
            }
        }
    }
    let n_rules = queries.len();
    queries.extend(
        dashboard_queries()
            .into_iter()
            .map(|(t, e)| (format!("panel {t}"), e)),
    );

    // Every query returns data once the sources have been scraped a few
    // times (rates need two samples; recording rules an evaluation).
    let until = Deadline::after(Duration::from_secs(120));
    let mut missing = queries.clone();
    while !missing.is_empty() && !until.passed() {
        missing.retain(|(what, q)| match has_data(&p, q) {
            Ok(data) => !data,
            Err(e) => panic!("{what}: {q}: {e}"),
        });
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    traffic.join().unwrap();
    for (what, q) in &missing {
        println!("no data: {what}: {q}");
    }
    until.assert(
        missing.is_empty(),
        format!(
            "{} queries of {} returned no data",
            missing.len(),
            queries.len()
        ),
    );

    // Every rule evaluated without error.
    let r = http::get(p.address, "/api/v1/rules", &[]).unwrap();
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    for g in v["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(r["health"], "ok", "{r}");
        }
    }
    println!(
        "MIXIN PASS: {n_rules} rules and {} dashboard queries returned data \
         from perfabi-exportd, perfabi-bpfd and a segment directory",
        queries.len() - n_rules
    );
    drop(endpoints);
    drop(w);
}
