//! perfabi-cat as a user runs it: JSON, OpenMetrics through a real parser,
//! --watch rates against a writer of known rate, DAMON output, exit codes.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi::{Semantics, ValueType};
use perfabi_shm::writer::{Config, Writer};
use support::*;

fn cat(args: &[&str]) -> Output {
    Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .args(args)
        .output()
        .expect("run perfabi-cat")
}

/// Run by other tests as a child writer process (see `support`).
#[test]
#[ignore = "helper: the writer process that other tests start and kill"]
fn child_writer() {
    run_child_writer();
}

fn sample_writer(path: &Path) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            max_instances: 32,
            damon_capacity: 64,
            ..Config::default()
        },
    )
    .unwrap();
    let rx = w.add("net.rx_bytes", "bytes", Semantics::Counter).unwrap();
    let q = w
        .add_typed("queue.depth", "", Semantics::Instant, ValueType::I64)
        .unwrap();
    let t = w
        .add("requests_total", "count", Semantics::Counter)
        .unwrap();
    w.adjust(rx, 123_456).unwrap();
    w.set(q, -4).unwrap();
    w.adjust(t, 9).unwrap();
    let iv = Intervals {
        sample_us: 5_000,
        aggr_us: 100_000,
    };
    let regions: Vec<Region> = (0..8u64)
        .map(|i| Region {
            start: i << 20,
            end: (i + 1) << 20,
            nr_accesses: if i == 2 { 20 } else { 0 },
            age: 1,
        })
        .collect();
    w.publish_damon(&Aggregation::new(5, 1, iv, regions.to_vec()))
        .unwrap();
    w
}

