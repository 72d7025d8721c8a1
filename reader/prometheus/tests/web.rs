//! perfabi-prometheus served as node_exporter is (issue 33 item 3): the
//! README's web configuration (TLS and basic authentication) scraped by
//! the real Prometheus, a wrong password answered `401`, plain HTTP to the
//! TLS port failing cleanly (answered `400`, counted, logged once, its
//! connection slot freed), `curl --compressed` decoding the page byte for
//! byte, `name[]` filters, the endpoint's own families, and a bad file
//! refused naming its field.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::prometheus::{self, Prometheus};
use perfabi_test_harness::readme;

mod common;

const USER: &str = "prometheus";
const PASSWORD: &str = "correct horse battery staple";

/// A segment with a counter family of two members and a gauge.
fn segment(path: &Path) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            max_instances: 64,
            max_families: 4,
            max_members: 16,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let f = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests",
            "handler",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    for (name, n) in [("api", 41), ("static", 7)] {
        let m = w.add_member(f, name, &[]).unwrap();
        w.member_add(&m, n).unwrap();
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
    w.member_set(&q, 3).unwrap();
    w
}

/// A folder with `ca.crt`, and `server.crt`/`server.key` it signed for
/// 127.0.0.1 (the names the README's example gives).
fn certificates(dir: &Path) {
    let (ca, cert, key) = common::certs::signed_for_loopback();
    std::fs::write(dir.join("ca.crt"), ca).unwrap();
    std::fs::write(dir.join("server.crt"), cert).unwrap();
    std::fs::write(dir.join("server.key"), key).unwrap();
}

/// The README's web configuration in `dir` (with the certificates it
/// names), its hash replaced by one of [`PASSWORD`] (cost 4: a test need
/// not pay cost 10).
fn web_config(dir: &Path) -> PathBuf {
    let example = readme::example("reader/prometheus/examples/web-config.yml");
    let hash_line = example
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{USER}:")))
        .expect("the README's web configuration has a user prometheus");
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let config = example.replace(hash_line, &format!("  {USER}: {hash}"));
    certificates(dir);
    let path = dir.join("web-config.yml");
    std::fs::write(&path, config).unwrap();
    path
}

/// An endpoint serving `segment` with the web configuration `config`.
fn start(segment: &Path, config: &Path, args: &[&str]) -> common::Running {
    let mut all = vec!["--web.config.file", config.to_str().unwrap()];
    all.extend_from_slice(args);
    let e = common::start(segment, &all);
    assert!(
        e.log()
            .iter()
            .any(|l| l.contains(" with basic authentication at https://")),
        "{:?}",
        e.log()
    );
    e
}

