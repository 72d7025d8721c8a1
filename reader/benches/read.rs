//! Benchmark: reading 10 per-CPU statistics × all CPUs: through the reader, vs opening,
//! reading and parsing the same values as `/proc/stat` text (a tmpfs copy,
//! and the real `/proc/stat`), side by side in one run.
//!
//! `cargo bench -p perfabi-reader --bench read`, then
//! `python3 perfabi/benches/ratios.py` for the ratios.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use perfabi::writer::{Config, Writer};
use perfabi_reader::Segment;

const FIELDS: [&str; 10] = [
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
];

/// Parses the `cpuN` lines of `/proc/stat` text into 10 values per CPU.
fn parse_stat(text: &str, out: &mut Vec<[u64; 10]>) {
    out.clear();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            continue; // the aggregate "cpu " line
        }
        let mut v = [0u64; 10];
        for (slot, field) in v.iter_mut().zip(rest.split_ascii_whitespace().skip(1)) {
            *slot = field.parse().unwrap_or(0);
        }
        out.push(v);
    }
}

fn read_parse(path: &Path, out: &mut Vec<[u64; 10]>) {
    let text = std::fs::read_to_string(path).unwrap();
    parse_stat(&text, out);
}

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).unwrap();
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let copy = dir.path().join("stat.txt");
    std::fs::write(&copy, &stat).unwrap();
    let mut per_cpu = Vec::new();
    parse_stat(&stat, &mut per_cpu);

    // The same values in a segment, each CPU's in its own block.
    let seg_path = dir.path().join("stat.seg");
    let w = Writer::create(
        &seg_path,
        &Config {
            max_instances: 16,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let ids: Vec<_> = FIELDS
        .iter()
        .map(|f| {
            w.add(&format!("cpu.{f}"), "ticks", perfabi::Semantics::Counter)
                .unwrap()
        })
        .collect();
    let all = rustix::thread::sched_getaffinity(None).unwrap();
    for (cpu, vals) in per_cpu.iter().enumerate() {
        pin(cpu);
        for (id, &v) in ids.iter().zip(vals) {
            w.adjust(*id, v as i64).unwrap();
        }
    }
    rustix::thread::sched_setaffinity(None, &all).unwrap();

    let mut seg = Segment::open(&seg_path).unwrap();
    let handles: Vec<_> = FIELDS
        .iter()
        .map(|f| seg.handle(&format!("cpu.{f}")).unwrap())
        .collect();
    let mut values = vec![0u64; handles.len() * seg.nr_cpus()];
    seg.read_many(&handles, &mut values).unwrap();
    for (k, _) in FIELDS.iter().enumerate() {
        for (cpu, vals) in per_cpu.iter().enumerate() {
            assert_eq!(
                values[k * seg.nr_cpus() + cpu],
                vals[k],
                "segment holds /proc/stat's values"
            );
        }
    }

    let mut g = c.benchmark_group("stat_10x_cpus");
    g.bench_function("perfabi_reader", |b| {
        b.iter(|| seg.read_many(black_box(&handles), &mut values).unwrap())
    });
    let mut parsed = Vec::new();
    g.bench_function("text_copy_open_read_parse", |b| {
        b.iter(|| read_parse(black_box(&copy), &mut parsed))
    });
    g.bench_function("proc_stat_open_read_parse", |b| {
        b.iter(|| read_parse(black_box(Path::new("/proc/stat")), &mut parsed))
    });
    g.finish();
    drop(w);
}

criterion_group!(benches, bench);
criterion_main!(benches);