#[test]
fn names_that_would_be_one_series_are_refused_and_near_ones_all_parse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = counters_writer(&path, 64);
    // Close to each other but distinct to every consumer.
    let near = [
        ("x", Semantics::Counter),
        ("x_totals", Semantics::Counter),
        ("x.total_bytes", Semantics::Counter),
        ("ab", Semantics::Counter),
        ("a.b", Semantics::Counter),
        ("lat.p99", Semantics::Instant),
        ("q_total", Semantics::Instant),
        ("y_createdx", Semantics::Counter),
    ];
    for (name, sem) in near {
        let id = w.add(name, "", sem).unwrap();
        w.adjust(id, 3).unwrap();
    }
    // One series to OpenMetrics (and one PCP name): refused by the writer.
    for clash in [
        "a_b",
        "x_total",
        "x.created",
        "q",
        "q_total_count",
        "ab_info",
        "lat_p99_sum",
    ] {
        assert_eq!(
            w.add(clash, "", Semantics::Counter).map(drop),
            Err(perfabi::Error::DuplicateName),
            "{clash}"
        );
    }
    let out = cat(&[path.to_str().unwrap(), "--openmetrics"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = parse_openmetrics(&out.stdout).unwrap();
    assert_eq!(text.lines().count(), near.len(), "{text}");
    for sample in [
        "perfabi_x_total",
        "perfabi_x_totals_total",
        "perfabi_a_b_total",
        "perfabi_ab_total",
        "perfabi_q_total",
    ] {
        assert!(
            text.lines().any(|l| l.split(' ').nth(1) == Some(sample)),
            "{sample}: {text}"
        );
    }

    // A writer that does not keep the rule (here: a live name patched to
    // clash with another's) makes a corrupt segment, never a page the
    // parser refuses.
    let bytes = std::fs::read(&path).unwrap();
    let layout = perfabi::validate(&bytes).unwrap();
    let snap = w.snapshot().unwrap();
    let ab = snap.find("ab").unwrap().slot as usize;
    let at = layout.instance_word(ab) * 8;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"a_b\0", at as u64).unwrap();
    let out = cat(&[path.to_str().unwrap(), "--openmetrics"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{err}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(err.contains("one name to consumers"), "{err}");
    assert!(out.stdout.is_empty());
    println!(
        "{} near names parse; 7 clashing names refused; a forged clash: {}",
        near.len(),
        err.trim()
    );
}

#[test]
fn a_backslash_in_a_unit_reaches_the_help_text_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = counters_writer(&path, 4);
    // A unit may hold any printable byte: here a backslash and an `n`,
    // which unescaped would read as a newline.
    w.add("odd", r"a\nb\", Semantics::Counter).unwrap();
    let out = cat(&[path.to_str().unwrap(), "--openmetrics"]);
    assert!(out.status.success());
    let script = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        for f in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   print(f.name, repr(f.documentation))\n";
    let parsed = python(script, &out.stdout);
    let text = String::from_utf8_lossy(&parsed.stdout);
    assert!(
        parsed.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&parsed.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        text.trim(),
        r"perfabi_odd 'perfabi counter odd (a\\nb\\)'",
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn json_parses_and_matches_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = sample_writer(&path);
    let out = cat(&[path.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let counters = doc["counters"].as_array().unwrap();
    let by_name: HashMap<_, _> = counters
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c))
        .collect();
    let snap = w.snapshot().unwrap();
    for i in &snap.instances {
        let c = by_name[i.name.as_str()];
        match i.value_type {
            ValueType::U64 => assert_eq!(c["total"].as_u64(), Some(snap.total(i))),
            ValueType::I64 => assert_eq!(c["total"].as_i64(), Some(snap.total(i) as i64)),
        }
        assert_eq!(c["per_cpu"].as_array().unwrap().len(), snap.nr_cpus);
    }
    assert_eq!(by_name["queue.depth"]["total"], -4);
    assert_eq!(doc["segment"]["liveness"]["state"], "alive");
    println!(
        "perfabi-cat --json: {} counters parsed and equal to the writer's snapshot",
        counters.len()
    );
}

#[test]
fn openmetrics_passes_the_prometheus_client_parser() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = sample_writer(&path);
    for per_cpu in [false, true] {
        let mut args = vec![path.to_str().unwrap(), "--openmetrics"];
        if per_cpu {
            args.push("--cpu");
        }
        let out = cat(&args);
        assert!(out.status.success());
        let text = parse_openmetrics(&out.stdout).unwrap();
        let snap = w.snapshot().unwrap();
        let rx = snap.find("net.rx_bytes").unwrap();
        if per_cpu {
            for (cpu, v) in snap.per_cpu(rx).enumerate() {
                assert!(
                    text.contains(&format!("counter perfabi_net_rx_bytes_total {cpu} {v}")),
                    "{text}"
                );
            }
        } else {
            assert!(
                text.contains("counter perfabi_net_rx_bytes_total - 123456"),
                "{text}"
            );
            assert!(text.contains("gauge perfabi_queue_depth - -4"), "{text}");
            assert!(
                text.contains("counter perfabi_requests_total - 9"),
                "{text}"
            );
        }
        println!(
            "OpenMetrics (per_cpu={per_cpu}) parsed by prometheus_client: {} samples",
            text.lines().count()
        );
    }
}

#[test]
fn watch_rates_match_a_writer_of_known_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let rate = 5_000u64;
    let mut child = spawn_writer(&path, rate);
    let out = cat(&[
        path.to_str().unwrap(),
        "--watch",
        "1",
        "--count",
        "3",
        "--json",
    ]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let got = v["rates"]["ticks"].as_f64().unwrap();
        let err = (got - rate as f64).abs() / rate as f64;
        println!(
            "--watch rate {got:.1}/s for a writer at {rate}/s: {:.2}% off",
            err * 100.0
        );
        assert!(err < 0.05, "rate {got} is more than 5% off {rate}");
    }
    assert_eq!(text.lines().count(), 3);
}

#[test]
fn damon_info_and_table_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = sample_writer(&path);
    let p = path.to_str().unwrap();
    let out = String::from_utf8(cat(&[p, "--damon", "--width", "32"]).stdout).unwrap();
    assert!(
        out.contains("monitor 5 target 1 aggregation 1: 8 regions"),
        "{out}"
    );
    let heat = out.lines().find(|l| l.starts_with("heat |")).unwrap();
    assert_eq!(
        &heat[6..38],
        &format!("{}{}{}", " ".repeat(8), "@".repeat(4), " ".repeat(20)),
        "{heat}"
    );
    let j: serde_json::Value =
        serde_json::from_slice(&cat(&[p, "--damon", "--json"]).stdout).unwrap();
    assert_eq!(j["aggregations"][0]["regions"][2]["frequency"], 1.0);
    let info = String::from_utf8(cat(&[p, "--info"]).stdout).unwrap();
    assert!(
        // A writer's default geometry has family tables: ABI 1.1.
        info.contains("abi:                1.1") && info.contains("liveness:           Alive"),
        "{info}"
    );
    let table = String::from_utf8(cat(&[p, "--cpu"]).stdout).unwrap();
    assert!(table.lines().next().unwrap().contains("cpu0"), "{table}");
    // Human units: 123,456 bytes.
    assert!(
        table.contains("net.rx_bytes") && table.contains("120.6 KiB"),
        "{table}"
    );
}

