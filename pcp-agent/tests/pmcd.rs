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

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi::{Buckets, FamilySpec, Kind, Semantics, Unit};
use perfabi_shm::writer::{Config, FamilyId, MemberId, Writer};
use perfabi_test_harness::forge::set_cpu_sequence;
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
    w.publish_damon(&Aggregation::new(4242, 0, iv, regions.to_vec()))
        .unwrap();
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);

    // The writer does not move: "the same moment" is any moment.
    let pcp = pmcd.values(&["perfabi"]);
    let cat = run(Command::new(perfabi_cat()).arg(&seg).arg("--json"));
    let cat: serde_json::Value = serde_json::from_slice(&cat.stdout).unwrap();
    let counters = cat["counters"].as_array().unwrap();
    assert_eq!(counters.len(), 3);
    for c in counters {
        let pcp_name = c["name"].as_str().unwrap();
        let total = &pcp[&format!("perfabi.{pcp_name}")];
        assert_eq!(total, &[(None, c["total"].to_string())], "{pcp_name}");
        let per_cpu = &pcp[&format!("perfabi.percpu.{pcp_name}")];
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
    assert_eq!(
        one("perfabi.segment.abi_version"),
        format!("\"{}\"", info["abi"].as_str().unwrap()),
        "the writer's (1.1: a writer with family tables)"
    );

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
    let help = run(pmcd.client("pminfo").args(["-tT", "perfabi.app.bytes_out"]));
    let help = stdout(&help);
    assert!(
        help.contains("app.bytes_out, summed over CPUs") && help.contains("unit bytes"),
        "{help}"
    );
    let desc = stdout(&run(pmcd
        .client("pminfo")
        .args(["-d", "perfabi.app.bytes_out"])));
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
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    let out =
        run(pmcd
            .client("pmval")
            .args(["-t", "1", "-s", "6", "-f", "1", "perfabi.rate.test"]));
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
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    assert_eq!(pmcd.value("perfabi.first").as_deref(), Some("5"));

    // A counter added while pmcd runs appears, pmcd untouched.
    let b = w.add("late.arrival", "count", Semantics::Counter).unwrap();
    w.adjust(b, 11).unwrap();
    assert_eq!(pmcd.value("perfabi.late.arrival").as_deref(), Some("11"));
    let children = stdout(&run(pmcd.client("pminfo").arg("perfabi.late")));
    assert!(children.contains("perfabi.late.arrival"), "{children}");
    let epoch1 = pmcd.value("perfabi.segment.epoch").unwrap();

    // Writer restart: a new file and epoch at the same path.
    w.close();
    assert_eq!(
        pmcd.value("perfabi.segment.writer_alive").as_deref(),
        Some("0")
    );
    assert_eq!(
        pmcd.value("perfabi.first").as_deref(),
        Some("5"),
        "final values stay"
    );
    let w = one_counter(&seg, "first", 2);
    assert_eq!(pmcd.value("perfabi.first").as_deref(), Some("2"));
    let epoch2 = pmcd.value("perfabi.segment.epoch").unwrap();
    assert_ne!(epoch1, epoch2);
    assert_eq!(
        pmcd.value("perfabi.late.arrival"),
        None,
        "gone with the old writer"
    );
    assert_eq!(
        pmcd.value("perfabi.segment.writer_alive").as_deref(),
        Some("1")
    );

    // Truncation under the agent: no crash, pmcd and agent live; the
    // agent answers with the last good values (held) until the writer's
    // heartbeat repairs the segment, which it does within half a second.
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(0).unwrap();
    assert_eq!(
        pmcd.value("perfabi.segment.available").as_deref(),
        Some("1")
    );
    assert!(pmcd.value("perfabi.first").is_some());
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
        pmcd.value("perfabi.first").as_deref() == Some("3")
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
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    let cfg_path = pmlogger_config_every_second(dir.path());
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
    let dump = stdout(&run(tool("pmdumplog", dir.path()).arg(&archive)));
    let lines: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains("(perfabi.logged.events): value 77"))
        .collect();
    println!(
        "pmdumplog: {} records of perfabi.logged.events",
        lines.len()
    );
    assert!(lines.len() >= 2, "{dump}");
    assert!(dump.contains("(perfabi.percpu.logged.events)"), "{dump}");
    assert!(dump.contains("(perfabi.segment.epoch)"), "{dump}");
}

