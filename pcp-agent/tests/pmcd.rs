//! pmdaperfabi under a real pmcd: a private pmcd on 127.0.0.1 with its own
//! configuration, namespace and socket folder (pcp-agent/test/private-pmcd),
//! queried with PCP's own clients. Segments are written in-process with the
//! perfabi writer, so the tests know every value.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfabi::damon::{Intervals, Region};
use perfabi::writer::{Config, Writer};
use perfabi::Semantics;
use support::*;

fn config() -> Config {
    Config {
        heartbeat_interval: Duration::from_secs(1),
        ..Config::default()
    }
}

/// A new segment at `path` with one counter at `value`.
fn one_counter(path: &Path, name: &str, value: i64) -> Writer {
    let w = Writer::create(path, &config()).unwrap();
    let id = w.add(name, "count", Semantics::Counter).unwrap();
    w.adjust(id, value).unwrap();
    w
}

#[test]
fn pminfo_values_equal_perfabi_cat_json_for_the_same_segment() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Writer::create(&seg, &config()).unwrap();
    for (i, name) in ["app.requests", "app.bytes_out", "app.errors"]
        .iter()
        .enumerate()
    {
        let id = w
            .add(
                name,
                if i == 1 { "bytes" } else { "count" },
                Semantics::Counter,
            )
            .unwrap();
        w.adjust(id, 1000 * (i as i64 + 1) + 7).unwrap();
    }
    let regions = [
        Region {
            start: 0x10000,
            end: 0x20000,
            nr_accesses: 20,
            age: 3,
        },
        Region {
            start: 0x20000,
            end: 0x80000,
            nr_accesses: 0,
            age: 9,
        },
    ];
    let iv = Intervals {
        sample_us: 5000,
        aggr_us: 100_000,
    };
    w.publish_damon(4242, 0, iv, &regions).unwrap();
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), port(0), &seg, &[]);

    // The writer does not move: "the same moment" is any moment.
    let pcp = pmcd.values(&["perfabi"]);
    let cat = run(Command::new(perfabi_cat()).arg(&seg).arg("--json"));
    let cat: serde_json::Value = serde_json::from_slice(&cat.stdout).unwrap();
    let counters = cat["counters"].as_array().unwrap();
    assert_eq!(counters.len(), 3);
    for c in counters {
        let pcp_name = c["name"].as_str().unwrap().replace('.', "_");
        let total = &pcp[&format!("perfabi.total.{pcp_name}")];
        assert_eq!(total, &[(None, c["total"].to_string())], "{pcp_name}");
        let per_cpu = &pcp[&format!("perfabi.counter.{pcp_name}")];
        let want: Vec<_> = c["per_cpu"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, v)| (Some(format!("cpu{i}")), v.to_string()))
            .collect();
        assert_eq!(per_cpu, &want, "{pcp_name}");
    }
    let info = run(Command::new(perfabi_cat())
        .arg(&seg)
        .args(["--info", "--json"]));
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let one = |m: &str| pcp[m][0].1.clone();
    assert_eq!(
        one("perfabi.segment.epoch"),
        info["epoch"].as_str().map_or_else(
            || info["epoch"].to_string(),
            |e| u64::from_str_radix(e.trim_start_matches("0x"), 16)
                .unwrap()
                .to_string()
        )
    );
    assert_eq!(one("perfabi.segment.available"), "1");
    assert_eq!(one("perfabi.segment.writer_alive"), "1");
    assert_eq!(
        one("perfabi.segment.writer_pid"),
        std::process::id().to_string()
    );
    assert_eq!(one("perfabi.segment.nr_counters"), "3");
    assert_eq!(one("perfabi.segment.abi_version"), "\"1.0\"");

    let damon = run(Command::new(perfabi_cat())
        .arg(&seg)
        .args(["--damon", "--json"]));
    let damon: serde_json::Value = serde_json::from_slice(&damon.stdout).unwrap();
    let agg = &damon["aggregations"][0];
    assert_eq!(
        pcp["perfabi.damon.nr_regions"],
        [(Some("kdamond4242/target0".into()), "2".into())]
    );
    assert_eq!(
        pcp["perfabi.damon.aggregation"][0].1,
        agg["aggregation"].to_string()
    );
    for (i, r) in agg["regions"].as_array().unwrap().iter().enumerate() {
        let inst = Some(format!("kdamond4242/target0/region{i}"));
        for (m, k) in [
            ("start", "start"),
            ("end", "end"),
            ("nr_accesses", "nr_accesses"),
            ("age", "age"),
        ] {
            let got = &pcp[&format!("perfabi.damon.region.{m}")];
            assert!(
                got.contains(&(inst.clone(), r[k].to_string())),
                "{m} {i}: {got:?} vs {r}"
            );
        }
    }
    let freq = &pcp["perfabi.damon.region.frequency"];
    assert_eq!(freq[0].1.parse::<f64>().unwrap(), 1.0);
    assert_eq!(freq[1].1.parse::<f64>().unwrap(), 0.0);
    // Help text for a counter the segment named.
    let help = run(pmcd
        .client("pminfo")
        .args(["-tT", "perfabi.total.app_bytes_out"]));
    let help = stdout(&help);
    assert!(
        help.contains("app.bytes_out summed over CPUs") && help.contains("unit bytes"),
        "{help}"
    );
    let desc = stdout(&run(pmcd
        .client("pminfo")
        .args(["-d", "perfabi.total.app_bytes_out"])));
    assert!(
        desc.contains("Semantics: counter") && desc.contains("Units: byte"),
        "{desc}"
    );
    println!(
        "pminfo -f perfabi: {} metrics equal to perfabi-cat --json",
        pcp.len()
    );
}

