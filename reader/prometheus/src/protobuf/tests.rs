//! The protobuf page of a segment written here, decoded with prost: the
//! families, names, help, labels and values of the text page, and every
//! histogram's buckets as worked out by hand.

use super::metrics::{Bucket, BucketSpan, MetricFamily, MetricType};
use crate::{Endpoint, Exposition};
use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Unit, ValueType};
use perfabi_reader::exposition::Format;
use perfabi_reader::Options;
use perfabi_shm::writer::{Config, Writer};
use prost::Message;

/// Every `MetricFamily` of a length-delimited page, in order.
fn decode(mut page: &[u8]) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    while !page.is_empty() {
        out.push(MetricFamily::decode_length_delimited(&mut page).expect("a delimited message"));
    }
    out
}

fn family<'a>(page: &'a [MetricFamily], name: &str) -> &'a MetricFamily {
    page.iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("no family {name} in {page:#?}"))
}

fn spans(s: &[(i32, u32)]) -> Vec<BucketSpan> {
    s.iter()
        .map(|&(o, l)| BucketSpan {
            offset: Some(o),
            length: Some(l),
        })
        .collect()
}

#[test]
fn a_segment_as_the_protobuf_exposition() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let cfg = Config {
        max_instances: 256,
        max_families: 8,
        max_members: 16,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create(&path, &cfg).unwrap();
    let ops = w
        .add_family(&FamilySpec::new(
            "io.ops",
            "Operations \"done\"",
            "dev",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let sda = w.add_member(ops, "sda", &[("zone", "a")]).unwrap();
    w.member_add(&sda, 7).unwrap();
    let level = w
        .add_family(&FamilySpec {
            value_type: ValueType::I64,
            ..FamilySpec::gauge("app.level", "", "", Unit::NONE, GaugeMode::Sum)
        })
        .unwrap();
    let level = w.add_member(level, "", &[]).unwrap();
    w.member_add(&level, -3).unwrap();
    // LOG2, no unit conversion: [0,1], (1,2], (2,4], (4,8], (8,16],
    // (16,32], (32,64], +Inf.
    let lat = w
        .add_family(&FamilySpec::histogram(
            "rpc.latency",
            "RPC latency",
            "",
            Unit::NS,
            Buckets::Log2 { first: 0, n: 8 },
        ))
        .unwrap();
    let lat = w.add_member(lat, "", &[]).unwrap();
    for v in [0, 1, 3, 4, 5, 20, 30, 31, 1000] {
        w.observe(&lat, v).unwrap();
    }
    // LOG2 in KiB, named in bytes: the page scales by 2^10.
    let size = w
        .add_family(&FamilySpec::histogram(
            "io.size_bytes",
            "Request sizes",
            "",
            Unit::KIB,
            Buckets::Log2 { first: 2, n: 4 },
        ))
        .unwrap();
    let size = w.add_member(size, "", &[]).unwrap();
    for v in [1, 4, 5, 16, 17] {
        w.observe(&size, v).unwrap();
    }
    // LOG2 in ns, named in seconds: no schema-0 buckets in seconds.
    let wait = w
        .add_family(&FamilySpec::histogram(
            "lock.wait_seconds",
            "Lock waits",
            "",
            Unit::NS,
            Buckets::Log2 { first: 10, n: 3 },
        ))
        .unwrap();
    let wait = w.add_member(wait, "", &[]).unwrap();
    w.observe(&wait, 1500).unwrap();
    // EXPLICIT: classic buckets only.
    let sizes = w
        .add_family(&FamilySpec::histogram(
            "io.batch",
            "Batch sizes",
            "",
            Unit::COUNT,
            Buckets::Explicit(vec![10, 100]),
        ))
        .unwrap();
    let sizes = w.add_member(sizes, "", &[]).unwrap();
    for v in [5, 50, 500] {
        w.observe(&sizes, v).unwrap();
    }

    let e = Endpoint::new(&path, Options::default(), false);
    let page = decode(&e.page(Exposition::Protobuf).unwrap());
    let text = e.scrape(Format::Prometheus).unwrap();

    // One MetricFamily per family of the text page, in its order, named as
    // its samples there.
    let names: Vec<&str> = page.iter().map(|f| f.name()).collect();
    assert_eq!(
        names,
        [
            "perfabi_io_ops_total",
            "perfabi_app_level",
            "perfabi_rpc_latency",
            "perfabi_io_size_bytes",
            "perfabi_lock_wait_seconds",
            "perfabi_io_batch"
        ]
    );
    for f in &page {
        let typ = match f.r#type() {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            t => panic!("{t:?}"),
        };
        assert!(
            text.contains(&format!("# TYPE {} {typ}\n", f.name())),
            "{}: {text}",
            f.name()
        );
    }

    let ops = family(&page, "perfabi_io_ops_total");
    assert_eq!(ops.r#type(), MetricType::Counter);
    // Help unescaped (the text page escapes it), with the unit as there.
    assert_eq!(ops.help(), "Operations \"done\" (unit: count)");
    let m = &ops.metric[0];
    let labels: Vec<(&str, &str)> = m.label.iter().map(|l| (l.name(), l.value())).collect();
    assert_eq!(labels, [("dev", "sda"), ("zone", "a")]);
    assert_eq!(m.counter.as_ref().unwrap().value(), 7.0);

    let level = family(&page, "perfabi_app_level");
    assert_eq!(level.r#type(), MetricType::Gauge);
    assert_eq!(level.metric[0].gauge.as_ref().unwrap().value(), -3.0);

    // Worked out by hand: zero bucket {0, 1}; (2,4]: 3, 4; (4,8]: 5;
    // (16,32]: 20, 30, 31; +Inf, served as (64,128]: 1000.
    let h = family(&page, "perfabi_rpc_latency").metric[0]
        .histogram
        .clone()
        .unwrap();
    assert_eq!(h.sample_count(), 9);
    assert_eq!(h.sample_sum(), 1094.0);
    assert_eq!(h.schema(), 0);
    assert_eq!(h.zero_threshold(), 1.0);
    assert_eq!(h.zero_count(), 2);
    assert_eq!(h.positive_span, spans(&[(2, 2), (1, 1), (1, 1)]));
    assert_eq!(h.positive_delta, [2, -1, 2, -2]);
    // The classic buckets as the text page has them (no +Inf).
    let classic: Vec<(f64, u64)> = h
        .bucket
        .iter()
        .map(|b| (b.upper_bound(), b.cumulative_count()))
        .collect();
    assert_eq!(
        classic,
        [
            (1.0, 2),
            (2.0, 2),
            (4.0, 4),
            (8.0, 5),
            (16.0, 5),
            (32.0, 8),
            (64.0, 8)
        ]
    );
    assert!(
        text.contains("perfabi_rpc_latency_bucket{le=\"32\"} 8\n"),
        "{text}"
    );

    // KiB shown in bytes: bucket bounds 2^(2+k) KiB = 2^(12+k) bytes.
    // Zero bucket [0, 4 KiB]: 1, 4; (4, 8] KiB: 5; (8, 16] KiB: 16;
    // +Inf as (16, 32] KiB: 17.
    let h = family(&page, "perfabi_io_size_bytes").metric[0]
        .histogram
        .clone()
        .unwrap();
    assert_eq!(h.zero_threshold(), 4096.0);
    assert_eq!(h.zero_count(), 2);
    assert_eq!(h.positive_span, spans(&[(13, 3)]));
    assert_eq!(h.positive_delta, [1, 0, 0]);
    assert_eq!(h.sample_sum(), 43.0 * 1024.0);
    assert_eq!(family(&page, "perfabi_io_size_bytes").unit(), "bytes");

    // Seconds of nanoseconds: classic only, bounds as the text reads them.
    let h = family(&page, "perfabi_lock_wait_seconds").metric[0]
        .histogram
        .clone()
        .unwrap();
    assert_eq!(h.schema, None);
    assert_eq!((h.zero_threshold, h.positive_span.len()), (None, 0));
    assert_eq!(
        h.bucket,
        [
            Bucket {
                cumulative_count: Some(0),
                upper_bound: Some(1.024e-6),
                ..Bucket::default()
            },
            Bucket {
                cumulative_count: Some(1),
                upper_bound: Some(2.048e-6),
                ..Bucket::default()
            }
        ]
    );
    assert_eq!(h.sample_sum(), 1.5e-6);

    let h = family(&page, "perfabi_io_batch").metric[0]
        .histogram
        .clone()
        .unwrap();
    assert_eq!(h.schema, None);
    assert_eq!(h.sample_count(), 3);
    let classic: Vec<(f64, u64)> = h
        .bucket
        .iter()
        .map(|b| (b.upper_bound(), b.cumulative_count()))
        .collect();
    assert_eq!(classic, [(10.0, 1), (100.0, 2)]);

    // Per-CPU series carry the cpu label first, as on the text page.
    let per_cpu = Endpoint::new(&path, Options::default(), true);
    let page = decode(&per_cpu.page(Exposition::Protobuf).unwrap());
    let ops = family(&page, "perfabi_io_ops_total");
    assert!(!ops.metric.is_empty());
    let total: f64 = ops
        .metric
        .iter()
        .map(|m| {
            assert_eq!(m.label[0].name(), "cpu");
            m.counter.as_ref().unwrap().value()
        })
        .sum();
    assert_eq!(total, 7.0);
}

/// A family with no member has no metric family on the page (none to
/// Prometheus); an empty segment is an empty page.
#[test]
fn families_without_series_are_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let cfg = Config {
        max_instances: 16,
        max_families: 2,
        max_members: 2,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create(&path, &cfg).unwrap();
    let e = Endpoint::new(&path, Options::default(), false);
    assert!(e.page(Exposition::Protobuf).unwrap().is_empty());
    w.add_family(&FamilySpec::new("a.b", "", "x", Kind::Counter, Unit::NONE))
        .unwrap();
    assert!(e.page(Exposition::Protobuf).unwrap().is_empty());
}

/// A directory of segments as the protobuf exposition: the merged
/// histogram of two writers is one native histogram with both writers'
/// observations, beside the reader's own gauges, as on the text page.
#[test]
fn a_directory_as_the_protobuf_exposition() {
    use perfabi_reader::directory::DirectoryOptions;
    let dir = tempfile::tempdir().unwrap();
    let spec = FamilySpec::histogram(
        "rpc.latency",
        "RPC latency",
        "",
        Unit::NS,
        Buckets::Log2 { first: 0, n: 8 },
    );
    let cfg = Config {
        max_instances: 64,
        max_families: 2,
        max_members: 2,
        damon_capacity: 0,
        ..Config::default()
    };
    let mut writers = Vec::new();
    for (name, observations) in [("a", &[0u64, 3][..]), ("b", &[4, 100][..])] {
        let w = Writer::create_in(dir.path(), name, &cfg).unwrap();
        let f = w.add_family(&spec).unwrap();
        let m = w.add_member(f, "", &[]).unwrap();
        for &v in observations {
            w.observe(&m, v).unwrap();
        }
        writers.push(w);
    }
    let e = Endpoint::directory(dir.path(), DirectoryOptions::default());
    let page = decode(&e.page(Exposition::Protobuf).unwrap());
    let text = e.scrape(Format::Prometheus).unwrap();
    let lat = family(&page, "perfabi_rpc_latency");
    assert_eq!(lat.metric.len(), 1, "{lat:#?}");
    let h = lat.metric[0].histogram.as_ref().unwrap();
    // 0 in the zero bucket; 3 and 4 at index 2; 100 at index 7 (+Inf).
    assert_eq!((h.zero_count(), h.sample_count()), (1, 4));
    assert_eq!(h.positive_span, spans(&[(2, 1), (4, 1)]));
    assert_eq!(h.positive_delta, [2, -1]);
    assert!(text.contains("perfabi_rpc_latency_count 4\n"), "{text}");
    let segments = family(&page, "perfabi_directory_segments");
    assert_eq!(segments.metric[0].gauge.as_ref().unwrap().value(), 2.0);
}