#[test]
fn a_fifo_or_a_giant_sparse_file_at_the_path_answers_at_once_and_the_agent_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    // Any local user can park a FIFO at the path while no writer runs.
    rustix::fs::mkfifoat(rustix::fs::CWD, &seg, rustix::fs::Mode::from(0o644)).unwrap();
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
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
        max_families: 0,
        max_members: 0,
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
        pmcd.value("perfabi.first").as_deref() == Some("7")
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

/// Instance id and name of each instance in `pminfo -f` output of one
/// metric: `inst [7 or "kdamond1/target0"] value 2`.
fn inst_ids(text: &str) -> Vec<(i64, String)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("inst [")?;
            let (id, rest) = rest.split_once(" or \"")?;
            let (name, _) = rest.split_once('"')?;
            Some((id.parse().ok()?, name.to_string()))
        })
        .collect()
}

#[test]
fn an_archive_across_agent_and_pmcd_restarts_keeps_each_name_s_pmid_and_instance_ids() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Writer::create(&seg, &config()).unwrap();
    let iv = Intervals {
        sample_us: 5000,
        aggr_us: 100_000,
    };
    let region = |start| Region {
        start,
        end: start + 0x1000,
        nr_accesses: 2,
        age: 1,
    };
    let a = w.add("arch.a", "count", Semantics::Counter).unwrap();
    let b = w.add("arch.b", "count", Semantics::Counter).unwrap();
    w.adjust(a, 111).unwrap();
    w.adjust(b, 222).unwrap();
    w.publish_damon(&Aggregation::new(
        900,
        0,
        iv,
        vec![region(0x10000), region(0x20000)],
    ))
    .unwrap();
    let pmcd_dir = dir.path().join("pmcd");
    let pmcd = Pmcd::start(&pmcd_dir, &seg, &[]);
    // The agent numbers a, b and stream 900 as it meets them (the streams
    // when a request serves DAMON values or instances); then a goes, c
    // comes and stream 100 appears, and the agent meets them too.
    assert_eq!(pmcd.value("perfabi.arch.b").as_deref(), Some("222"));
    assert_eq!(pmcd.value("perfabi.damon.streams").as_deref(), Some("1"));
    w.del(a).unwrap();
    let c = w.add("arch.c", "count", Semantics::Counter).unwrap();
    w.adjust(c, 333).unwrap();
    w.publish_damon(&Aggregation::new(100, 0, iv, vec![region(0x30000)]))
        .unwrap();
    assert_eq!(pmcd.value("perfabi.arch.c").as_deref(), Some("333"));
    let ids = |pmcd: &Pmcd| {
        let out = stdout(&run(pmcd.client("pminfo").args([
            "-m",
            "perfabi.arch.b",
            "perfabi.arch.c",
            "perfabi.percpu.arch.c",
        ])));
        let streams = inst_ids(&stdout(&run(pmcd
            .client("pminfo")
            .args(["-f", "perfabi.damon.nr_regions"]))));
        let regions = inst_ids(&stdout(&run(pmcd
            .client("pminfo")
            .args(["-f", "perfabi.damon.region.start"]))));
        (out, streams, regions)
    };
    let before = ids(&pmcd);
    println!("before the restarts: {before:?}");

    // pmlogger records while the agent is restarted under it.
    let cfg = dir.path().join("pmlogger.config");
    std::fs::write(
        &cfg,
        "log mandatory on every 1 second {\n    perfabi.arch\n    perfabi.damon.nr_regions\n    perfabi.damon.region.start\n}\n",
    )
    .unwrap();
    let archive = dir.path().join("archive");
    let logger = pmcd
        .client("pmlogger")
        .arg("-c")
        .arg(&cfg)
        .args(["-s", "7", "-t", "1"])
        .arg("-l")
        .arg(dir.path().join("pmlogger.log"))
        .arg(&archive)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    pmcd.restart_agent();
    let after_agent = ids(&pmcd);
    let out = logger.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "pmlogger: {out:?}\n{}",
        std::fs::read_to_string(dir.path().join("pmlogger.log")).unwrap_or_default()
    );
    assert_eq!(
        before, after_agent,
        "PMIDs and instance ids after an agent restart"
    );
    let log = pmcd.agent_log();
    assert_eq!(
        log.matches("serving ").count() - log.matches("serving no values").count(),
        1,
        "the log of the second agent: {log}"
    );
    assert!(log.contains("counter numbers read from"), "{log}");

    let dump = stdout(&run(tool("pmdumplog", dir.path())
        .args(["-a"])
        .arg(&archive)));
    // Each name has one PMID in the archive, each PMID one name.
    let mut pmids: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for l in dump.lines().filter(|l| l.starts_with("PMID: ")) {
        // PMID: 502.2048.2 (perfabi.arch.c)
        let (id, name) = l["PMID: ".len()..].split_once(' ').unwrap();
        pmids
            .entry(name.trim_matches(['(', ')']).to_string())
            .or_default()
            .insert(id.to_string());
    }
    println!("archive metrics: {pmids:?}");
    assert!(pmids.contains_key("perfabi.arch.c"), "{dump}");
    for (name, ids) in &pmids {
        assert_eq!(ids.len(), 1, "{name} has PMIDs {ids:?}");
    }
    // Each instance name has one id in every instance domain record, and
    // no id is given to two names.
    let indoms = &dump[dump.find("Instance Domains in the Log").unwrap()..];
    let indoms = &indoms[..indoms.find("Temporal Index").unwrap_or(indoms.len())];
    type Ids<K, V> = std::collections::BTreeMap<K, std::collections::BTreeSet<V>>;
    let mut by_name: Ids<(String, String), i64> = Default::default();
    let mut by_id: Ids<(String, i64), String> = Default::default();
    let mut indom = String::new();
    for l in indoms.lines() {
        if let Some(d) = l.strip_prefix("InDom: ") {
            indom = d.to_string();
        }
        // "   0 or \"kdamond900/target0\""
        let Some((id, name)) = l.trim().split_once(" or \"") else {
            continue;
        };
        let (Ok(id), name) = (id.parse::<i64>(), name.trim_end_matches('"')) else {
            continue;
        };
        if indom.starts_with("502.") {
            let (i, n) = (indom.clone(), name.to_string());
            by_name
                .entry((i.clone(), n.clone()))
                .or_default()
                .insert(id);
            by_id.entry((i, id)).or_default().insert(n);
        }
    }
    println!("archive instances: {by_name:?}");
    assert_eq!(by_name.len(), 5, "2 streams and 3 regions: {indoms}");
    for (name, ids) in &by_name {
        assert_eq!(ids.len(), 1, "{name:?} has ids {ids:?}: {indoms}");
    }
    for (id, names) in &by_id {
        assert_eq!(names.len(), 1, "id {id:?} names {names:?}: {indoms}");
    }
    // The values go on under the same names after the restart (pmlogger
    // marks the restart in the archive).
    let after_mark = &dump[dump
        .find("<mark>")
        .expect("pmlogger marks the agent restart")..];
    let records = |text: &str, line: &str| text.matches(line).count();
    let c = "(perfabi.arch.c): value 333";
    let b = "(perfabi.arch.b): value 222";
    println!(
        "archive: arch_c 333 in {} records ({} after the restart), arch_b 222 in {}",
        records(&dump, c),
        records(after_mark, c),
        records(&dump, b)
    );
    assert!(records(after_mark, c) >= 2, "{dump}");
    assert_eq!(records(&dump, c), records(&dump, b), "{dump}");
    assert!(
        after_mark.contains("inst [0 or \"kdamond900/target0/region0\"] value 65536"),
        "{dump}"
    );

    // The saved state is in the private pmcd's folder (its PCP_VAR_DIR).
    for f in ["502.1", "502.2", "perfabi/502.pmids"] {
        let p = pmcd_dir.join("var/config/pmda").join(f);
        assert!(p.is_file(), "{} is missing", p.display());
    }

    // pmcd itself restarted, with the same state folder.
    drop(pmcd);
    std::thread::sleep(Duration::from_millis(300));
    let pmcd = Pmcd::start(&pmcd_dir, &seg, &[]);
    let after_pmcd = ids(&pmcd);
    assert_eq!(
        before, after_pmcd,
        "PMIDs and instance ids after a pmcd restart"
    );
    drop(w);
}