#[test]
fn pmval_rates_follow_a_live_writer_at_a_known_rate() {
    const RATE: f64 = 400.0;
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Arc::new(Writer::create(&seg, &config()).unwrap());
    let id = w.add("rate.test", "count", Semantics::Counter).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            // Paced by the clock, not by sleeps: n events by n / RATE seconds.
            let t0 = Instant::now();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let due = (t0.elapsed().as_secs_f64() * RATE) as u64;
                if due > n {
                    w.adjust(id, (due - n) as i64).unwrap();
                    n = due;
                }
                w.heartbeat();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), port(1), &seg, &[]);
    let out = run(pmcd.client("pmval").args([
        "-t",
        "1",
        "-s",
        "6",
        "-f",
        "1",
        "perfabi.total.rate_test",
    ]));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let text = stdout(&out);
    let rates: Vec<f64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    println!("pmval rates of a writer at {RATE}/s: {rates:?}");
    assert!(rates.len() >= 5, "{text}");
    for r in &rates[1..] {
        assert!((r - RATE).abs() <= RATE * 0.1, "rate {r} vs {RATE}: {text}");
    }
}

#[test]
fn new_counters_restarts_truncation_and_deletion_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = one_counter(&seg, "first", 5);
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), port(2), &seg, &[]);
    assert_eq!(pmcd.value("perfabi.total.first").as_deref(), Some("5"));

    // A counter added while pmcd runs appears, pmcd untouched.
    let b = w.add("late.arrival", "count", Semantics::Counter).unwrap();
    w.adjust(b, 11).unwrap();
    assert_eq!(
        pmcd.value("perfabi.total.late_arrival").as_deref(),
        Some("11")
    );
    let children = stdout(&run(pmcd.client("pminfo").arg("perfabi.total")));
    assert!(
        children.contains("perfabi.total.late_arrival"),
        "{children}"
    );
    let epoch1 = pmcd.value("perfabi.segment.epoch").unwrap();

    // Writer restart: a new file and epoch at the same path.
    w.close();
    assert_eq!(
        pmcd.value("perfabi.segment.writer_alive").as_deref(),
        Some("0")
    );
    assert_eq!(
        pmcd.value("perfabi.total.first").as_deref(),
        Some("5"),
        "final values stay"
    );
    let w = one_counter(&seg, "first", 2);
    assert_eq!(pmcd.value("perfabi.total.first").as_deref(), Some("2"));
    let epoch2 = pmcd.value("perfabi.segment.epoch").unwrap();
    assert_ne!(epoch1, epoch2);
    assert_eq!(
        pmcd.value("perfabi.total.late_arrival"),
        None,
        "gone with the old writer"
    );
    assert_eq!(
        pmcd.value("perfabi.segment.writer_alive").as_deref(),
        Some("1")
    );

    // Truncation under the agent: no values, no crash, pmcd and agent live.
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(0).unwrap();
    assert_eq!(
        pmcd.value("perfabi.segment.available").as_deref(),
        Some("0")
    );
    assert_eq!(pmcd.value("perfabi.total.first"), None);
    assert!(pmcd.alive());
    // Deletion: the same; then a new writer is picked up.
    drop(w);
    std::fs::remove_file(&seg).unwrap();
    assert_eq!(
        pmcd.value("perfabi.segment.available").as_deref(),
        Some("0")
    );
    let w = one_counter(&seg, "first", 3);
    eventually(5, "the agent maps the new segment", || {
        pmcd.value("perfabi.total.first").as_deref() == Some("3")
    });
    assert!(pmcd.alive());
    // The same agent served it all (pmcd restarts a dead agent never).
    let log = pmcd.agent_log();
    println!("agent log:\n{log}");
    assert!(log.contains("serving no values until it is back"), "{log}");
    assert_eq!(
        log.matches("serving ").count() - log.matches("serving no values").count(),
        1,
        "one agent start"
    );
    let pmcd_log = std::fs::read_to_string(pmcd.dir.join("pmcd.log")).unwrap();
    assert!(
        !pmcd_log.contains("terminated") && !pmcd_log.contains("exit status"),
        "{pmcd_log}"
    );
    drop(w);
}

