//! perfabi-prometheus against segments written in-process: both pages by
//! `Accept` (values, cumulative buckets, labels, metadata, each parsed by
//! prometheus_client), 503 for a truncated segment and 200 again once the
//! writer restarts, bounded requests, and a real Prometheus scraping it.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::parse;
use perfabi::{Buckets, FamilySpec, Kind, Semantics, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::forge::add_to_value;
use perfabi_test_harness::prometheus::{self, Prometheus};
use perfabi_test_harness::python::openmetrics_parsers;
use perfabi_test_harness::{readme, run_limited, workload, workspace, Paced};

mod common;

/// `perfabi-prometheus SEGMENT --listen 127.0.0.1:0`, and the address it
/// says it serves.
fn endpoint(segment: &Path) -> (common::Running, SocketAddr) {
    let e = common::start(segment, &[]);
    let addr = e.addr;
    (e, addr)
}

/// A response: status code, content type, body.
struct Page {
    status: u16,
    content_type: String,
    body: String,
}

/// Sends `request` as is on a new connection and reads the response (by
/// its `Content-Length`: the connection may be kept alive).
fn raw(addr: SocketAddr, request: &[u8]) -> Page {
    let mut s = common::connect(addr);
    let r = common::exchange(&mut s, request).unwrap();
    let length: usize = r
        .header("Content-Length")
        .expect("a Content-Length")
        .parse()
        .unwrap();
    assert_eq!(length, r.body.len(), "Content-Length");
    Page {
        status: r.status,
        content_type: r.header("Content-Type").unwrap_or("").to_string(),
        body: r.body,
    }
}

/// `GET path` with an `Accept` header if given.
fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> Page {
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{accept}\r\n")
            .as_bytes(),
    )
}

const OPENMETRICS: &str = "application/openmetrics-text;version=1.0.0,\
    application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn config() -> Config {
    Config {
        max_instances: 256,
        max_families: 8,
        max_members: 32,
        damon_capacity: 0,
        ..Config::default()
    }
}

/// A counter family with a label, a histogram, a gauge and a 1.0 counter.
fn families(path: &Path) -> Writer {
    let w = Writer::create(path, &config()).unwrap();
    let read = w
        .add_family(&FamilySpec::new(
            "disk.read_bytes",
            "Bytes \"read\"",
            "device",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    let sda = w.add_member(read, "sda", &[("model", "virtio")]).unwrap();
    w.member_add(&sda, 1 << 20).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "rpc.latency",
            "RPC latency",
            "",
            Unit::NS,
            Buckets::Explicit(vec![100, 1000, 10000]),
        ))
        .unwrap();
    let m = w.add_member(lat, "", &[]).unwrap();
    for (v, n) in [(50, 10), (500, 80), (5000, 10)] {
        for _ in 0..n {
            w.observe(&m, v).unwrap();
        }
    }
    let g = w
        .add_family(&FamilySpec::new(
            "queue.depth",
            "Queued",
            "",
            Kind::Gauge,
            Unit::NONE,
        ))
        .unwrap();
    let q = w.add_member(g, "", &[]).unwrap();
    w.member_set(&q, 7).unwrap();
    let t = w.add("old.ticks", "count", Semantics::Counter).unwrap();
    w.adjust(t, 9).unwrap();
    w
}