#[test]
fn a_transient_read_error_keeps_the_last_values_for_a_bounded_time_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    // No heartbeat thread: nothing repairs what the test breaks.
    let w = Writer::create(
        &seg,
        &Config {
            heartbeat_interval: Duration::ZERO,
            auto_heartbeat: false,
            ..Config::default()
        },
    )
    .unwrap();
    let id = w.add("held.events", "count", Semantics::Counter).unwrap();
    w.adjust(id, 42).unwrap();
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    let one = |m: &str| pmcd.value(m);
    assert_eq!(one("perfabi.held.events").as_deref(), Some("42"));

    // The writer dies mid-update: every read of CPU 0's block is busy.
    let seq = set_cpu_sequence(&seg, 0, None);
    let t = Instant::now();
    assert_eq!(
        one("perfabi.held.events").as_deref(),
        Some("42"),
        "the last good value, held"
    );
    assert_eq!(one("perfabi.segment.held").as_deref(), Some("1"));
    assert_eq!(one("perfabi.segment.available").as_deref(), Some("1"));
    let held: u64 = one("perfabi.segment.held_reads").unwrap().parse().unwrap();
    let busy: u64 = one("perfabi.segment.busy_reads").unwrap().parse().unwrap();
    assert!(held >= 3 && busy >= 3, "held {held}, busy {busy}");
    // Held for the bound, not for ever.
    eventually(
        perfabi_pcp_agent::source::HOLD.as_secs() + 5,
        "held values expire",
        || one("perfabi.held.events").is_none(),
    );
    let gone = t.elapsed();
    println!("busy segment: values held for {gone:?}");
    assert!(gone >= perfabi_pcp_agent::source::HOLD, "{gone:?}");
    assert_eq!(one("perfabi.segment.available").as_deref(), Some("0"));
    assert_eq!(one("perfabi.segment.held").as_deref(), Some("0"));
    let epoch = stdout(&run(pmcd
        .client("pminfo")
        .args(["-f", "perfabi.segment.epoch"])));
    assert!(
        epoch.contains("Try again. Information not currently available"),
        "{epoch}"
    );
    // The writer's block is whole again: values are back at once.
    set_cpu_sequence(&seg, 0, Some(seq));
    assert_eq!(one("perfabi.held.events").as_deref(), Some("42"));
    assert_eq!(one("perfabi.segment.held").as_deref(), Some("0"));

    // The file truncated under the agent: held too (a live writer
    // repairs it at its next heartbeat; this one does not).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(0)
        .unwrap();
    assert_eq!(one("perfabi.held.events").as_deref(), Some("42"));
    assert_eq!(one("perfabi.segment.held").as_deref(), Some("1"));
    // A permanent error (no file at the path) is no values at once.
    drop(w);
    std::fs::remove_file(&seg).unwrap();
    assert_eq!(one("perfabi.held.events"), None);
    assert_eq!(one("perfabi.segment.available").as_deref(), Some("0"));
    let log = pmcd.agent_log();
    println!("agent log:\n{log}");
    assert_eq!(
        log.matches("answering with the values of the last good read")
            .count(),
        2,
        "{log}"
    );
    assert!(log.contains("(held values expired)"), "{log}");
    assert!(pmcd.alive());
}

