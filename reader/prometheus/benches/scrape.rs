//! One scrape of `perfabi-prometheus`: a snapshot of the segment and its
//! rendering, as `GET /metrics` does (without the socket), for 1,000
//! counters (10 families of 100 instances) on 16 per-CPU blocks
//! (`Config::nr_cpus`, a simulated geometry).
//!
//! For comparison, the same page the way `node_exporter` builds one from
//! `/proc`: a text table of the same 1,000 counters × 16 CPUs (the layout
//! of `/proc/interrupts`: a row per counter, a column per CPU) read from a
//! file, parsed, summed per row and rendered — the page asserted
//! byte-for-byte equal to perfabi's. The table sits in a tmpfs file written
//! once, so the kernel's cost of generating it, which a real `/proc` file
//! pays at every read, is left out: the comparison favours the text side.
//! The host's real `/proc/interrupts`, read and parsed, is measured too, per
//! value, to show what that generation costs.
//!
//! A directory's scrape (`scrape_directory_*`): 100 segments of 20 counter
//! families (a worker's metrics each, 2 CPUs), read and merged
//! (`Directory::read` alone) and the endpoint's whole page (read, merged
//! and rendered), next to one segment of the same 20 families' page: what a
//! directory costs per segment, and what rendering adds to the merge.
//!
//! Histograms (`scrape_100_histograms`): 100 members of a log2 histogram
//! of 24 buckets, on 2 CPUs, as the text formats and as the protobuf
//! exposition with native histograms (classic buckets beside them), each
//! a whole scrape: what the protobuf page costs next to the text ones.
//!
//! `cargo bench -p perfabi-prometheus --bench scrape`

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use perfabi::{Buckets, FamilySpec, Kind, Unit};
use perfabi_prometheus::{Endpoint, Exposition};
use perfabi_reader::exposition::Format;
use perfabi_reader::{Options, Segment, Snapshot};
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

/// The value the writer gave counter `i` of a family on `cpu`: its total
/// over CPUs is what `segment` added once on the CPU it ran on.
fn share(i: u32, cpu: u32) -> u64 {
    let total = u64::from(i) * 1000 + 7;
    total / u64::from(CPUS) + u64::from(cpu < (total % u64::from(CPUS)) as u32)
}

/// The `/proc/interrupts`-style table of the same counters: a header of
/// CPU names, then per counter `family:instance:` and one column per CPU.
fn text_table() -> String {
    let mut t = String::new();
    for cpu in 0..CPUS {
        let _ = write!(t, "{:>11}", format!("CPU{cpu}"));
    }
    t.push('\n');
    for f in 0..FAMILIES {
        for i in 0..INSTANCES {
            let _ = write!(t, "f{f}:dev{i}:");
            for cpu in 0..CPUS {
                let _ = write!(t, " {:>10}", share(i, cpu));
            }
            t.push('\n');
        }
    }
    t
}

/// What a `node_exporter` collector does per scrape: read the table,
/// parse every row, sum its CPU columns, render the page (OpenMetrics, as
/// perfabi's endpoint renders it for the same counters).
fn text_scrape(path: &std::path::Path, page: &mut String) {
    let text = std::fs::read_to_string(path).unwrap();
    page.clear();
    let mut family = "";
    for line in text.lines().skip(1) {
        let mut cols = line.split_ascii_whitespace();
        let key = cols.next().unwrap().trim_end_matches(':');
        let (f, instance) = key.split_once(':').unwrap();
        let total = cols.fold(0u64, |a, c| a.wrapping_add(c.parse::<u64>().unwrap()));
        if f != family {
            family = f;
            let _ = writeln!(page, "# TYPE perfabi_bench_{f}_bytes counter");
            let _ = writeln!(page, "# UNIT perfabi_bench_{f}_bytes bytes");
            let _ = writeln!(page, "# HELP perfabi_bench_{f}_bytes Bytes moved");
        }
        let _ = writeln!(
            page,
            "perfabi_bench_{f}_bytes_total{{device=\"{instance}\"}} {total}"
        );
    }
    page.push_str("# EOF\n");
}

/// The host's `/proc/interrupts`, read and parsed (every per-CPU column of
/// every numbered row); returns the values parsed.
fn proc_interrupts() -> usize {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    let mut lines = text.lines();
    let cpus = lines
        .next()
        .map_or(0, |h| h.split_ascii_whitespace().count());
    let mut n = 0;
    for line in lines {
        let mut cols = line.split_ascii_whitespace().skip(1);
        for _ in 0..cpus {
            match cols.next().and_then(|c| c.parse::<u64>().ok()) {
                Some(v) => {
                    black_box(v);
                    n += 1;
                }
                None => break,
            }
        }
    }
    n
}

