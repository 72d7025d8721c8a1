//! The fleet path through PCP, against the real programs: a writer feeding
//! a counter at a known rate and a histogram of a known distribution;
//! pmdaperfabi under a private pmcd; PCP's pmproxy serving that pmcd's
//! metrics at `/metrics`; Prometheus scraping pmproxy with the README's
//! scrape configuration; and the README's walk-through
//! (`pcp-agent/examples/fleet.sh`: pminfo, pmproxy's page, a pmlogger
//! archive replayed by pmval and pmdumplog) run against the same private
//! servers. Every server is on 127.0.0.1 and stopped by the test.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::prometheus::{self, Prometheus};
use perfabi_test_harness::workload::{self, BOUNDS, RATE};
use perfabi_test_harness::{need_file, readme, run_limited, Paced};
use support::*;

/// A sample of a Prometheus text page.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a Prometheus text page (`name{k="v",…} value`; comment
/// lines skipped).
fn samples(page: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in page
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, rest) = line.split_at(line.find(['{', ' ']).unwrap_or(line.len()));
        let mut labels = BTreeMap::new();
        let mut rest = rest.chars().peekable();
        if rest.peek() == Some(&'{') {
            rest.next();
            loop {
                let key: String = rest.by_ref().take_while(|&c| c != '=').collect();
                assert_eq!(rest.next(), Some('"'), "{line}");
                let mut value = String::new();
                while let Some(c) = rest.next() {
                    match c {
                        '\\' => value.extend(rest.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.insert(key.trim().to_string(), value);
                if rest.next() != Some(',') {
                    break;
                }
            }
        }
        let value: String = rest.collect();
        out.push(Sample {
            name: name.to_string(),
            labels,
            value: value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no value in {line:?}")),
        });
    }
    out
}

/// PromQL for quantile `q` of pmdaperfabi's histogram `bucket_metric`
/// (pmproxy's name of `perfabi.X.bucket`) with bucket upper bounds
/// `bounds`. The agent's buckets count their own observations, as PCP's
/// bcc and bpftrace agents show histograms, not all below a bound, and
/// say their bounds in the labels `lower_bound` and `upper_bound` (none on
/// the last); histogram_quantile wants cumulative series labelled `le`, so
/// each is the sum of the rates of the buckets up to its bound.
fn quantile_query(q: f64, bucket_metric: &str, bounds: &[u64], window: &str) -> String {
    let mut upto = Vec::new();
    let mut parts = Vec::new();
    for b in bounds {
        upto.push(b.to_string());
        parts.push(format!(
            "label_replace(sum(rate({bucket_metric}{{upper_bound=~\"{}\"}}[{window}])), \"le\", \"{b}\", \"\", \"\")",
            upto.join("|")
        ));
    }
    parts.push(format!(
        "label_replace(sum(rate({bucket_metric}[{window}])), \"le\", \"+Inf\", \"\", \"\")"
    ));
    format!("histogram_quantile({q}, {})", parts.join(" or "))
}

/// The time-stamped numbers of `pmval` output (`22:44:46.181   1000.0`).
fn pmval_values(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.as_bytes().get(2) == Some(&b':') && l.as_bytes().get(5) == Some(&b':'))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect()
}