#[test]
fn both_formats_by_accept_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = families(&path);
    let (_e, addr) = endpoint(&path);

    let om = get(addr, "/metrics", Some(OPENMETRICS));
    assert_eq!(om.status, 200, "{}", om.body);
    assert_eq!(
        om.content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = get(addr, "/metrics", None);
    assert_eq!(text.status, 200, "{}", text.body);
    assert_eq!(
        text.content_type,
        "text/plain; version=0.0.4; charset=utf-8"
    );

    // OpenMetrics: family names, UNIT, escaped help, # EOF.
    for line in [
        "# TYPE perfabi_disk_read_bytes counter",
        "# UNIT perfabi_disk_read_bytes bytes",
        "# HELP perfabi_disk_read_bytes Bytes \\\"read\\\"",
        "perfabi_disk_read_bytes_total{device=\"sda\",model=\"virtio\"} 1048576",
        "# TYPE perfabi_rpc_latency histogram",
        "perfabi_rpc_latency_bucket{le=\"100\"} 10",
        "perfabi_rpc_latency_bucket{le=\"1000\"} 90",
        "perfabi_rpc_latency_bucket{le=\"10000\"} 100",
        "perfabi_rpc_latency_bucket{le=\"+Inf\"} 100",
        "perfabi_rpc_latency_count 100",
        "perfabi_rpc_latency_sum 90500",
        "# TYPE perfabi_queue_depth gauge",
        "perfabi_queue_depth 7",
        "perfabi_old_ticks_total 9",
    ] {
        assert!(
            om.body.lines().any(|l| l == line),
            "no {line:?} in\n{}",
            om.body
        );
    }
    assert!(om.body.ends_with("# EOF\n"));

    // Prometheus text: metadata named as the samples, no UNIT, no EOF.
    for line in [
        "# HELP perfabi_disk_read_bytes_total Bytes \"read\"",
        "# TYPE perfabi_disk_read_bytes_total counter",
        "perfabi_disk_read_bytes_total{device=\"sda\",model=\"virtio\"} 1048576",
        "# TYPE perfabi_rpc_latency histogram",
        "perfabi_rpc_latency_bucket{le=\"1000\"} 90",
        "# TYPE perfabi_old_ticks_total counter",
    ] {
        assert!(
            text.body.lines().any(|l| l == line),
            "no {line:?} in\n{}",
            text.body
        );
    }
    assert!(!text.body.contains("# UNIT") && !text.body.contains("# EOF"));
    println!(
        "PROMETHEUS-PAGES openmetrics {} bytes, text {} bytes",
        om.body.len(),
        text.body.len()
    );

    for py in &openmetrics_parsers("both_formats_by_accept_header") {
        // Versions differ in how they print a bound (`1000` or `1000.0`).
        let sorted = |s: String| {
            let mut v: Vec<String> = s.lines().map(|l| l.replace(".0'", "'")).collect();
            v.sort();
            v
        };
        let a = sorted(parse(py, "prometheus_client.openmetrics.parser", &om.body));
        let b = sorted(parse(py, "prometheus_client.parser", &text.body));
        for want in [
            "counter perfabi_disk_read_bytes_total [('device', 'sda'), ('model', 'virtio')] 1048576.0",
            "histogram perfabi_rpc_latency_bucket [('le', '1000')] 90.0",
            "gauge perfabi_queue_depth [] 7.0",
        ] {
            assert!(a.iter().any(|l| l == want), "{py} OpenMetrics: no {want:?} in\n{a:#?}");
        }
        // The text parser sees the same samples of the segment, of the
        // same types (the endpoint's own change between the two scrapes:
        // its counts, its CPU time).
        let segment = |v: &[String]| -> Vec<String> {
            v.iter()
                .filter(|l| {
                    l.split(' ').nth(1).is_some_and(|n| {
                        n.starts_with("perfabi_") && !n.starts_with("perfabi_exporter_")
                    })
                })
                .cloned()
                .collect()
        };
        assert_eq!(
            segment(&a),
            segment(&b),
            "{py}: OpenMetrics and text samples differ"
        );
        println!(
            "PROMETHEUS-PARSED {py}: {} samples, alike in both formats",
            a.len()
        );
    }

    // Prometheus' own tools: promtool parses the text page with the Go
    // client's parser and lints it (names, _total, help).
    let promtool = Path::new("/usr/bin/promtool");
    if perfabi_test_harness::need_file(
        "both_formats_by_accept_header_promtool",
        promtool,
        "apt-get install prometheus; tests/setup does",
    ) {
        let mut child = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.body.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            text.body
        );
        println!("PROMETHEUS-PROMTOOL the text page passes promtool check metrics");
    }

    // Index, 404, 405, bounded head.
    let index = get(addr, "/", None);
    assert_eq!(index.status, 200);
    assert!(index.body.contains("/metrics"), "{}", index.body);
    assert_eq!(get(addr, "/nope", None).status, 404);
    assert_eq!(
        raw(addr, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").status,
        405
    );
    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(10_000));
    assert_eq!(raw(addr, huge.as_bytes()).status, 431);
    let many: String = (0..100).map(|i| format!("X{i}: y\r\n")).collect();
    let req = format!("GET /metrics HTTP/1.1\r\n{many}\r\n");
    assert_eq!(raw(addr, req.as_bytes()).status, 431);
    assert_eq!(raw(addr, b"garbage\x01\r\n\r\n").status, 400);
}

