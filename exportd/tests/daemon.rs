//! perfabi-exportd as a process: values against /proc, lifecycle.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use perfabi_reader::{Error, Options, Segment};
use perfabi_test_harness::deadline::Deadline;
use support::*;

/// Microseconds per /proc/stat clock tick (USER_HZ).
fn ticks_us() -> u64 {
    1_000_000 / rustix::param::clock_ticks_per_second()
}

/// Per-CPU `user` and `system` times of /proc/stat, in microseconds.
fn proc_stat() -> Vec<(u64, u64)> {
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let f: Vec<u64> = l
                .split_ascii_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            (f[0] * ticks_us(), f[2] * ticks_us())
        })
        .collect()
}

#[test]
fn published_host_values_match_proc_stat_read_in_the_same_interval() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let child = start(&path, &[]);
    let mut seg = Segment::open(&path).unwrap();
    let mut checked = 0;
    for _ in 0..5 {
        let before = proc_stat();
        // Wait for a refresh that started after `before` was read.
        let r0 = seg.counter("exportd.refreshes").unwrap().total;
        let until = Deadline::witness();
        while seg.counter("exportd.refreshes").unwrap().total < r0 + 2 && !until.passed() {
            std::thread::sleep(Duration::from_millis(5));
        }
        until.assert(
            seg.counter("exportd.refreshes").unwrap().total >= r0 + 2,
            "a refresh after /proc/stat was read",
        );
        let user = member(&mut seg, "kernel.cpu.time", "user").unwrap();
        let system = member(&mut seg, "kernel.cpu.time", "system").unwrap();
        let after = proc_stat();
        for (cpu, ((b, a), (u, s))) in before
            .iter()
            .zip(&after)
            .zip(user.per_cpu.iter().zip(&system.per_cpu))
            .enumerate()
        {
            assert!(
                b.0 <= *u && *u <= a.0,
                "cpu{cpu} user: {} <= {u} <= {}",
                b.0,
                a.0
            );
            assert!(
                b.1 <= *s && *s <= a.1,
                "cpu{cpu} system: {} <= {s} <= {}",
                b.1,
                a.1
            );
            checked += 1;
        }
    }
    let out = stop(child);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("host statistics: {checked} per-CPU user/system pairs lay between /proc/stat read before and after");
}

#[test]
fn softirqs_and_vmstat_are_published() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let child = start(&path, &["--vmstat", "pgfault", "--vmstat", "nr_free_pages"]);
    let mut seg = Segment::open(&path).unwrap();
    let snap = seg.snapshot().unwrap();
    let sirq = snap.family("kernel.softirqs").unwrap();
    assert_eq!(sirq.dimension, "kind");
    assert!(sirq.member("timer").is_some(), "{:?}", sirq.members);
    assert_eq!(sirq.unit, perfabi::Unit::COUNT);
    let pf = member(&mut seg, "mem.vmstat.pgfault", "").unwrap();
    assert!(
        pf.total > 0 && pf.per_cpu[1..].iter().all(|&v| v == 0),
        "machine-wide values sit on CPU 0"
    );
    let free = member(&mut seg, "mem.vmstat.nr_free_pages", "").unwrap();
    assert_eq!(free.kind, perfabi::Kind::Gauge);
    let snap = seg.snapshot().unwrap();
    assert_eq!(
        snap.family("mem.vmstat.nr_free_pages").unwrap().unit,
        perfabi::Unit::PAGES
    );
    let time = snap.family("kernel.cpu.time").unwrap();
    assert_eq!(
        (time.dimension.as_str(), time.unit),
        ("mode", perfabi::Unit::US)
    );
    stop(child);
}