#[test]
fn errors_are_one_line_with_documented_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let out = cat(&[missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1);
    assert!(err.contains("is the exporter running?"), "{err}");

    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0u8; 8192]).unwrap();
    let out = cat(&[junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8(out.stderr).unwrap().lines().count(), 1);

    assert_eq!(cat(&["--no-such-flag"]).status.code(), Some(2));
    let help = String::from_utf8(cat(&["--help"]).stdout).unwrap();
    assert!(help.contains("Exit status:"), "{help}");
}

/// Under a normally busy writer (support::LOAD_ENV) for 60 s: one-shot
/// perfabi-cat runs (table and DAMON) never fail, and a `--watch 0.1` running
/// all along never exits (a busy sample is skipped and said so).
#[test]
fn a_normally_busy_writer_fails_no_read_and_never_stops_a_watch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let cat_bin = perfabi_test_harness::workspace::perfabi_cat();
    let _writer = perfabi_test_harness::KillOnDrop(spawn_writer_with(
        &path,
        1000,
        &std::env::current_exe().unwrap(),
        |c| {
            c.env(LOAD_ENV, "1");
        },
    ));
    let mut watch = perfabi_test_harness::KillOnDrop(
        Command::new(&cat_bin)
            .arg(&path)
            .args(["--watch", "0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let start = std::time::Instant::now();
    let (mut runs, mut failed) = (0u32, Vec::new());
    while runs < 1000 || start.elapsed() < std::time::Duration::from_secs(60) {
        let mut args = vec![path.to_str().unwrap()];
        if runs % 4 == 3 {
            args.push("--damon");
        }
        let out = Command::new(&cat_bin).args(&args).output().unwrap();
        if !out.status.success() {
            failed.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        runs += 1;
    }
    let still = watch.0.try_wait().unwrap().is_none();
    watch.0.kill().unwrap();
    let out = std::mem::replace(&mut watch.0, Command::new("true").spawn().unwrap())
        .wait_with_output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let samples = text.matches("--- ").count();
    let skipped = text.matches("sample skipped").count();
    println!(
        "busy writer, {:.0} s: {runs} one-shot runs, {} failed; --watch 0.1: {samples} samples, {skipped} skipped, running: {still}",
        start.elapsed().as_secs_f64(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} failed, first: {}",
        failed.len(),
        failed[0]
    );
    assert!(
        still,
        "--watch exited: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(samples >= 60, "{samples} samples in 60 s");
}

/// What --help says about a writer that is gone is what perfabi-cat does,
/// in every mode: exit 5 with one line, unless --allow-stale prints the
/// final values (exit 0); --info always describes the segment.
#[test]
fn a_gone_writer_fails_every_mode_unless_allow_stale() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    drop(sample_writer(&path)); // closed: its values are final
    let p = path.to_str().unwrap();
    let help = String::from_utf8(cat(&["--help"]).stdout).unwrap();
    assert!(
        help.contains("5  the segment is busy, its writer is gone"),
        "{help}"
    );
    for mode in [
        &[][..],
        &["--json"],
        &["--openmetrics"],
        &["--damon"],
        &["--watch", "0.1", "--count", "1"],
    ] {
        let mut args = vec![p];
        args.extend_from_slice(mode);
        let out = cat(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{mode:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("closed"), "{err}");
        args.push("--allow-stale");
        let out = cat(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{mode:?} --allow-stale: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = cat(&[p, "--allow-stale"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("net.rx_bytes"));
    let out = cat(&[p, "--info"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Closed"));
}

/// A segment busy for good (a writer dead mid-change): `--watch --count N`
/// ends after N samples, skipped ones included (the first ones too), each
/// said so.
#[test]
fn a_segment_busy_for_good_ends_a_counted_watch() {
    let dir = tempfile::tempdir().unwrap();
    let (live, busy) = (dir.path().join("live"), dir.path().join("busy"));
    let w = sample_writer(&live);
    busy_copy(&live, &busy);
    drop(w);
    let mut child = Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .args(["--watch", "0.05", "--count", "3", "--allow-stale"])
        .arg(&busy)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ended = wait_for(Duration::from_secs(10), || child.try_wait().unwrap());
    if ended.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("--count 3 on a segment busy for good never ended");
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?}: {text}", out.status);
    assert_eq!(text.matches("sample skipped").count(), 3, "{text}");
}

/// Lines a child writes to its stdout, as they come, read by a thread.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `limit` for a line of `rx` that `want` accepts; the lines
/// seen before it are appended to `seen`.
fn line_where(
    rx: &std::sync::mpsc::Receiver<String>,
    limit: Duration,
    seen: &mut Vec<String>,
    want: impl Fn(&str) -> bool,
) -> bool {
    let end = std::time::Instant::now() + limit;
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                let hit = want(&l);
                seen.push(l);
                if hit {
                    return true;
                }
            }
            Err(_) => return false,
        }
    }
    false
}

/// The owner truncates the segment to 0 bytes under a piped `--watch`,
/// and its writer creates it again a moment later: the samples in between
/// are skipped (said so), the watch goes on and reads the new segment, as
/// `--help` promises (exit 5, "truncated ... retry later", never exit 4,
/// "malformed"). A file that was never a segment is still exit 4.
#[test]
fn a_segment_truncated_to_nothing_costs_a_watch_samples_not_its_end() {
    watch_goes_on_after(|path| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(0)
            .unwrap();
    });
    // A file that never was a segment: still "malformed", exit 4.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let out = cat(&[empty.to_str().unwrap(), "--watch", "0.05", "--count", "2"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The header page zeroed in place (same file, same length): damage after
/// publication, which the writer repairs at its heartbeat (spec §11.5).
/// Piped `--watch` exited 4 ("bad magic") on it.
#[test]
fn a_header_zeroed_in_place_costs_a_watch_samples_not_its_end() {
    watch_goes_on_after(|path| {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(&[0u8; 4096], 0).unwrap();
    });
}

/// Piped `perfabi-cat --watch` on a live segment that `damage` then harms:
/// a sample is skipped, the watch goes on, and once the writer created its
/// segment again (its heartbeat, called by the test) the values are read
/// again.
fn watch_goes_on_after(damage: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    // No heartbeat promised and none sent by a thread: the segment is
    // created again only when this test calls `heartbeat`.
    let w = Writer::create(
        &path,
        &Config {
            max_instances: 8,
            damon_capacity: 0,
            heartbeat_interval: Duration::ZERO,
            auto_heartbeat: false,
            ..Config::default()
        },
    )
    .unwrap();
    let id = w.add("ticks", "count", Semantics::Counter).unwrap();
    w.adjust(id, 1).unwrap();
    let mut watch = perfabi_test_harness::KillOnDrop(
        Command::new(perfabi_test_harness::workspace::perfabi_cat())
            .arg(&path)
            .args(["--watch", "0.05"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let rx = lines_of(&mut watch.0);
    let mut seen = Vec::new();
    let limit = Duration::from_secs(30);
    assert!(
        line_where(&rx, limit, &mut seen, |l| l.starts_with("ticks")),
        "no sample: {seen:?}"
    );
    damage(&path);
    let skipped = line_where(&rx, limit, &mut seen, |l| l.contains("sample skipped"));
    let running = watch.0.try_wait().unwrap().is_none();
    // The writer notices and creates its segment again (a new epoch).
    assert!(matches!(
        w.heartbeat(),
        perfabi_shm::writer::Health::Recreated { .. }
    ));
    w.adjust(id, 1).unwrap();
    let mark = seen.len();
    let again = line_where(&rx, limit, &mut seen, |l| l.starts_with("ticks"));
    let still = watch.0.try_wait().unwrap();
    let _ = watch.0.kill();
    let mut err = String::new();
    if let Some(mut e) = watch.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    println!(
        "--watch across damage: {} lines, skipped said: {skipped}, running: {running}, read again: {again}",
        seen.len()
    );
    assert!(skipped && running, "exited: {still:?} {err} after {seen:?}");
    assert!(
        again && still.is_none(),
        "after the segment was created again: {still:?} {err} {:?}",
        &seen[mark..]
    );
}
