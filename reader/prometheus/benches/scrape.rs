//! One scrape of `perfabi-prometheus`: a snapshot of the segment and its
//! rendering, as `GET /metrics` does (without the socket), for 1,000
//! counters (10 families of 100 instances) on 16 per-CPU blocks
//! (`Config::nr_cpus`, a simulated geometry).
//!
//! `cargo bench -p perfabi-prometheus --bench scrape`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use perfabi::{FamilySpec, Kind, Unit};
use perfabi_prometheus::Endpoint;
use perfabi_reader::exposition::Format;
use perfabi_reader::Options;
use perfabi_shm::writer::{Config, Writer};

const CPUS: u32 = 16;
const FAMILIES: u32 = 10;
const INSTANCES: u32 = 100;

fn segment(path: &std::path::Path) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            nr_cpus: Some(CPUS),
            max_instances: 1024,
            max_families: 16,
            max_members: 1024,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    for f in 0..FAMILIES {
        let fam = w
            .add_family(&FamilySpec::new(
                &format!("bench.f{f}_bytes"),
                "Bytes moved",
                "device",
                Kind::Counter,
                Unit::BYTES,
            ))
            .unwrap();
        for i in 0..INSTANCES {
            let m = w.add_member(fam, &format!("dev{i}"), &[]).unwrap();
            w.member_add(&m, i64::from(i) * 1000 + 7).unwrap();
        }
    }
    w
}

fn scrape(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = segment(&path);
    let totals = Endpoint::new(&path, Options::default(), false);
    let per_cpu = Endpoint::new(&path, Options::default(), true);
    let page = totals.scrape(Format::OpenMetrics).unwrap();
    assert_eq!(
        page.lines().filter(|l| !l.starts_with('#')).count(),
        (FAMILIES * INSTANCES) as usize
    );
    let mut g = c.benchmark_group("scrape_1000_counters_16_cpus");
    // The snapshot alone: the rest of a scrape is rendering.
    g.bench_function("snapshot_only", |b| {
        b.iter(|| black_box(totals.snapshot().unwrap()))
    });
    g.bench_function("openmetrics", |b| {
        b.iter(|| black_box(totals.scrape(Format::OpenMetrics).unwrap()))
    });
    g.bench_function("prometheus_text", |b| {
        b.iter(|| black_box(totals.scrape(Format::Prometheus).unwrap()))
    });
    g.bench_function("openmetrics_per_cpu", |b| {
        b.iter(|| black_box(per_cpu.scrape(Format::OpenMetrics).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, scrape);
criterion_main!(benches);
