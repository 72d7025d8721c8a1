//! Native histograms: the protobuf page over HTTP, and the real
//! Prometheus (`--enable-feature=native-histograms`) scraping a `LOG2`
//! histogram of known observations as a native histogram, whose
//! `histogram_count`, `histogram_sum` and `histogram_quantile` (of the
//! histogram and of its `rate`) are the observations'; beside it, a
//! Prometheus without the feature keeps reading the classic `_bucket`
//! series of the same endpoint. The protobuf page keeps, under `name[]`
//! filters, exactly the families the text page keeps.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Kind, Unit};
use perfabi_prometheus::protobuf::metrics::MetricFamily;
use perfabi_shm::writer::{Config, MemberId, Writer};
use perfabi_test_harness::http;
use perfabi_test_harness::prometheus::{self, Prometheus, Target};
use prost::Message;

mod common;

/// What Prometheus 2.42 sends with native histograms on.
const PROTOBUF_ACCEPT: &str = "application/vnd.google.protobuf;\
    proto=io.prometheus.client.MetricFamily;encoding=delimited,\
    application/openmetrics-text;version=1.0.0;q=0.8,\
    text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A segment with one `LOG2` histogram `rpc.latency` (ns, not converted:
/// bounds 1, 2, 4, …, 2^14 and `+Inf`), and room for two more families.
fn segment(dir: &std::path::Path) -> (Writer, MemberId) {
    let cfg = Config {
        max_instances: 64,
        max_families: 4,
        max_members: 4,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create(dir.join("seg"), &cfg).unwrap();
    let f = w
        .add_family(&FamilySpec::histogram(
            "rpc.latency",
            "RPC latency",
            "",
            Unit::NS,
            Buckets::Log2 { first: 0, n: 16 },
        ))
        .unwrap();
    let m = w.add_member(f, "", &[]).unwrap();
    (w, m)
}

/// `GET /metrics` with `accept` on a connection closed after it: the
/// head and the body's bytes.
fn get_bytes(addr: SocketAddr, accept: &str) -> (String, Vec<u8>) {
    get_path_bytes(addr, "/metrics", accept)
}

/// `GET path` with `accept` on a connection closed after it: the head and
/// the body's bytes.
fn get_path_bytes(addr: SocketAddr, path: &str, accept: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(all[..end].to_vec()).unwrap();
    (head, all[end + 4..].to_vec())
}

#[test]
fn the_protobuf_page_by_accept_header() {
    let dir = tempfile::tempdir().unwrap();
    let (w, m) = segment(dir.path());
    for v in [0, 3, 4, 100] {
        w.observe(&m, v).unwrap();
    }
    let e = common::start(&dir.path().join("seg"), &[]);
    let (head, body) = get_bytes(e.addr, PROTOBUF_ACCEPT);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains(
            "content-type: application/vnd.google.protobuf; \
             proto=io.prometheus.client.metricfamily; encoding=delimited"
        ),
        "{head}"
    );
    let mut rest = &body[..];
    let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
    assert_eq!(f.name(), "perfabi_rpc_latency");
    // Then only the endpoint's own families, in the protobuf page too.
    let mut own = Vec::new();
    while !rest.is_empty() {
        own.push(
            MetricFamily::decode_length_delimited(&mut rest)
                .unwrap()
                .name()
                .to_string(),
        );
    }
    assert!(
        own.iter().all(|n| n.starts_with("promhttp_")
            || n.starts_with("perfabi_exporter_")
            || n.starts_with("process_")),
        "{own:?}"
    );
    assert!(
        own.iter()
            .any(|n| n == "perfabi_exporter_scrape_duration_seconds"),
        "{own:?}"
    );
    let h = f.metric[0].histogram.as_ref().unwrap();
    // {0} in the zero bucket [0, 1]; 3, 4 at index 2; 100 at index 7.
    assert_eq!(
        (h.schema(), h.zero_threshold(), h.zero_count()),
        (0, 1.0, 1)
    );
    let spans: Vec<(i32, u32)> = h
        .positive_span
        .iter()
        .map(|s| (s.offset(), s.length()))
        .collect();
    assert_eq!(spans, [(2, 1), (4, 1)]);
    assert_eq!(h.positive_delta, [2, -1]);
    assert_eq!((h.sample_count(), h.sample_sum()), (4, 107.0));
    // A scraper that asks for text gets text.
    let (head, body) = get_bytes(e.addr, "text/plain;version=0.0.4");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("perfabi_rpc_latency_count 4\n"), "{text}");
}