/// A segment with metric families of every kind (and a 1.0 counter):
/// `disk.dev.read` (counter, KiB, per device: sda 100, sdb 200),
/// `disk.dev.latency` (histogram in µs, buckets 100, 1000, 10000 and +Inf:
/// sda observed 50, 500, 500, 20000), `mem.rss_peak` (peak, pages, no
/// dimension: 300), `net.rx_rate` (gauge in MiB/s, per iface: eth0 12) and
/// `app.requests` (1.0, count: 7).
struct Families {
    w: Writer,
    read: FamilyId,
    members: Vec<MemberId>,
}

fn families(path: &Path) -> Families {
    let w = Writer::create(path, &config()).unwrap();
    let read = w
        .add_family(&FamilySpec::new(
            "disk.dev.read",
            "Kibibytes read from the device",
            "device",
            Kind::Counter,
            Unit::KIB,
        ))
        .unwrap();
    let sda = w
        .add_member(read, "sda", &[("model", "virtio disk")])
        .unwrap();
    let sdb = w.add_member(read, "sdb", &[("model", "nvme")]).unwrap();
    w.member_add(&sda, 100).unwrap();
    w.member_add(&sdb, 200).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "disk.dev.latency",
            "Request latency",
            "device",
            Unit::US,
            Buckets::Explicit(vec![100, 1000, 10_000]),
        ))
        .unwrap();
    let lat_sda = w.add_member(lat, "sda", &[]).unwrap();
    for v in [50, 500, 500, 20_000] {
        w.observe(&lat_sda, v).unwrap();
    }
    let rss = w
        .add_family(&FamilySpec::new(
            "mem.rss_peak",
            "Largest resident set",
            "",
            Kind::Peak,
            Unit::PAGES,
        ))
        .unwrap();
    let rss0 = w.add_member(rss, "", &[]).unwrap();
    w.peak(&rss0, 300).unwrap();
    w.peak(&rss0, 200).unwrap();
    let rate = w
        .add_family(&FamilySpec::new(
            "net.rx_rate",
            "Receive rate",
            "iface",
            Kind::Gauge,
            Unit::new(1, -1, 0, 2, 3, 0, 0),
        ))
        .unwrap();
    let eth0 = w.add_member(rate, "eth0", &[]).unwrap();
    w.member_set(&eth0, 12).unwrap();
    let id = w.add("app.requests", "count", Semantics::Counter).unwrap();
    w.adjust(id, 7).unwrap();
    Families {
        w,
        read,
        members: vec![sda, sdb, lat_sda, rss0, eth0],
    }
}