fn scrape(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = segment(&path);
    let totals = Endpoint::new(&path, Options::default(), false);
    let per_cpu = Endpoint::new(&path, Options::default(), true);
    let page = totals.scrape(Format::OpenMetrics).unwrap();
    assert_eq!(
        page.lines().filter(|l| !l.starts_with('#')).count(),
        (FAMILIES * INSTANCES) as usize
    );
    // The text side, in a tmpfs file when there is one (as /proc is in
    // memory), and the same page from it.
    let shm = std::path::Path::new("/dev/shm");
    let tdir = tempfile::tempdir_in(if shm.is_dir() { shm } else { dir.path() }).unwrap();
    let table = tdir.path().join("interrupts");
    std::fs::write(&table, text_table()).unwrap();
    let mut text_page = String::new();
    text_scrape(&table, &mut text_page);
    assert_eq!(text_page, page, "the text side must render the same page");
    let values = proc_interrupts();
    let mut seg = Segment::open(&path).unwrap();
    let mut snap = Snapshot::default();

    let mut g = c.benchmark_group("scrape_1000_counters_16_cpus");
    // The snapshot alone (metadata decoded once, then values only, as the
    // endpoint's scrapes do): the rest of a scrape is rendering.
    g.bench_function("snapshot_only", |b| {
        b.iter(|| {
            seg.snapshot_into(&mut snap).unwrap();
            black_box(&snap);
        })
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
    g.bench_function("node_exporter_style_text_table", |b| {
        b.iter(|| {
            text_scrape(&table, &mut text_page);
            black_box(&text_page);
        })
    });
    g.finish();
    let mut g = c.benchmark_group(format!("host_proc_interrupts_{values}_values"));
    g.bench_function("read_and_parse", |b| {
        b.iter(|| black_box(proc_interrupts()))
    });
    g.finish();
    drop(w);
}

/// Segments in the directory of `scrape_directory`.
const DIR_SEGMENTS: usize = 100;
/// Families of each of its segments.
const DIR_FAMILIES: u32 = 20;

/// A worker's segment in `dir`: [`DIR_FAMILIES`] counters of one series.
fn worker(dir: &std::path::Path, k: usize) -> Writer {
    let w = Writer::create_in(
        dir,
        &format!("w{k}"),
        &Config {
            nr_cpus: Some(2),
            max_instances: 64,
            max_families: 32,
            max_members: 32,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    for f in 0..DIR_FAMILIES {
        let fam = w
            .add_family(&FamilySpec::new(
                &format!("app.f{f}"),
                "Requests",
                "",
                Kind::Counter,
                Unit::COUNT,
            ))
            .unwrap();
        let m = w.add_member(fam, "", &[]).unwrap();
        w.member_add(&m, (k as i64 + 1) * 10).unwrap();
    }
    w
}

fn scrape_directory(c: &mut Criterion) {
    use perfabi_reader::directory::{Directory, DirectoryOptions};
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let writers: Vec<Writer> = (0..DIR_SEGMENTS).map(|k| worker(&dir, k)).collect();
    let one_dir = top.path().join("one");
    std::fs::create_dir(&one_dir).unwrap();
    let one = worker(&one_dir, 0);
    let one_path = std::fs::read_dir(&one_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "perfabi"))
        .unwrap();
    let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
    assert_eq!(d.read().unwrap().segments, DIR_SEGMENTS);
    let endpoint = Endpoint::directory(&dir, DirectoryOptions::default());
    let page = endpoint.scrape(Format::OpenMetrics).unwrap();
    let sum: usize = (1..=DIR_SEGMENTS).map(|k| k * 10).sum();
    assert!(
        page.contains(&format!("perfabi_app_f0_total {sum}\n")),
        "{page}"
    );
    let single = Endpoint::new(&one_path, Options::default(), false);
    let mut g = c.benchmark_group(format!(
        "scrape_directory_{DIR_SEGMENTS}_segments_{DIR_FAMILIES}_families"
    ));
    g.bench_function("directory_read_only", |b| {
        b.iter(|| black_box(d.read().unwrap()))
    });
    g.bench_function("directory_openmetrics", |b| {
        b.iter(|| black_box(endpoint.scrape(Format::OpenMetrics).unwrap()))
    });
    g.bench_function("one_segment_openmetrics", |b| {
        b.iter(|| black_box(single.scrape(Format::OpenMetrics).unwrap()))
    });
    g.finish();
    drop((writers, one));
}

/// 100 members of one log2 histogram family (24 buckets of ns, not
/// converted), 2 CPUs, each member with observations in a dozen buckets.
fn scrape_histograms(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(2),
            max_instances: 4096,
            max_families: 2,
            max_members: 128,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let fam = w
        .add_family(&FamilySpec::histogram(
            "bench.latency",
            "Request latency",
            "route",
            Unit::NS,
            Buckets::Log2 { first: 10, n: 24 },
        ))
        .unwrap();
    for i in 0..100 {
        let m = w.add_member(fam, &format!("r{i}"), &[]).unwrap();
        for k in 0..1000u64 {
            w.observe(&m, 1000 + k * k * 37 + i).unwrap();
        }
    }
    let e = Endpoint::new(&path, Options::default(), false);
    let mut g = c.benchmark_group("scrape_100_histograms");
    for (name, exposition) in [
        ("openmetrics", Exposition::Text(Format::OpenMetrics)),
        ("prometheus_text", Exposition::Text(Format::Prometheus)),
        ("protobuf_native", Exposition::Protobuf),
    ] {
        let bytes = e.page(exposition).unwrap().len();
        println!("scrape_100_histograms/{name}: a page of {bytes} bytes");
        g.bench_function(name, |b| b.iter(|| black_box(e.page(exposition).unwrap())));
    }
    g.finish();
    drop(w);
}

criterion_group!(benches, scrape, scrape_directory, scrape_histograms);
criterion_main!(benches);