#[test]
fn one_daemon_per_path_and_bad_configuration_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let first = start(&path, &[]);
    let second = run(&["--path", path.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(3));
    let msg = String::from_utf8_lossy(&second.stderr);
    assert!(
        msg.contains("already writes") && msg.contains(&first.id().to_string()),
        "{msg}"
    );
    stop(first);

    let fresh = dir.path().join("fresh");
    for bad in [
        vec!["--interval", "0"],
        vec!["--interval", "nan"],
        vec!["--vmstat", "no_such_counter"],
        vec!["--max-instances", "0"],
        vec!["--source", "replay"],
        vec!["--damon-pid", "1"],
        vec!["--source", "sysfs", "--damon-min-regions", "2"],
        vec!["--source", "tracepoint", "--perf-pages", "3"],
        vec!["--damon-sample-us", "0"],
        vec!["--replay", "/nonexistent/record"],
    ] {
        let mut args = vec!["--path", fresh.to_str().unwrap()];
        args.extend(&bad);
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
        assert!(!fresh.exists(), "{bad:?} created the segment");
        assert!(
            !dir.path().join("fresh.lock").exists(),
            "{bad:?} created the lock"
        );
    }
    let out = run(&["--path", "/nonexistent/dir/seg"]);
    assert_eq!(out.status.code(), Some(2));
    // A usage error (clap's message, with the possible values) is exit 2 too.
    let out = run(&["--path", fresh.to_str().unwrap(), "--source", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("possible values: none, auto, tracepoint, sysfs, replay"));
    assert!(!fresh.exists());
}

/// At stop, and every `--cpu-report`, one line of the daemon's own CPU use
/// from /proc/self/stat.
#[test]
fn the_daemon_prints_its_cpu_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let child = start(&path, &["--cpu-report", "0.2"]);
    // At least 0.7 s and 5 refreshes (at --interval 0.1), however long a
    // busy machine keeps the daemon waiting for them.
    let mut seg = Segment::open(&path).unwrap();
    let refreshes = |seg: &mut Segment| seg.counter("exportd.refreshes").map_or(0, |c| c.total);
    let until = Deadline::witness();
    while until.elapsed() < Duration::from_millis(700)
        || (refreshes(&mut seg) < 6 && !until.passed())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    until.assert(refreshes(&mut seg) >= 6, "6 refreshes");
    let out = stop(child);
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    let used: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("perfabi-exportd: used "))
        .collect();
    assert!(used.len() >= 2, "{log}");
    let (last, periodic) = used.split_last().unwrap();
    // A percentage, the wall time, both times and the refreshes.
    let re = |l: &str| -> Option<(f64, f64, u64)> {
        let (pct, rest) = l.split_once("% of a core over ")?;
        let rest = rest.strip_prefix("the last ").unwrap_or(rest);
        let (wall, rest) = rest.split_once(" s (utime ")?;
        let (_, rest) = rest.split_once(" s, stime ")?;
        let (_, rest) = rest.split_once(" s, ")?;
        let n = rest
            .strip_suffix(" refreshes)")
            .or_else(|| rest.strip_suffix(" refresh)"))?;
        Some((pct.parse().ok()?, wall.parse().ok()?, n.parse().ok()?))
    };
    // Each stretch ends with the first refresh at least 0.2 s after its
    // start: 0.2 or 0.3 s at --interval 0.1, longer only if the daemon
    // was kept off the CPU.
    for l in periodic {
        assert!(l.contains("% of a core over the last "), "{l}");
        let (pct, wall, n) = re(l).unwrap_or_else(|| panic!("{l}"));
        assert!((0.0..=200.0).contains(&pct) && wall >= 0.2 && n >= 1, "{l}");
    }
    // The whole run, since the daemon started.
    assert!(!last.contains("over the last"), "{last}");
    let (pct, wall, n) = re(last).unwrap_or_else(|| panic!("{last}"));
    assert!((0.0..=200.0).contains(&pct), "{last}");
    assert!((0.6..30.0).contains(&wall), "{last}");
    assert!(n >= 5, "{last}");
    assert!(
        log.find("used ").unwrap() < log.find("marked closed").unwrap(),
        "{log}"
    );
    let bad = run(&["--path", path.to_str().unwrap(), "--cpu-report", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--cpu-report 0 must be between"));
}

#[test]
fn sigterm_closes_and_a_restart_is_followed_by_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let child = start(&path, &[]);
    let opts = Options {
        recheck: Duration::from_millis(20),
        ..Options::default()
    };
    let mut seg = Segment::open_with(&path, opts).unwrap();
    let epoch1 = seg.info().unwrap().header.epoch;
    assert!(member(&mut seg, "kernel.cpu.time", "user").is_ok());
    let out = stop(child);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("marked closed"));
    assert!(matches!(seg.snapshot(), Err(Error::Closed)));

    let child = start(&path, &[]);
    let end = Instant::now() + Duration::from_secs(60);
    let c = loop {
        match member(&mut seg, "kernel.cpu.time", "user") {
            Ok(c) => break c,
            Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("the restarted daemon was not followed: {e}"),
        }
    };
    let epoch2 = seg.info().unwrap().header.epoch;
    assert_ne!(epoch1, epoch2);
    println!(
        "restart followed: epoch {epoch1:#x} -> {epoch2:#x}, kernel.cpu.time[user] total {} us",
        c.total
    );
    stop(child);
}