/// `pminfo` output split by metric: name → its lines.
fn sections(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut name = String::new();
    for l in text.lines() {
        if !l.is_empty() && !l.starts_with(' ') && l.starts_with("perfabi.") {
            name = l.split(' ').next().unwrap().to_string();
        }
        let e: &mut String = out.entry(name.clone()).or_default();
        *e += l;
        e.push('\n');
    }
    out
}

#[test]
fn pminfo_shows_each_family_s_instances_units_help_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let f = families(&seg);
    // A family named among the agent's own metrics: left out, and said.
    let mine =
        f.w.add_family(&FamilySpec::new(
            "segment.mine",
            "",
            "",
            Kind::Gauge,
            Unit::NONE,
        ))
        .unwrap();
    f.w.add_member(mine, "", &[]).unwrap();
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    let out = stdout(&run(pmcd.client("pminfo").args([
        "-dfTtl",
        "perfabi.disk.dev.read",
        "perfabi.disk.dev.latency",
        "perfabi.mem.rss_peak",
        "perfabi.net.rx_rate",
        "perfabi.app.requests",
        "perfabi.percpu.disk.dev.read",
        "perfabi.percpu.app.requests",
    ])));
    println!("pminfo -dfTtl:\n{out}");
    let s = sections(&out);
    let has = |m: &str, parts: &[&str]| {
        let t = s.get(m).unwrap_or_else(|| panic!("no {m} in:\n{out}"));
        for p in parts {
            assert!(t.contains(p), "{m}: no {p:?} in:\n{t}");
        }
    };
    // A counter per device: its instance domain, units with scale, the
    // segment's help (one-line and long), values and labels per instance.
    has(
        "perfabi.disk.dev.read",
        &[
            "perfabi.disk.dev.read [Kibibytes read from the device]",
            "Data Type: 64-bit unsigned int  InDom: 502.",
            "Semantics: counter  Units: Kbyte",
            r#""kind":"counter""#,
            "Help:\nKibibytes read from the device.\nperfabi family \"disk.dev.read\": a counter",
            "unit KiB",
            "One instance per device",
            "Instances also carry the writer's labels: model.",
            "inst [0 or \"sda\"] value 100",
            "inst [1 or \"sdb\"] value 200",
            r#"inst [0 or "sda"] labels {"agent":"perfabi","device":"sda","#,
            r#""model":"virtio disk"}"#,
            r#""model":"nvme"}"#,
        ],
    );
    // A histogram: buckets (not cumulative), count and sum.
    has(
        "perfabi.disk.dev.latency.bucket",
        &[
            "[Request latency: observations per bucket]",
            "Semantics: counter  Units: count",
            r#""kind":"histogram""#,
            r#""statistic":"bucket""#,
            "inst [0 or \"sda::0-100\"] value 1",
            "inst [1 or \"sda::101-1000\"] value 2",
            "inst [2 or \"sda::1001-10000\"] value 0",
            "inst [3 or \"sda::10001-inf\"] value 1",
            r#""lower_bound":101"#,
            r#""upper_bound":1000"#,
        ],
    );
    has(
        "perfabi.disk.dev.latency.count",
        &["Units: count", "inst [0 or \"sda\"] value 4"],
    );
    has(
        "perfabi.disk.dev.latency.sum",
        &["Units: microsec", "inst [0 or \"sda\"] value 21050"],
    );
    // A peak without dimension: singular, instant, the maximum; pages are
    // a count, and the label says pages.
    has(
        "perfabi.mem.rss_peak",
        &[
            "InDom: PM_INDOM_NULL",
            "Semantics: instant  Units: count",
            r#""kind":"peak""#,
            r#""unit":"pages""#,
            "a high-water mark",
            "    value 300",
        ],
    );
    has(
        "perfabi.net.rx_rate",
        &[
            "Semantics: instant  Units: Mbyte / sec",
            r#""kind":"gauge""#,
            r#""iface":"eth0""#,
            "inst [0 or \"eth0\"] value 12",
        ],
    );
    // A 1.0 counter: a family of one value.
    has(
        "perfabi.app.requests",
        &[
            "[app.requests, summed over CPUs]",
            "InDom: PM_INDOM_NULL",
            "an ABI 1.0 counter",
            "    value 7",
        ],
    );
    has(
        "perfabi.percpu.app.requests",
        &[
            "InDom: 502.0 ",
            r#"inst [0 or "cpu0"] labels {"agent":"perfabi","cpu":0,"#,
        ],
    );
    // Per CPU: instance and CPU; the values add up to the total.
    has(
        "perfabi.percpu.disk.dev.read",
        &[
            "[Kibibytes read from the device, on each CPU]",
            "inst [0 or \"sda::cpu0\"]",
            r#""cpu":1,"device":"sda","#,
        ],
    );
    let per_cpu = pmcd.values(&["perfabi.percpu.disk.dev.read"]);
    for (dev, total) in [("sda", 100), ("sdb", 200)] {
        let sum: u64 = per_cpu["perfabi.percpu.disk.dev.read"]
            .iter()
            .filter(|(i, _)| {
                i.as_deref()
                    .is_some_and(|i| i.starts_with(&format!("{dev}::cpu")))
            })
            .map(|(_, v)| v.parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, total, "{dev}: {per_cpu:?}");
    }
    // The instance domain's own help, asked for by its number.
    let indom = s["perfabi.disk.dev.read"]
        .split("InDom: ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let help = stdout(&run(pmcd.client("pminfo").args(["-tT", &indom])));
    println!("pminfo -tT {indom}:\n{help}");
    assert!(
        help.contains("instances of perfabi.disk.dev.read: one per device"),
        "{help}"
    );
    // Left out, and said; the agent's own metric of that part stays.
    let segment = stdout(&run(pmcd.client("pminfo").arg("perfabi.segment")));
    assert!(!segment.contains("perfabi.segment.mine"), "{segment}");
    assert!(segment.contains("perfabi.segment.nr_families"), "{segment}");
    assert_eq!(
        pmcd.value("perfabi.segment.nr_families").as_deref(),
        Some("6"),
        "4 families, 1 counter, and the one left out is counted"
    );
    let log = pmcd.agent_log();
    assert!(
        log.contains("family segment.mine left out: perfabi.segment.mine would be among the agent's own metrics"),
        "{log}"
    );
}