#[test]
fn pmlogger_records_perfabi_metrics_and_pmdumplog_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _writer = one_counter(&seg, "logged.events", 77);
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), port(3), &seg, &[]);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmda/pmlogger.config");
    // The shipped configuration, at a test's pace.
    let cfg = std::fs::read_to_string(&shipped)
        .unwrap()
        .replace("every 10 seconds", "every 1 second")
        .replace("every 60 seconds", "every 1 second");
    let cfg_path = dir.path().join("pmlogger.config");
    std::fs::write(&cfg_path, cfg).unwrap();
    let archive = dir.path().join("archive");
    let out = run(pmcd
        .client("pmlogger")
        .arg("-c")
        .arg(&cfg_path)
        .args(["-s", "3", "-t", "1"])
        .arg("-l")
        .arg(dir.path().join("pmlogger.log"))
        .arg(&archive));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dump = stdout(&run(tool("pmdumplog").arg(&archive)));
    let lines: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains("(perfabi.total.logged_events): value 77"))
        .collect();
    println!(
        "pmdumplog: {} records of perfabi.total.logged_events",
        lines.len()
    );
    assert!(lines.len() >= 2, "{dump}");
    assert!(dump.contains("(perfabi.counter.logged_events)"), "{dump}");
    assert!(dump.contains("(perfabi.segment.epoch)"), "{dump}");
}

#[test]
fn a_fifo_or_a_giant_sparse_file_at_the_path_answers_at_once_and_the_agent_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    // Any local user can park a FIFO at the path while no writer runs.
    rustix::fs::mkfifoat(rustix::fs::CWD, &seg, rustix::fs::Mode::from(0o644)).unwrap();
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), port(4), &seg, &[]);
    let t = Instant::now();
    assert_eq!(
        pmcd.value("perfabi.segment.available").as_deref(),
        Some("0")
    );
    println!("FIFO at the path: answered in {:?}", t.elapsed());
    assert!(
        pmcd.agent_log().contains("is a FIFO"),
        "{}",
        pmcd.agent_log()
    );

    // A sparse file claiming the largest geometry: refused, nothing read.
    std::fs::remove_file(&seg).unwrap();
    let g = perfabi::Geometry {
        page_size: 4096,
        nr_cpus: perfabi::layout::MAX_CPUS,
        max_instances: perfabi::layout::MAX_INSTANCES,
        damon_capacity: perfabi::layout::MAX_DAMON_CAPACITY,
    };
    let h = g
        .header(&perfabi::WriterIdentity {
            epoch: 3,
            pid: u64::from(std::process::id()),
            start_ns: 0,
            heartbeat_interval_ns: 0,
            first_heartbeat_ns: 0,
        })
        .unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(&seg).unwrap();
        f.set_len(h.segment_size).unwrap();
        f.write_all_at(bytemuck::bytes_of(&h), 0).unwrap();
    }
    assert_eq!(
        pmcd.value("perfabi.segment.available").as_deref(),
        Some("0")
    );
    assert!(pmcd.alive());

    // A writer's segment replaces it: picked up by the same agent.
    std::fs::remove_file(&seg).unwrap();
    let w = one_counter(&seg, "first", 7);
    eventually(5, "the agent maps the new segment", || {
        pmcd.value("perfabi.total.first").as_deref() == Some("7")
    });
    assert_eq!(
        pmcd.value("perfabi.segment.owner_uid").as_deref(),
        Some(rustix::process::geteuid().as_raw().to_string().as_str())
    );
    assert!(pmcd.alive());
    let pmcd_log = std::fs::read_to_string(pmcd.dir.join("pmcd.log")).unwrap();
    assert!(
        !pmcd_log.contains("terminated") && !pmcd_log.contains("exit status"),
        "{pmcd_log}"
    );
    drop(w);
}
