//! Benchmark: reading 10 per-CPU statistics × all CPUs: through the reader, vs opening,
//! reading and parsing the same values as `/proc/stat` text (a tmpfs copy,
//! and the real `/proc/stat`), side by side in one run.
//!
//! `cargo bench -p perfabi-exportd --bench read`, then
//! `python3 perfabi/shm/benches/ratios.py` for the ratios.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use perfabi_reader::Segment;
use perfabi_shm::writer::{Config, Writer};

use perfabi_exportd::procfs::CPU_FIELDS as FIELDS;

/// The text route: open, read and parse the per-CPU lines.
fn read_parse(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    perfabi_exportd::procfs::stat_times(&text).len()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let copy = dir.path().join("stat.txt");
    std::fs::write(&copy, &stat).unwrap();
    let per_cpu: Vec<[u64; 10]> = perfabi_exportd::procfs::stat_times(&stat)
        .into_values()
        .collect();

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
    for (f, field) in FIELDS.iter().enumerate() {
        let id = w
            .add_external(
                &format!("cpu.{field}"),
                "ticks",
                perfabi::Semantics::Counter,
                perfabi::ValueType::U64,
            )
            .unwrap();
        let values: Vec<u64> = per_cpu.iter().map(|v| v[f]).collect();
        w.publish_per_cpu(id, &values).unwrap();
    }

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
    g.bench_function("text_copy_open_read_parse", |b| {
        b.iter(|| read_parse(black_box(&copy)))
    });
    g.bench_function("proc_stat_open_read_parse", |b| {
        b.iter(|| read_parse(black_box(Path::new("/proc/stat"))))
    });
    g.finish();
    drop(w);
}

criterion_group!(benches, bench);
criterion_main!(benches);