/// `pmNameInDom` of instance id `inst` of `metric`'s instance domain,
/// through PCP's Python binding.
fn name_of(pmcd: &Pmcd, metric: &str, inst: u32) -> Option<String> {
    const SCRIPT: &str = "import sys\nfrom pcp import pmapi\n\
        c = pmapi.pmContext(pmapi.c_api.PM_CONTEXT_HOST, sys.argv[1])\n\
        d = c.pmLookupDescs(c.pmLookupName(sys.argv[2]))[0]\n\
        try:\n    print(c.pmNameInDom(d, int(sys.argv[3])))\n\
        except pmapi.pmErr as e:\n    print('ERR', e)\n";
    let out = stdout(&run(pcp_python(&pmcd.dir).args([
        "-c",
        SCRIPT,
        &pmcd.host(),
        metric,
        &inst.to_string(),
    ])));
    let out = out.trim();
    assert!(!out.is_empty(), "no answer naming {metric} {inst}");
    (!out.starts_with("ERR")).then(|| out.to_string())
}

#[test]
fn a_device_added_and_removed_changes_the_instance_domain_without_restarting_pmcd() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let f = families(&seg);
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    let agent = pmcd.agent_pid().unwrap();
    let insts = || {
        inst_ids(&stdout(&run(pmcd
            .client("pminfo")
            .args(["-f", "perfabi.disk.dev.read"]))))
    };
    let named = |v: &[(i64, &str)]| -> Vec<(i64, String)> {
        v.iter().map(|(i, n)| (*i, n.to_string())).collect()
    };
    assert_eq!(insts(), named(&[(0, "sda"), (1, "sdb")]));
    // Hot-plugged: a new device, the writer's next number.
    let sdc = f.w.add_member(f.read, "sdc", &[("model", "usb")]).unwrap();
    f.w.member_add(&sdc, 5).unwrap();
    assert_eq!(insts(), named(&[(0, "sda"), (1, "sdb"), (2, "sdc")]));
    assert_eq!(
        pmcd.values(&["perfabi.disk.dev.read"])["perfabi.disk.dev.read"][2],
        (Some("sdc".into()), "5".into())
    );
    let labels = stdout(&run(pmcd
        .client("pminfo")
        .args(["-l", "perfabi.disk.dev.read"])));
    assert!(
        labels.contains(r#""device":"sdc","#) && labels.contains(r#""model":"usb""#),
        "{labels}"
    );
    // Unplugged: gone from the instance domain and the per-CPU one.
    f.w.del_member(&f.members[1]).unwrap();
    assert_eq!(insts(), named(&[(0, "sda"), (2, "sdc")]));
    let per_cpu = stdout(&run(pmcd
        .client("pminfo")
        .args(["-f", "perfabi.percpu.disk.dev.read"])));
    assert!(!per_cpu.contains("sdb::"), "{per_cpu}");
    // A client naming the instances of an earlier fetch still gets the
    // gone device's name for its id (never given to another); an id never
    // given has none.
    assert_eq!(
        name_of(&pmcd, "perfabi.disk.dev.read", 1).as_deref(),
        Some("sdb")
    );
    assert_eq!(name_of(&pmcd, "perfabi.disk.dev.read", 99), None);
    // Back (in its old member slot): its old id (the writer keeps its
    // number, the agent its id).
    let sdb = f.w.add_member(f.read, "sdb", &[]).unwrap();
    f.w.member_add(&sdb, 1).unwrap();
    assert_eq!(insts(), named(&[(0, "sda"), (1, "sdb"), (2, "sdc")]));
    // A new writer numbers the devices anew (sdc 0, sda 1): each name keeps
    // its id, and sdc's new number is not given to sda.
    drop(f);
    let w = Writer::create(&seg, &config()).unwrap();
    let read = w
        .add_family(&FamilySpec::new(
            "disk.dev.read",
            "Kibibytes read",
            "device",
            Kind::Counter,
            Unit::KIB,
        ))
        .unwrap();
    for dev in ["sdc", "sda", "sdd"] {
        w.add_member(read, dev, &[]).unwrap();
    }
    eventually(5, "the agent follows the new writer", || {
        insts() == named(&[(2, "sdc"), (0, "sda"), (3, "sdd")])
    });
    // All without a restart of pmcd or of the agent.
    assert!(pmcd.alive());
    assert_eq!(pmcd.agent_pid(), Some(agent));
    let log = pmcd.agent_log();
    assert_eq!(
        log.matches("serving ").count() - log.matches("serving no values").count(),
        1,
        "one agent start: {log}"
    );
    drop(w);
}