/// The names of the delimited `MetricFamily` messages of `body`, in order.
fn family_names(body: &[u8]) -> Vec<String> {
    let mut rest = body;
    let mut names = Vec::new();
    while !rest.is_empty() {
        let f = MetricFamily::decode_length_delimited(&mut rest)
            .unwrap_or_else(|e| panic!("a delimited MetricFamily after {names:?}: {e}"));
        names.push(f.name().to_string());
    }
    names
}

#[test]
fn the_protobuf_page_keeps_only_the_families_name_filters_ask_for() {
    let dir = tempfile::tempdir().unwrap();
    let (w, l) = segment(dir.path());
    w.observe(&l, 3).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests",
            "",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let r = w.add_member(req, "", &[]).unwrap();
    w.member_add(&r, 41).unwrap();
    let depth = w
        .add_family(&FamilySpec::new(
            "queue.depth",
            "Queued",
            "",
            Kind::Gauge,
            Unit::NONE,
        ))
        .unwrap();
    let q = w.add_member(depth, "", &[]).unwrap();
    w.member_set(&q, 3).unwrap();
    let e = common::start(&dir.path().join("seg"), &[]);

    // Unfiltered, every family is there: the filter below has some to
    // leave out, of the segment's and of the endpoint's own.
    let (head, body) = get_bytes(e.addr, PROTOBUF_ACCEPT);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let all = family_names(&body);
    for n in [
        "perfabi_rpc_latency",
        "perfabi_app_requests_total",
        "perfabi_queue_depth",
        "process_open_fds",
        "perfabi_exporter_scrape_duration_seconds",
    ] {
        assert!(all.iter().any(|a| a == n), "{n} not in {all:?}");
    }

    // A histogram by its name, a counter by its name without `_total`, an
    // unknown name, one of the endpoint's own families percent-encoded:
    // exactly those that exist, in the page's order, as the text page.
    let filter = "name[]=perfabi_rpc_latency&name[]=perfabi_app_requests\
                  &name[]=no_such_family&name%5B%5D=process_open_fds";
    let (head, body) = get_path_bytes(e.addr, &format!("/metrics?{filter}"), PROTOBUF_ACCEPT);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/vnd.google.protobuf;"),
        "{head}"
    );
    assert_eq!(
        family_names(&body),
        [
            "perfabi_rpc_latency",
            "perfabi_app_requests_total",
            "process_open_fds"
        ]
    );
    let (_, text) = get_path_bytes(e.addr, &format!("/metrics?{filter}"), "text/plain");
    let text = String::from_utf8(text).unwrap();
    let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
    assert_eq!(
        types,
        [
            "# TYPE perfabi_rpc_latency histogram",
            "# TYPE perfabi_app_requests_total counter",
            "# TYPE process_open_fds gauge"
        ],
        "{text}"
    );
    // The counter by its full name, as the text page also takes it.
    let (_, body) = get_path_bytes(
        e.addr,
        "/metrics?name[]=perfabi_app_requests_total",
        PROTOBUF_ACCEPT,
    );
    assert_eq!(family_names(&body), ["perfabi_app_requests_total"]);

    // Only unknown names: the status and the (empty) page the text page
    // gives, in the protobuf page's own type.
    let path = "/metrics?name[]=no_such_family";
    let (phead, pbody) = get_path_bytes(e.addr, path, PROTOBUF_ACCEPT);
    let (thead, tbody) = get_path_bytes(e.addr, path, "text/plain");
    assert_eq!(
        phead.lines().next(),
        thead.lines().next(),
        "{phead}\n{thead}"
    );
    assert!(phead.starts_with("HTTP/1.1 200"), "{phead}");
    assert_eq!((pbody.len(), tbody.len()), (0, 0), "{tbody:?}");
    assert!(
        phead
            .to_ascii_lowercase()
            .contains("content-type: application/vnd.google.protobuf;"),
        "{phead}"
    );
    // Too many names: the text page's 400, for the protobuf page too.
    let many = vec!["name[]=x"; 257].join("&");
    let (phead, _) = get_path_bytes(e.addr, &format!("/metrics?{many}"), PROTOBUF_ACCEPT);
    let (thead, _) = get_path_bytes(e.addr, &format!("/metrics?{many}"), "text/plain");
    assert!(phead.starts_with("HTTP/1.1 400"), "{phead}");
    assert_eq!(phead.lines().next(), thead.lines().next());
}