/// The shipped record, replayed once, fast: the aggregation a reader then
/// finds is, region for region, a run of consecutive events of the file.
#[test]
fn replay_publishes_exactly_the_records_regions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let record =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("records/guest-6.12-vaddr-hot4of64.trace");
    let text = std::fs::read_to_string(&record).unwrap();
    // As many aggregations as the record holds (a pause in the count is
    // no end: a busy machine can keep the daemon off the CPU for a while).
    let whole = perfabi_record::damon::parse(
        text.as_bytes(),
        u64::MAX,
        perfabi::damon::Intervals {
            sample_us: 5000,
            aggr_us: 100_000,
        },
    )
    .unwrap()
    .aggregations
    .len() as u64;
    let child = replay_once_fast(&path, &record);
    let mut seg = Segment::open(&path).unwrap();
    let published = |seg: &mut Segment| {
        seg.counter("exportd.damon_aggregations")
            .map(|c| c.total)
            .unwrap_or(0)
    };
    let until = Deadline::witness();
    while published(&mut seg) < whole && !until.passed() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = published(&mut seg);
    until.assert(
        last == whole,
        format_args!("the whole record published: {last} of {whole} aggregations"),
    );
    let aggs = seg.damon().unwrap().aggregations;
    assert_eq!(aggs.len(), 1, "one (kdamond, target) in the record");
    let a = &aggs[0];
    assert_eq!((a.monitor_id, a.target_id, a.aggregation), (160, 0, last));
    assert_eq!(
        (a.intervals.sample_us, a.intervals.aggr_us),
        (5000, 100_000)
    );
    let lines: Vec<String> = a
        .regions
        .iter()
        .map(|r| {
            format!(
                "target_id=0 nr_regions={} {}-{}: {} {}",
                a.regions.len(),
                r.start,
                r.end,
                r.nr_accesses,
                r.age
            )
        })
        .collect();
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once("damon_aggregated: ").map(|(_, p)| p.trim()))
        .collect();
    let found = events
        .windows(lines.len())
        .any(|w| w.iter().zip(&lines).all(|(e, l)| e == l));
    assert!(
        found,
        "the published regions are not a run of the record's events:\n{}",
        lines.join("\n")
    );
    println!(
        "replay: {last} aggregations published; the latest ({} regions) matches the record exactly",
        a.regions.len()
    );
    stop(child);
}