/// `curl ARGS` (silent, errors shown): its output, or a failure with its
/// error.
fn curl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Plain HTTP to the TLS port: Go's answer (`400`, in plain HTTP, saying
/// to use https), then the connection closed.
fn plain_http_to(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn tls_basic_auth_and_plain_http_to_the_tls_port() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _w = segment(&seg);
    let config = web_config(dir.path());
    // Two connection slots: plain HTTP clients that failed must free
    // theirs, or the scrapes after them would wait.
    let e = start(&seg, &config, &["--max-connections", "2"]);
    let url = format!("https://{}/metrics", e.addr);
    let ca = dir.path().join("ca.crt");
    let ca = ca.to_str().unwrap();
    let auth = format!("{USER}:{PASSWORD}");
    let page = String::from_utf8(curl(&["--cacert", ca, "-u", &auth, &url])).unwrap();
    assert!(
        page.contains("perfabi_app_requests_total{handler=\"api\"} 41\n"),
        "{page}"
    );
    // The README's headers on every answer, 401 included.
    let head = String::from_utf8(curl(&[
        "--cacert",
        ca,
        "-u",
        &format!("{USER}:wrong"),
        "-o",
        "/dev/null",
        "-D",
        "-",
        &url,
    ]))
    .unwrap();
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: basic\r\n"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("x-content-type-options: nosniff\r\n"),
        "{head}"
    );
    let head =
        String::from_utf8(curl(&["--cacert", ca, "-o", "/dev/null", "-D", "-", &url])).unwrap();
    assert!(head.starts_with("HTTP/1.1 401"), "no credentials: {head}");
    // Plain HTTP to the TLS port, more times than there are slots.
    for _ in 0..5 {
        let answer = plain_http_to(e.addr);
        assert!(
            answer.starts_with("HTTP/1.0 400 Bad Request\r\n"),
            "{answer:?}"
        );
        assert!(answer.contains("use https://"), "{answer:?}");
    }
    let page = String::from_utf8(curl(&["--cacert", ca, "-u", &auth, &url])).unwrap();
    assert!(
        page.contains("perfabi_exporter_tls_handshake_errors_total 5\n"),
        "{page}"
    );
    assert!(
        page.contains("promhttp_metric_handler_requests_total{code=\"401\"} 2\n"),
        "{page}"
    );
    assert!(
        page.contains("promhttp_metric_handler_requests_total{code=\"200\"} 1\n"),
        "{page}"
    );
    let logged = |e: &common::Running| {
        e.log()
            .iter()
            .filter(|l| l.contains("TLS handshake from"))
            .count()
    };
    assert_eq!(
        logged(&e),
        1,
        "five failed handshakes, one line: {:?}",
        e.log()
    );
    println!("WEB-TLS PASS: 401 for a wrong password, 5 plain HTTP requests to the TLS port answered 400, counted, logged once");
}