#[test]
fn a_ten_second_pmlogger_archive_replays_in_pmrep_with_units_and_instances() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let f = Arc::new(families(&seg));
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    // sda reads 100 KiB/s and sdb 200 KiB/s; sda sees 10 requests of
    // 700 µs a second.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (f, stop) = (f.clone(), stop.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let due = (t0.elapsed().as_secs_f64() * 10.0) as u64;
                while n < due {
                    f.w.member_add(&f.members[0], 10).unwrap();
                    f.w.member_add(&f.members[1], 20).unwrap();
                    f.w.observe(&f.members[2], 700).unwrap();
                    n += 1;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let cfg = dir.path().join("pmlogger.config");
    std::fs::write(
        &cfg,
        "log mandatory on every 1 second {\n    perfabi.disk\n    perfabi.mem\n}\n",
    )
    .unwrap();
    let archive = dir.path().join("archive");
    let t = Instant::now();
    let out = run(pmcd
        .client("pmlogger")
        .arg("-c")
        .arg(&cfg)
        .args(["-T", "10sec"])
        .arg("-l")
        .arg(dir.path().join("pmlogger.log"))
        .arg(&archive));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "pmlogger: {out:?}\n{}",
        std::fs::read_to_string(dir.path().join("pmlogger.log")).unwrap_or_default()
    );
    println!("pmlogger ran {:?}", t.elapsed());
    let pmrep = |args: &[&str]| {
        let o = run(pmrep(dir.path()).arg("-a").arg(&archive).args(args));
        let text = stdout(&o);
        println!("pmrep {}\n{text}", args.join(" "));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        text
    };
    // Rates (counters are rate-converted): instances in the second header
    // row, units in the third, then every logged sample (-u).
    let rates = pmrep(&["-u", "perfabi.disk.dev.read"]);
    let rows: Vec<Vec<&str>> = rates
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[1], ["sda", "sdb"], "{rates}");
    assert_eq!(rows[2], ["Kbyte/s", "Kbyte/s"], "{rates}");
    let samples: Vec<(f64, f64)> = rows[3..]
        .iter()
        .filter_map(|r| Some((r.first()?.parse().ok()?, r.get(1)?.parse().ok()?)))
        .collect();
    assert!(samples.len() >= 8, "10 s at 1 s: {rates}");
    for (a, b) in &samples {
        assert!(
            (a - 100.0).abs() < 15.0 && (b - 200.0).abs() < 30.0,
            "{rates}"
        );
    }
    // Raw values in the metrics' own units, a histogram's buckets by name.
    let raw = pmrep(&[
        "-u",
        "-r",
        "-w",
        "16",
        "perfabi.disk.dev.latency",
        "perfabi.mem.rss_peak",
    ]);
    let rows: Vec<Vec<&str>> = raw
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[1],
        [
            "sda::0-100",
            "sda::101-1000",
            "sda::1001-10000",
            "sda::10001-inf",
            "sda",
            "sda"
        ],
        "{raw}"
    );
    assert_eq!(
        rows[2],
        ["count", "count", "count", "count", "count", "microsec", "count"],
        "{raw}"
    );
    let last: Vec<u64> = rows
        .last()
        .unwrap()
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    let (buckets, count, sum, peak) = (&last[..4], last[4], last[5], last[6]);
    assert_eq!(buckets.iter().sum::<u64>(), count, "{raw}");
    assert!(count >= 4 + 80, "{raw}");
    assert_eq!(sum, 21050 + 700 * (count - 4), "{raw}");
    assert_eq!(peak, 300, "{raw}");
}