/// The raw API answer to `query`: its first result, if any.
fn first_result(p: &Prometheus, query: &str) -> Option<serde_json::Value> {
    let path = format!("/api/v1/query?query={}", http::encode(query));
    let r = http::get(p.address, &path, &[]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    v["data"]["result"].get(0).cloned()
}

/// Whether `value` lies in the schema-0 bucket `(2^(i-1), 2^i]`.
fn in_bucket(value: f64, i: i32) -> bool {
    value > 2f64.powi(i - 1) && value <= 2f64.powi(i)
}

#[test]
fn a_real_prometheus_reads_a_native_histogram_and_one_without_the_feature_classic_buckets() {
    let test =
        "a_real_prometheus_reads_a_native_histogram_and_one_without_the_feature_classic_buckets";
    if !prometheus::available(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (w, m) = segment(dir.path());
    // Batch A: 20 x 3 in (2, 4], 20 x 100 in (64, 128], 20 x 1000 in
    // (512, 1024]: count 60, sum 22,060, median (rank 30) in (64, 128].
    for v in [3u64, 100, 1000] {
        for _ in 0..20 {
            w.observe(&m, v).unwrap();
        }
    }
    let e = common::start(&dir.path().join("seg"), &[]);
    let targets = prometheus::scrape_configs(&[Target::new("perfabi", e.addr)]);
    let native = Prometheus::with_flags(&targets, &["--enable-feature=native-histograms"]);
    let classic = Prometheus::with_scrape_configs(&targets);
    let value = |p: &Prometheus, q: &str| p.query(q).map(|(v, _)| v);

    let count = native.until(
        Duration::from_secs(30),
        "histogram_count(perfabi_rpc_latency) of batch A",
        |p| value(p, "histogram_count(perfabi_rpc_latency)").filter(|&c| c == 60.0),
    );
    let sum = value(&native, "histogram_sum(perfabi_rpc_latency)");
    let median_a = value(&native, "histogram_quantile(0.5, perfabi_rpc_latency)");
    // Stored as a native histogram: the series has a histogram, and there
    // is no classic bucket series.
    let stored = first_result(&native, "perfabi_rpc_latency");
    let buckets = first_result(&native, "perfabi_rpc_latency_bucket");
    println!(
        "NATIVE-HISTOGRAM batch A: histogram_count {count}, histogram_sum {sum:?}, \
         histogram_quantile(0.5) {median_a:?} (bucket (64, 128])"
    );
    assert_eq!(sum, Some(22_060.0));
    assert!(median_a.is_some_and(|q| in_bucket(q, 7)), "{median_a:?}");
    assert!(
        stored
            .as_ref()
            .is_some_and(|r| r.get("histogram").is_some()),
        "{stored:?}; Prometheus' log:\n{}",
        native.log()
    );
    assert!(buckets.is_none(), "classic series stored too: {buckets:?}");

    // Let Prometheus keep batch A for a few scrapes, then batch B: 40 x
    // 5,000 in (4096, 8192]. A rate over a window that starts in A's
    // scrapes is B's alone: its median in B's bucket, its mean 5,000.
    std::thread::sleep(Duration::from_secs(3));
    for _ in 0..40 {
        w.observe(&m, 5000).unwrap();
    }
    native.until(
        Duration::from_secs(30),
        "histogram_count(perfabi_rpc_latency) of batches A and B",
        |p| value(p, "histogram_count(perfabi_rpc_latency)").filter(|&c| c == 100.0),
    );
    let rate = "rate(perfabi_rpc_latency[1m])";
    let median_b = value(&native, &format!("histogram_quantile(0.5, {rate})"));
    let mean_b = value(
        &native,
        &format!("histogram_sum({rate}) / histogram_count({rate})"),
    );
    let median_ab = value(&native, "histogram_quantile(0.5, perfabi_rpc_latency)");
    let sum_ab = value(&native, "histogram_sum(perfabi_rpc_latency)");
    println!(
        "NATIVE-HISTOGRAM batch B: histogram_quantile(0.5, {rate}) {median_b:?} \
         (bucket (4096, 8192]), mean of the rate {mean_b:?} (5000); A and B: \
         median {median_ab:?} (bucket (512, 1024]), sum {sum_ab:?} (222060)"
    );
    assert!(median_b.is_some_and(|q| in_bucket(q, 13)), "{median_b:?}");
    assert!(
        mean_b.is_some_and(|m| (m - 5000.0).abs() < 1e-6),
        "{mean_b:?}"
    );
    // 20 x 3, 20 x 100, 20 x 1000, 40 x 5000: rank 50 in (512, 1024].
    assert!(median_ab.is_some_and(|q| in_bucket(q, 10)), "{median_ab:?}");
    assert_eq!(sum_ab, Some(222_060.0));

    // The Prometheus without the feature asked for text and stored the
    // classic series of the same histogram.
    let le = classic.until(
        Duration::from_secs(30),
        "perfabi_rpc_latency_count of batches A and B (classic)",
        |p| {
            value(p, "perfabi_rpc_latency_count").filter(|&c| c == 100.0)?;
            value(p, "perfabi_rpc_latency_bucket{le=\"128\"}")
        },
    );
    let classic_median = value(
        &classic,
        "histogram_quantile(0.5, perfabi_rpc_latency_bucket)",
    );
    println!(
        "CLASSIC-HISTOGRAM _bucket{{le=\"128\"}} {le}, histogram_quantile(0.5) {classic_median:?}"
    );
    assert_eq!(le, 40.0);
    assert_eq!(value(&classic, "perfabi_rpc_latency_sum"), Some(222_060.0));
    assert!(
        classic_median.is_some_and(|q| in_bucket(q, 10)),
        "{classic_median:?}"
    );
    assert!(first_result(&classic, "perfabi_rpc_latency").is_none());
    println!("NATIVE-HISTOGRAMS PASS");
}

/// The spec's vector (§5.6): the histograms of `family_every_kind.bin` on
/// the protobuf page, one line each, as committed in
/// `spec/vectors/family_every_kind.native`. `PERFABI_REGENERATE_VECTORS=1`
/// writes the file instead (commit it).
#[test]
fn the_spec_vector_of_native_histograms() {
    use perfabi_prometheus::{Endpoint, Exposition};
    let vectors = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/vectors");
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("family_every_kind.bin");
    std::fs::copy(vectors.join("family_every_kind.bin"), &image).unwrap();
    // A recorded image: its writer (pid 4242) is long gone.
    let opts = perfabi_reader::Options {
        require_live: false,
        ..perfabi_reader::Options::default()
    };
    let e = Endpoint::new(&image, opts, false);
    let mut page = &e.page(Exposition::Protobuf).unwrap()[..];
    let mut got = String::from(
        "# The histograms of family_every_kind.bin on the protobuf page (spec 5.6):\n\
         # name{labels} count sum, classic (upper bound, cumulative count)...,\n\
         # then for a LOG2 one: schema, zero bucket, spans (offset, length), deltas.\n",
    );
    while !page.is_empty() {
        let f = MetricFamily::decode_length_delimited(&mut page).unwrap();
        for m in &f.metric {
            let Some(h) = &m.histogram else { continue };
            let labels: Vec<String> = m
                .label
                .iter()
                .map(|l| format!("{}=\"{}\"", l.name(), l.value()))
                .collect();
            got += &format!(
                "{}{{{}}} count={} sum={}\n  classic={:?}\n",
                f.name(),
                labels.join(","),
                h.sample_count(),
                h.sample_sum(),
                h.bucket
                    .iter()
                    .map(|b| (b.upper_bound(), b.cumulative_count()))
                    .collect::<Vec<_>>()
            );
            if let Some(schema) = h.schema {
                got += &format!(
                    "  schema={schema} zero_threshold={} zero_count={} spans={:?} deltas={:?}\n",
                    h.zero_threshold(),
                    h.zero_count(),
                    h.positive_span
                        .iter()
                        .map(|s| (s.offset(), s.length()))
                        .collect::<Vec<_>>(),
                    h.positive_delta
                );
            }
        }
    }
    let file = vectors.join("family_every_kind.native");
    if std::env::var_os("PERFABI_REGENERATE_VECTORS").is_some() {
        std::fs::write(&file, &got).unwrap();
    }
    let want = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(
        got,
        want,
        "{} is stale (PERFABI_REGENERATE_VECTORS=1 cargo test -p perfabi-prometheus --test native)",
        file.display()
    );
}