/// Prometheus' view of its targets: job → (health, last error).
fn targets(p: &Prometheus) -> Option<Vec<(String, String, String)>> {
    let r = perfabi_test_harness::http::get(p.address, "/api/v1/targets", &[]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    Some(
        v["data"]["activeTargets"]
            .as_array()?
            .iter()
            .map(|t| {
                (
                    t["labels"]["job"].as_str().unwrap_or("").to_string(),
                    t["health"].as_str().unwrap_or("").to_string(),
                    t["lastError"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
    )
}

#[test]
fn a_real_prometheus_scrapes_over_tls_with_basic_auth() {
    const TEST: &str = "a_real_prometheus_scrapes_over_tls_with_basic_auth";
    if !prometheus::available(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _w = segment(&seg);
    let config = web_config(dir.path());
    let e = start(&seg, &config, &[]);
    let ca = dir.path().join("ca.crt");
    let job = |name: &str, scheme: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n    tls_config:\n      ca_file: {}\n\
             \x20   basic_auth:\n      username: {USER}\n      password: '{password}'\n\
             \x20   static_configs:\n      - targets: ['{}']\n",
            ca.display(),
            e.addr
        )
    };
    let prom = Prometheus::with_scrape_configs(&format!(
        "scrape_configs:\n{}{}{}",
        job("tls", "https", PASSWORD),
        job("wrongpw", "https", "not the password"),
        job("plain", "http", PASSWORD),
    ));
    let seen = prom.until(Duration::from_secs(60), "three targets scraped", |p| {
        let t = targets(p)?;
        let health = |j: &str| t.iter().find(|(n, _, _)| n == j).map(|(_, h, _)| h.clone());
        (health("tls")? == "up" && health("wrongpw")? == "down" && health("plain")? == "down")
            .then_some(t)
    });
    println!("PROMETHEUS-TARGETS {seen:?}");
    let error = |j: &str| seen.iter().find(|(n, _, _)| n == j).unwrap().2.clone();
    assert!(error("wrongpw").contains("401"), "{seen:?}");
    assert!(error("plain").contains("400"), "{seen:?}");
    let up = prom
        .until(Duration::from_secs(30), "up of the TLS job", |p| {
            p.query("up{job=\"tls\"}")
        })
        .0;
    assert_eq!(up, 1.0);
    // The page through Prometheus: the segment's counter and the
    // endpoint's own counts of the other two jobs' failures.
    let requests = prom
        .until(Duration::from_secs(30), "perfabi_app_requests_total", |p| {
            p.query("perfabi_app_requests_total{job=\"tls\",handler=\"api\"}")
        })
        .0;
    assert_eq!(requests, 41.0);
    let (handshakes, unauthorized) = prom.until(
        Duration::from_secs(30),
        "the endpoint's counts of failed handshakes and 401s",
        |p| {
            let h = p
                .query("perfabi_exporter_tls_handshake_errors_total{job=\"tls\"}")?
                .0;
            let u = p
                .query("promhttp_metric_handler_requests_total{job=\"tls\",code=\"401\"}")?
                .0;
            (h >= 2.0 && u >= 2.0).then_some((h, u))
        },
    );
    let fds = prom
        .until(Duration::from_secs(30), "process_open_fds", |p| {
            p.query("process_open_fds{job=\"tls\"}")
        })
        .0;
    assert!(fds >= 3.0, "{fds}");
    let lines = e
        .log()
        .iter()
        .filter(|l| l.contains("TLS handshake from"))
        .count();
    assert_eq!(
        lines,
        1,
        "{handshakes} failed handshakes, one log line: {:?}",
        e.log()
    );
    println!(
        "WEB-PROMETHEUS PASS: up 1 over TLS with basic_auth; a wrong password down with 401, \
         plain HTTP down with 400; {handshakes} failed handshakes and {unauthorized} 401s counted, \
         one log line"
    );
}

#[test]
fn curl_compressed_decodes_the_page_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _w = segment(&seg);
    let config = web_config(dir.path());
    let e = start(&seg, &config, &[]);
    let ca = dir.path().join("ca.crt");
    let ca = ca.to_str().unwrap();
    let auth = format!("{USER}:{PASSWORD}");
    // The segment's families only: the endpoint's own change between two
    // scrapes (their counts, their CPU time).
    let url = format!(
        "https://{}/metrics?name%5B%5D=perfabi_app_requests&name[]=perfabi_queue_depth",
        e.addr
    );
    let fetch = |extra: &[&str]| {
        let headers = dir.path().join("headers");
        let mut args = vec!["--cacert", ca, "-u", &auth, "-D", headers.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(&url);
        let body = curl(&args);
        (
            body,
            std::fs::read_to_string(&headers)
                .unwrap()
                .to_ascii_lowercase(),
        )
    };
    let (plain, plain_head) = fetch(&[]);
    let (decoded, gzip_head) = fetch(&["--compressed"]);
    let (raw, _) = fetch(&["-H", "Accept-Encoding: gzip"]);
    assert!(!plain_head.contains("content-encoding"), "{plain_head}");
    assert!(
        gzip_head.contains("content-encoding: gzip\r\n"),
        "{gzip_head}"
    );
    for h in [&plain_head, &gzip_head] {
        assert!(h.contains("vary: accept-encoding\r\n"), "{h}");
    }
    assert_eq!(
        decoded, plain,
        "curl --compressed's page is not the plain one"
    );
    assert_eq!(&raw[..2], &[0x1f, 0x8b], "not gzip");
    let text = String::from_utf8(plain).unwrap();
    assert!(
        text.contains("perfabi_app_requests_total{handler=\"static\"} 7\n"),
        "{text}"
    );
    assert!(text.contains("perfabi_queue_depth 3\n"), "{text}");
    assert!(!text.contains("process_"), "{text}");
    println!(
        "WEB-GZIP PASS: curl --compressed decoded {} bytes of gzip into the {}-byte page",
        raw.len(),
        text.len()
    );
}

/// `GET /metrics` on plain HTTP with `headers`: status, headers, body.
fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> perfabi_test_harness::http::Response {
    perfabi_test_harness::http::get(addr, path, headers).unwrap()
}

#[test]
fn filters_codings_and_own_families_on_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = segment(&seg);
    // A family named like the endpoint's own is left out (and logged).
    let f = w
        .add_family(&FamilySpec::new(
            "exporter.scrape_duration_seconds",
            "Impostor",
            "",
            Kind::Gauge,
            Unit::NONE,
        ))
        .unwrap();
    let m = w.add_member(f, "", &[]).unwrap();
    w.member_set(&m, 99).unwrap();
    let e = common::start(&seg, &[]);
    let om = "application/openmetrics-text;version=1.0.0";
    let r = get(e.addr, "/metrics", &[("Accept", om)]);
    assert_eq!(r.status, 200);
    for own in [
        "# TYPE perfabi_exporter_scrape_duration_seconds gauge\n",
        "# TYPE process_cpu_seconds counter\n",
        "# TYPE process_resident_memory_bytes gauge\n",
        "# TYPE process_open_fds gauge\n",
        "# TYPE process_max_fds gauge\n",
        "# TYPE process_start_time_seconds gauge\n",
        "# TYPE promhttp_metric_handler_requests counter\n",
    ] {
        assert!(r.body.contains(own), "{own} missing:\n{}", r.body);
    }
    assert!(
        !r.body.contains("Impostor") && !r.body.contains(" 99\n"),
        "{}",
        r.body
    );
    assert!(r.body.ends_with("# EOF\n"), "{}", r.body);
    let until = Deadline::witness();
    let impostor = || {
        e.log()
            .iter()
            .any(|l| l.contains("perfabi_exporter_scrape_duration_seconds left out"))
    };
    while !impostor() && !until.passed() {
        std::thread::sleep(Duration::from_millis(20));
    }
    until.assert(
        impostor(),
        "the family named like the endpoint's own logged",
    );
    // Filters: percent-encoded, a counter by either name, unknown names
    // absent, the endpoint's own families filtered alike.
    let r = get(
        e.addr,
        "/metrics?name%5B%5D=perfabi_app_requests_total&name[]=no_such_family&name[]=process_open_fds",
        &[("Accept", om)],
    );
    let types: Vec<&str> = r
        .body
        .lines()
        .filter(|l| l.starts_with("# TYPE "))
        .collect();
    assert_eq!(
        types,
        [
            "# TYPE perfabi_app_requests counter",
            "# TYPE process_open_fds gauge"
        ],
        "{}",
        r.body
    );
    assert!(r.body.ends_with("# EOF\n"));
    let r = get(e.addr, "/metrics?name[]=perfabi_queue_depth", &[]);
    assert_eq!(r.body, "# HELP perfabi_queue_depth Queued\n# TYPE perfabi_queue_depth gauge\nperfabi_queue_depth 3\n");
    let many = vec!["name[]=x"; 257].join("&");
    let r = get(e.addr, &format!("/metrics?{many}"), &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    // Codings: identity refused and gzip not acceptable is 406; gzip;q=0
    // is the page as is.
    let r = get(
        e.addr,
        "/metrics",
        &[("Accept-Encoding", "br, identity;q=0")],
    );
    assert_eq!(r.status, 406, "{}", r.body);
    let r = get(e.addr, "/metrics", &[("Accept-Encoding", "gzip;q=0")]);
    assert_eq!((r.status, r.header("Content-Encoding")), (200, None));
    assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
    let head = String::from_utf8(curl(&[
        "-H",
        "Accept-Encoding: gzip, identity;q=0",
        "-o",
        "/dev/null",
        "-D",
        "-",
        &format!("http://{}/metrics", e.addr),
    ]))
    .unwrap()
    .to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-encoding: gzip\r\n"), "{head}");
    // Counted by status.
    let r = get(
        e.addr,
        "/metrics?name[]=promhttp_metric_handler_requests",
        &[],
    );
    for line in [
        "promhttp_metric_handler_requests_total{code=\"200\"} 5\n",
        "promhttp_metric_handler_requests_total{code=\"400\"} 1\n",
        "promhttp_metric_handler_requests_total{code=\"406\"} 1\n",
    ] {
        assert!(r.body.contains(line), "{line} missing:\n{}", r.body);
    }
}

#[test]
fn a_bad_web_config_is_one_line_naming_the_field_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let exe = perfabi_test_harness::bin(
        "perfabi-prometheus",
        env!("CARGO_BIN_EXE_perfabi-prometheus"),
    );
    for (yaml, field) in [
        (
            "tls_server_config:\n  cert_file: a.crt\n",
            "tls_server_config.key_file",
        ),
        (
            "tls_server_config:\n  cert_file: none.crt\n  key_file: none.key\n",
            "tls_server_config.cert_file",
        ),
        (
            "basic_auth_users:\n  alice: secret\n",
            "basic_auth_users.alice",
        ),
        (
            "tls_server_config:\n  min_version: TLS10\n  cert_file: a\n  key_file: b\n",
            "tls_server_config.min_version",
        ),
        (
            "http_server_config:\n  headers:\n    Server: perfabi\n",
            "http_server_config.headers.Server",
        ),
        ("unknown: 1\n", "unknown field `unknown`"),
    ] {
        let path = dir.path().join("web.yml");
        std::fs::write(&path, yaml).unwrap();
        let out = perfabi_test_harness::run_limited(
            Command::new(&exe)
                .arg(dir.path().join("seg"))
                .args(["--listen", "127.0.0.1:0", "--web.config.file"])
                .arg(&path),
            Duration::from_secs(20),
        );
        assert_eq!(out.code(), Some(2), "{yaml}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{yaml}: {}", out.stderr);
        assert!(out.stderr.contains(field), "{yaml}: {}", out.stderr);
        assert!(
            out.stderr
                .starts_with("perfabi-prometheus: --web.config.file "),
            "{}",
            out.stderr
        );
    }
}

/// `SIGHUP` reads the file again: a new password (and headers) for new
/// requests; a wrong file, or one turning TLS off, is logged one line and
/// the settings in force are kept.
#[test]
fn sighup_reads_the_web_config_again() {
    use perfabi_test_harness::{send, Signal};
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _w = segment(&seg);
    let config = web_config(dir.path());
    let e = start(&seg, &config, &[]);
    let url = format!("https://{}/metrics?name[]=perfabi_queue_depth", e.addr);
    let ca = dir.path().join("ca.crt");
    let ca = ca.to_str().unwrap();
    let status = |password: &str| {
        let out = curl(&[
            "--cacert",
            ca,
            "-u",
            &format!("{USER}:{password}"),
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &url,
        ]);
        String::from_utf8(out).unwrap()
    };
    assert_eq!(status(PASSWORD), "200");
    // Waits for the `n`th log line containing `what`.
    let logged = |what: &str, n: usize| {
        let until = Deadline::witness();
        let count = || e.log().iter().filter(|l| l.contains(what)).count();
        while count() < n && !until.passed() {
            std::thread::sleep(Duration::from_millis(20));
        }
        until.assert(
            count() >= n,
            format_args!("{n} log lines with {what:?}: {:?}", e.log()),
        );
    };
    let original = std::fs::read_to_string(&config).unwrap();
    let new_hash = bcrypt::hash("new password", 4).unwrap();
    let old_line = original
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{USER}:")))
        .unwrap();
    let renewed = original.replace(old_line, &format!("  {USER}: {new_hash}"));
    std::fs::write(&config, &renewed).unwrap();
    send(e.pid(), Signal::HUP);
    logged("read again, its settings in force", 1);
    assert_eq!(status(PASSWORD), "401");
    assert_eq!(status("new password"), "200");
    // A wrong file: logged, naming the field; the settings kept.
    std::fs::write(&config, format!("{renewed}rate_limit:\n  interval: 5s\n")).unwrap();
    send(e.pid(), Signal::HUP);
    logged("rate_limit.interval", 1);
    assert_eq!(status("new password"), "200");
    // TLS off: refused, kept.
    std::fs::write(
        &config,
        format!("basic_auth_users:\n  {USER}: {new_hash}\n"),
    )
    .unwrap();
    send(e.pid(), Signal::HUP);
    logged("would turn TLS off", 1);
    assert_eq!(status("new password"), "200");
    assert!(
        e.log()
            .iter()
            .any(|l| l.contains("rate_limit.interval") && l.contains("kept")),
        "{:?}",
        e.log()
    );
    println!("WEB-SIGHUP PASS: a new password in force after SIGHUP; a wrong file and TLS off refused, settings kept");
}