#[test]
fn pmproxy_serves_the_agent_to_prometheus_and_pmlogger_records_it() {
    let test = "pmproxy_serves_the_agent_to_prometheus_and_pmlogger_records_it";
    let pcp = "apt-get install pcp; tests/setup does";
    if !prometheus::available(test)
        || !need_file(test, Path::new(PMPROXY), pcp)
        || !need_file(
            test,
            Path::new("/usr/bin/curl"),
            "apt-get install curl; tests/setup does",
        )
    {
        return;
    }
    // The example files the README shows, checked to be shown verbatim.
    let walk_through = readme::example("pcp-agent/examples/fleet.sh");
    let scrape_config = readme::example("pcp-agent/examples/prometheus-pmproxy.yml");

    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Arc::new(
        Writer::create(
            &seg,
            &Config {
                heartbeat_interval: Duration::from_secs(1),
                ..Config::default()
            },
        )
        .unwrap(),
    );
    let requests = w.add_family(&workload::requests()).unwrap();
    let api = w.add_member(requests, "api", &[("zone", "a")]).unwrap();
    let latency = w.add_family(&workload::latency("handler")).unwrap();
    let api_latency = w.add_member(latency, "api", &[("zone", "a")]).unwrap();
    let feeder = {
        let w = Arc::clone(&w);
        Paced::start(RATE, move |n| {
            w.member_add(&api, 1).unwrap();
            w.observe(&api_latency, workload::latency_ns(n)).unwrap();
        })
    };
    let pmcd = Pmcd::start(&dir.path().join("pmcd"), &seg, &[]);
    let pmproxy = Pmproxy::start(&dir.path().join("pmproxy"), &pmcd);

    // pmproxy's page itself: PCP's names with dots as underscores, PCP's
    // metadata in comments, and the instance and the PCP labels of the
    // host, the metric and the instance as Prometheus labels.
    let (status, page) = pmproxy.metrics("perfabi.app,perfabi.rpc");
    assert_eq!(status, 200, "{page}\n{}", pmproxy.log());
    println!("pmproxy /metrics?names=perfabi.app,perfabi.rpc:\n{page}");
    for (prefix, want) in [
        ("# PCP5 perfabi.app.requests ", " counter count"),
        ("# HELP perfabi_app_requests ", "Requests served"),
        ("# TYPE perfabi_app_requests ", "counter"),
        ("# PCP5 perfabi.rpc.latency.bucket ", " counter count"),
        ("# TYPE perfabi_rpc_latency_bucket ", "counter"),
        ("# PCP5 perfabi.rpc.latency.sum ", " counter nanosec"),
    ] {
        assert!(
            page.lines()
                .any(|l| l.starts_with(prefix) && l.ends_with(want)),
            "no {prefix}…{want} in\n{page}"
        );
    }
    let all = samples(&page);
    let one = |name: &str, instname: &str| -> &Sample {
        all.iter()
            .find(|s| {
                s.name == name && s.labels.get("instname").map(String::as_str) == Some(instname)
            })
            .unwrap_or_else(|| panic!("no {name}{{instname={instname:?}}} in\n{page}"))
    };
    let req = one("perfabi_app_requests", "api");
    for (k, v) in [("handler", "api"), ("zone", "a"), ("kind", "counter")] {
        assert_eq!(req.labels.get(k).map(String::as_str), Some(v), "{req:?}");
    }
    assert!(
        req.labels.contains_key("instid") && req.labels.contains_key("hostname"),
        "{req:?}"
    );
    assert!(req.value > 0.0, "{req:?}");
    // One fetch of one consistent snapshot: the n observations of the
    // count are the feeder's first n, so each bucket and the sum follow.
    let n = one("perfabi_rpc_latency_count", "api").value as u64;
    let (want, sum) = workload::histogram_after(n);
    let mut bounds = Vec::new();
    for (inst, want) in [
        "api::0-100",
        "api::101-1000",
        "api::1001-10000",
        "api::10001-inf",
    ]
    .into_iter()
    .zip(want)
    {
        let b = one("perfabi_rpc_latency_bucket", inst);
        let label = |k: &str| b.labels.get(k).map(String::as_str);
        assert_eq!(label("statistic"), Some("bucket"), "{b:?}");
        assert_eq!(label("handler"), Some("api"), "{b:?}");
        assert_eq!(label("lower_bound"), inst[5..].split('-').next(), "{b:?}");
        bounds.extend(label("upper_bound").map(|u| u.parse::<u64>().unwrap()));
        assert_eq!(b.value, want as f64, "{inst} of {n} observations: {b:?}");
    }
    assert_eq!(
        bounds, BOUNDS,
        "the upper_bound labels are the writer's bounds"
    );
    assert_eq!(
        one("perfabi_rpc_latency_sum", "api").value,
        sum as f64,
        "{page}"
    );

    // Prometheus scrapes pmproxy with the README's configuration while
    // the README's walk-through runs against the private servers.
    let private = scrape_config.replace("'localhost:44322'", &format!("'{}'", pmproxy.address));
    assert_ne!(
        private, scrape_config,
        "the README's scrape configuration no longer names 'localhost:44322': \
         the test would scrape the host's own pmproxy"
    );
    let prom = Prometheus::with_scrape_configs(&private);
    let archive = dir.path().join("archive");
    let script = dir.path().join("fleet.sh");
    std::fs::write(&script, &walk_through).unwrap();
    let walk = run_limited(
        pmcd.folders(Command::new("sh").arg(&script))
            .env("PMCD", pmcd.host())
            .env("PMPROXY", pmproxy.url())
            .env("METRIC", "perfabi.app.requests")
            .env("CONFIG", pmlogger_config_every_second(dir.path()))
            .env("LOG_SECONDS", "8")
            .env("ARCHIVE", &archive),
        Duration::from_secs(60),
    );
    let walked = &walk.stdout;
    println!("fleet.sh:\n{walked}{}", walk.stderr);
    assert_eq!(walk.code(), Some(0), "fleet.sh failed: {walk:?}");
    // Some 15 s of scrapes in all.
    std::thread::sleep(Duration::from_secs(5));

    let rate_q = "rate(perfabi_app_requests{handler=\"api\"}[5s])";
    let quantile_q = quantile_query(0.5, "perfabi_rpc_latency_bucket", &bounds, "5s");
    let count_q = "rate(perfabi_rpc_latency_count[5s])";
    let near = |v: f64| (v - RATE as f64).abs() <= 0.05 * RATE as f64;
    let (rate, labels, median, observed) = prom.settle(
        Duration::from_secs(20),
        &format!("answers to {rate_q}, {count_q} and {quantile_q}"),
        |p| {
            let (rate, labels) = p.query(rate_q)?;
            let (median, _) = p.query(&quantile_q)?;
            let (observed, _) = p.query(count_q)?;
            Some((
                (rate, labels, median, observed),
                near(rate) && near(observed),
            ))
        },
    );
    let up = prom.query("up{job=\"pcp\"}").map(|(v, _)| v);
    let fed = feeder.stop();
    println!(
        "FLEET-PROMETHEUS through pmproxy: {rate_q} = {rate:.1} (fed {RATE}/s), \
         {count_q} = {observed:.1}, median latency {median:.0} ns (bucket 101-1000), \
         labels {labels}, up {up:?}; {fed} events fed"
    );
    assert!(near(rate), "rate {rate}, want {RATE} ± 5%");
    assert!(
        near(observed),
        "observations {observed}/s, want {RATE} ± 5%"
    );
    assert!(median > 100.0 && median <= 1000.0, "median {median}");
    for (k, v) in [
        ("handler", "api"),
        ("zone", "a"),
        ("instname", "api"),
        ("kind", "counter"),
        ("job", "pcp"),
    ] {
        assert_eq!(labels[k], v, "{k}: {labels}");
    }
    assert_eq!(up, Some(1.0));

    // The walk-through's own output: pmcd, pmproxy and the archive.
    assert!(
        walked.contains("perfabi.segment.available\n    value 1"),
        "{walked}"
    );
    assert!(
        walked.contains("\n# TYPE perfabi_app_requests counter\n"),
        "{walked}"
    );
    let served = samples(
        &walked
            .lines()
            .filter(|l| l.starts_with("perfabi_app_requests{"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert!(
        served.len() == 1 && served[0].labels["instname"] == "api",
        "{walked}"
    );
    let rates = pmval_values(walked);
    println!("FLEET-PMLOGGER pmval of the archive, per second: {rates:?}");
    assert!(rates.len() >= 5, "8 s logged every second: {walked}");
    for r in &rates {
        assert!(
            (r - RATE as f64).abs() <= 0.1 * RATE as f64,
            "rate {r} in the archive, want {RATE} ± 10%: {walked}"
        );
    }
    let logged: Vec<u64> = walked
        .lines()
        .filter(|l| l.contains("(perfabi.app.requests): inst [") && l.contains("\"api\"] value "))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert!(
        logged.len() >= 6 && logged.windows(2).all(|p| p[0] < p[1]),
        "pmdumplog: the counter moves in every record: {logged:?}\n{walked}"
    );
}