/// `/proc/meminfo`'s value of `key`, in KiB.
fn meminfo_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_ascii_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/meminfo"))
}

#[test]
fn the_exporters_device_and_memory_families_are_pcp_metrics_with_no_extra_work() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _exporter = perfabi_test_harness::KillOnDrop(
        Command::new(exportd())
            .args(["--interval", "0.2", "--path"])
            .arg(&seg)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    eventually(10, "perfabi-exportd creates its segment", || seg.exists());
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    // Whole disks with a medium, as /sys/block lists them, by the names
    // PCP's Linux agent gives them, with the table's help and units.
    let disks = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir("/sys/block")
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| std::fs::read_to_string(p.join("size")).is_ok_and(|s| s.trim() != "0"))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let instances = |metric: &str| -> Vec<String> {
        let mut v: Vec<String> = pmcd
            .values(&[metric])
            .remove(metric)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(i, _)| i)
            .collect();
        v.sort();
        v
    };
    eventually(
        5,
        "perfabi.disk.dev.read has every disk of /sys/block",
        || instances("perfabi.disk.dev.read") == disks(),
    );
    assert!(
        instances("perfabi.network.interface.in.bytes").contains(&"lo".to_string()),
        "{:?}",
        instances("perfabi.network.interface.in.bytes")
    );
    let desc = stdout(&run(pmcd.client("pminfo").args([
        "-dT",
        "perfabi.disk.dev.read_bytes",
        "perfabi.mem.physmem",
    ])));
    assert!(desc.contains("Units: byte"), "{desc}");
    assert!(desc.contains("Units: Kbyte"), "{desc}");
    assert!(desc.contains("Semantics: counter"), "{desc}");
    assert!(desc.contains("Semantics: instant"), "{desc}");
    assert!(desc.contains("Help:"), "{desc}");
    // A value that does not change: the machine's memory, in KiB.
    assert_eq!(
        pmcd.value("perfabi.mem.physmem"),
        Some(meminfo_kib("MemTotal").to_string())
    );
    // Interrupt lines per CPU, named as the README's table says.
    let percpu = instances("perfabi.percpu.kernel.interrupts.other");
    assert!(percpu.iter().any(|i| i.starts_with("LOC::")), "{percpu:?}");
}