/// damo's own record of the same trace (`damo convert_record_format`,
/// json_compressed), replayed: the latest published aggregation is damo's
/// last snapshot, region for region.
#[test]
fn replay_of_a_damo_record_publishes_its_snapshots() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let record = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("records/guest-6.12-vaddr-hot4of64.damo.json.zlib");
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(std::fs::File::open(&record).unwrap())
        .read_to_end(&mut json)
        .unwrap();
    let damo: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let snapshots = damo[0]["snapshots"].as_array().unwrap();
    let num =
        |v: &serde_json::Value| -> u64 { v.as_str().unwrap().replace(',', "").parse().unwrap() };
    let last: Vec<(u64, u64, u64, u64)> = snapshots.last().unwrap()["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                num(&r["start"]),
                num(&r["end"]),
                r["nr_accesses"]["samples"].as_u64().unwrap(),
                num(&r["age"]["aggr_intervals"]),
            )
        })
        .collect();
    let child = replay_once_fast(&path, &record);
    let mut seg = Segment::open(&path).unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    let published = loop {
        let n = seg
            .counter("exportd.damon_aggregations")
            .map(|c| c.total)
            .unwrap_or(0);
        if n == snapshots.len() as u64 {
            break n;
        }
        assert!(
            Instant::now() < end,
            "{n} of {} snapshots published",
            snapshots.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let aggs = seg.damon().unwrap().aggregations;
    assert_eq!(aggs.len(), 1);
    let a = &aggs[0];
    // damo does not record the kdamond's thread: its index is the monitor.
    assert_eq!(
        (a.monitor_id, a.target_id, a.aggregation),
        (0, 0, published)
    );
    let got: Vec<_> = a
        .regions
        .iter()
        .map(|r| (r.start, r.end, u64::from(r.nr_accesses), u64::from(r.age)))
        .collect();
    assert_eq!(got, last);
    println!(
        "damo replay: {published} snapshots published; the last matches damo's, {} regions",
        got.len()
    );
    stop(child);
}

/// A recording whose second aggregation is malformed (overlapping regions)
/// and whose third changes the intervals: the replay skips the bad one,
/// counts it, logs it once, goes on, and publishes each aggregation with its
/// own intervals.
#[test]
fn a_bad_aggregation_is_skipped_and_counted_and_each_keeps_its_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let rec = dir.path().join("rec.jsonl");
    let region = |start, end| perfabi::damon::Region {
        start,
        end,
        nr_accesses: 4,
        age: 1,
    };
    let agg = |n, sample_us, aggr_us, regions| perfabi::damon::Aggregation {
        monitor_id: 5,
        target_id: 1,
        aggregation: n,
        intervals: perfabi::damon::Intervals { sample_us, aggr_us },
        regions,
    };
    let line = |t_ns, a| {
        perfabi_record::to_line(&perfabi_record::Snapshot {
            t_ns,
            epoch: "0x1".into(),
            generation: 1,
            counters: Default::default(),
            damon: vec![a],
        })
    };
    let text = [
        line(0, agg(1, 5_000, 100_000, vec![region(0, 4096)])),
        line(
            100_000_000,
            agg(
                2,
                5_000,
                100_000,
                vec![region(0, 8192), region(4096, 12288)],
            ),
        ),
        line(
            200_000_000,
            agg(
                3,
                10_000,
                200_000,
                vec![region(0, 4096), region(4096, 8192)],
            ),
        ),
    ]
    .join("\n");
    std::fs::write(&rec, text).unwrap();
    let child = replay_once_fast(&path, &rec);
    let mut seg = Segment::open(&path).unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let published = seg.counter("exportd.damon_aggregations").unwrap().total;
        let rejected = seg
            .counter("exportd.damon_rejected_aggregations")
            .unwrap()
            .total;
        if published + rejected == 3 {
            assert_eq!((published, rejected), (2, 1));
            break;
        }
        assert!(
            Instant::now() < end,
            "{published} published, {rejected} rejected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let aggs = seg.damon().unwrap().aggregations;
    assert_eq!(
        aggs[0].regions.len(),
        2,
        "the third aggregation is the latest"
    );
    assert_eq!(
        (aggs[0].intervals.sample_us, aggs[0].intervals.aggr_us),
        (10_000, 200_000)
    );
    let out = stop(child);
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(log.matches("skipped an aggregation").count(), 1, "{log}");
    assert!(!log.contains("DAMON source stopped"), "{log}");
}