#[test]
fn clients_trickling_their_heads_hold_no_worker_past_the_head_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = families(&path);
    let (_e, addr) = endpoint(&path);
    // As many tricklers as workers (2), one byte a second for 20 s.
    let tricklers: Vec<_> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            std::thread::spawn(move || {
                for b in b"GET /metrics HTTP/1.1\r\nX: ".iter().cycle().take(20) {
                    if s.write_all(&[*b]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let p = get(addr, "/metrics", None);
    let waited = t.elapsed();
    assert_eq!(p.status, 200);
    assert!(waited < Duration::from_secs(8), "waited {waited:?}");
    println!("PROMETHEUS-TRICKLE a scrape behind 2 trickling clients answered in {waited:.1?}");
    for t in tricklers {
        t.join().unwrap();
    }
}

/// Polls `GET /metrics` until its status is `status` (within 10 s).
fn until_status(addr: SocketAddr, status: u16) -> Page {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let p = get(addr, "/metrics", None);
        if p.status == status || Instant::now() > end {
            return p;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_truncated_segment_is_503_and_a_restarted_writer_200() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = families(&path);
    let (_e, addr) = endpoint(&path);
    assert_eq!(get(addr, "/metrics", None).status, 200);

    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let p = until_status(addr, 503);
    assert_eq!(p.status, 503, "{}", p.body);
    assert_eq!(p.body.lines().count(), 1, "one line: {:?}", p.body);
    assert!(!p.body.contains("# TYPE"));
    println!("PROMETHEUS-503 truncated: {}", p.body.trim_end());

    drop(w);
    std::fs::remove_file(&path).unwrap();
    let p = until_status(addr, 503);
    println!("PROMETHEUS-503 no writer: {}", p.body.trim_end());
    let _w = families(&path);
    let p = until_status(addr, 200);
    assert_eq!(p.status, 200, "{}", p.body);
    assert!(p.body.contains("perfabi_queue_depth 7"), "{}", p.body);
    println!("PROMETHEUS-RECOVERED 200 after the writer restarted");
}

/// Spec §5.1: a histogram whose count is not its buckets' sum in a
/// consistent copy (the test adds 1 to CPU 0's count behind the writer) is
/// served in neither format: 503 with the `bad-histogram` reason, and 200
/// again once the count is its buckets' sum.
#[test]
fn a_histogram_whose_count_is_not_its_buckets_sum_is_503() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = families(&path);
    let (_e, addr) = endpoint(&path);
    assert_eq!(get(addr, "/metrics", None).status, 200);
    let snap = w.snapshot().unwrap();
    let m = &snap.family("rpc.latency").unwrap().members[0];
    let count = u64::from(m.value_slot);
    add_to_value(&path, 0, count, 1);
    let want = format!(
        "member slot {}: histogram count is not the sum of its buckets in CPU 0's consistent copy",
        m.slot.unwrap()
    );
    for accept in [None, Some(OPENMETRICS)] {
        let p = get(addr, "/metrics", accept);
        assert_eq!(p.status, 503, "{accept:?}: {}", p.body);
        assert_eq!(p.body.lines().count(), 1, "one line: {:?}", p.body);
        assert!(p.body.contains(&want), "{}", p.body);
    }
    add_to_value(&path, 0, count, u64::MAX);
    let p = until_status(addr, 200);
    assert!(
        p.body.contains("perfabi_rpc_latency_count 100"),
        "{}",
        p.body
    );
}

#[test]
fn a_real_prometheus_scrapes_rates_quantiles_and_labels() {
    if !prometheus::available("a_real_prometheus_scrapes_rates_quantiles_and_labels") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Arc::new(Writer::create(&path, &config()).unwrap());
    let fam = w.add_family(&workload::requests()).unwrap();
    let api = w.add_member(fam, "api", &[("zone", "a")]).unwrap();
    let lat = w.add_family(&workload::latency("")).unwrap();
    let lat = w.add_member(lat, "", &[]).unwrap();
    const RATE: u64 = workload::RATE;
    let feeder = {
        let w = Arc::clone(&w);
        Paced::start(RATE, move |n| {
            w.member_add(&api, 1).unwrap();
            // 10% under 100 ns, 80% in (100, 1000], 10% above.
            w.observe(&lat, workload::latency_ns(n)).unwrap();
        })
    };
    let (_e, addr) = endpoint(&path);
    // The README's scrape configuration, aimed at this test's endpoint.
    let readme = readme::example("reader/prometheus/examples/prometheus.yml");
    let config = readme.replace("'127.0.0.1:9464'", &format!("'{addr}'"));
    assert_ne!(
        config, readme,
        "the README's configuration names no 127.0.0.1:9464"
    );
    let prom = Prometheus::with_scrape_configs(&config);
    std::thread::sleep(Duration::from_secs(12));
    let rate_q = "rate(perfabi_app_requests_total[5s])";
    let quantile_q = "histogram_quantile(0.5, sum by (le) (rate(perfabi_rpc_latency_bucket[5s])))";
    let (rate, labels, median) = prom.settle(
        Duration::from_secs(20),
        &format!("answers to {rate_q} and {quantile_q}"),
        |p| {
            let (rate, labels) = p.query(rate_q)?;
            let (median, _) = p.query(quantile_q)?;
            let settled = (rate - RATE as f64).abs() <= 0.05 * RATE as f64;
            Some(((rate, labels, median), settled))
        },
    );
    feeder.stop();
    let up = prom.query("up{job=\"perfabi\"}").map(|(v, _)| v);
    println!(
        "PROMETHEUS-SCRAPE {rate_q} = {rate:.1} (fed {RATE}/s), median latency {median:.0} ns \
         (bucket (100, 1000]), labels {labels}, up {up:?}"
    );
    assert!(
        (rate - RATE as f64).abs() <= 0.05 * RATE as f64,
        "rate {rate}, want {RATE} ± 5%"
    );
    assert!(median > 100.0 && median <= 1000.0, "median {median}");
    assert_eq!(labels["handler"], "api", "{labels}");
    assert_eq!(labels["zone"], "a", "{labels}");
    assert_eq!(up, Some(1.0));
}

/// The README's quick start (`reader/prometheus/examples/quickstart.sh`,
/// verbatim) with this build's programs, a private segment and a free
/// loopback port: both pages, and both processes stopped by the script.
#[test]
fn the_readme_quickstart_serves_both_formats() {
    let script = readme::example("reader/prometheus/examples/quickstart.sh");
    let profile = workspace::profile_dir();
    workspace::workspace_bin(&profile, "perfabi-exportd", "perfabi-exportd");
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("perfabi.seg");
    let listen = format!("127.0.0.1:{}", perfabi_test_harness::http::free_port());
    let out = run_limited(
        Command::new("sh")
            .args(["-c", &script])
            .env("BIN", &profile)
            .env("SEGMENT", &seg)
            .env("LISTEN", &listen),
        Duration::from_secs(60),
    );
    println!("PROMETHEUS-QUICKSTART {}", out.stdout.replace('\n', " | "));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "{:?}: {}",
        out.status,
        out.stderr
    );
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("perfabi_kernel_all_pswitch_total ")),
        "{}",
        out.stdout
    );
    assert_eq!(lines.last(), Some(&"# EOF"), "{}", out.stdout);
    // The trap stopped both: nothing listens on the port any more.
    assert!(
        std::net::TcpStream::connect(&listen).is_err(),
        "the endpoint outlived the script"
    );
}
