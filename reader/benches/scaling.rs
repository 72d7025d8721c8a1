//! How the reader's cost grows with the machine: segments of simulated
//! geometry (`Config::nr_cpus` 2, 3, 4, 16, 256, and powers of two
//! beside counts a few apart: 60, 64, 68, 500, 512, 513, 520, 1,000,
//! 1,024, 1,040 per-CPU blocks;
//! 30, 1,024 and 4,080 value slots per block) made by the real writer and
//! read by the real reader, each operation beside its floors on the same
//! bytes, measured in the same run:
//!
//! * `handle`: [`Segment::read`] of one counter, summed over the CPUs;
//! * `many`: [`Segment::read_many`] of the first 30 counters of the block
//!   (14 in the 30-slot blocks, whose other 16 slots are the family's),
//!   the call an agent reading "these 30 counters" makes; its floor
//!   loads the same words CPU by CPU into a CPU-major buffer (the
//!   reader's output is counter major: `nr_cpus` values per counter), and
//!   `naive_many` is the floor's loop storing each value straight into a
//!   counter-major buffer, as `read_many` did until it wrote a run of
//!   CPUs at a time (a tile, now a window of up to 8 CPUs): 10x slower
//!   per value when `nr_cpus` is a multiple of 512;
//! * `family`: [`Segment::read_family`] of a 16-instance family (the last
//!   value slots);
//! * `snapshot`: [`Segment::snapshot_into`], every used slot on every CPU;
//! * `loop_*`: the floor of a lock-free read: per CPU block the sequence
//!   word, the same values (relaxed atomic loads), the sequence word again;
//! * `copy_*`: `copy_from_slice` of the same value bytes, block by block.
//!
//! Plus `proc_stat/read_parse`: opening, reading and parsing `/proc/stat`
//! at this machine's real CPU count, the text route's anchor.
//!
//! The loop floor reads the segment through a mapping of its own (the
//! same file, so the same pages), the copy floor a private copy of its
//! bytes in the same places; the writer stores every value with
//! `publish_per_cpu`, so every block holds distinct non-zero values.
//!
//! Time is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`,
//! `support::ThreadTime`), not the wall clock: on these shared 2-core machines a
//! sample during which the thread waited for a core is otherwise counted
//! whole, while cache and TLB misses are in CPU time either way. Every
//! operation and its floors are measured the same way.
//!
//! `reader/benches/scaling.py` runs this and prints one table;
//! `PERFABI_SCALING_SHORT=1` measures briefly (CI).

use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BenchmarkGroup, Criterion, Throughput};
use perfabi::layout::CPU_SEQ_WORD;
use perfabi::Layout;
use perfabi_reader::{FamilyValues, Segment, Snapshot};

mod support;
use support::{loop_floor, loop_many, segment, ThreadTime, FAMILY};

const CPUS: [u32; 15] = [
    2, 3, 4, 16, 60, 64, 68, 256, 500, 512, 513, 520, 1000, 1024, 1040,
];
/// Counters read by `many` (fewer if the block has fewer).
const MANY: usize = 30;
/// 4,080 slots make a block of exactly 8 pages of 4 KiB (128 + 8 × 4,080).
const INSTANCES: [u32; 3] = [30, 1024, 4080];

/// The segment's words for the floors: the shared mapping itself (the
/// same file, so the same pages), and a private copy of its bytes in the
/// same places, for `copy_from_slice` (plain memory: a copy of shared
/// memory another process may write would be a data race).
struct Map {
    shared: perfabi_shm::SegmentMap,
    private: Vec<u64>,
}

impl Map {
    fn new(path: &Path) -> Self {
        let file = std::fs::File::open(path).unwrap();
        let md = file.metadata().unwrap();
        let shared =
            perfabi_shm::SegmentMap::new(file, &md, perfabi::trust::Origin::File, u64::MAX)
                .unwrap();
        let private = shared
            .words()
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect();
        Self { shared, private }
    }

    fn atomics(&self) -> &[AtomicU64] {
        self.shared.words()
    }

    fn plain(&self) -> &[u64] {
        &self.private
    }
}

/// [`loop_many`] storing counter major (`nr_cpus` words per slot), each
/// value as it is loaded: `read_many`'s loop before it wrote runs of CPUs.
fn naive_many(words: &[AtomicU64], l: &Layout, slots: &[usize], out: &mut [u64]) -> u64 {
    let n = l.nr_cpus;
    let mut seqs = 0u64;
    for cpu in 0..n {
        let seq = &words[l.cpu_block_word(cpu) + CPU_SEQ_WORD];
        let s1 = seq.load(Ordering::Relaxed);
        for (k, &s) in slots.iter().enumerate() {
            out[k * n + cpu] = words[l.counter_word(cpu, s)].load(Ordering::Relaxed);
        }
        seqs = seqs.wrapping_add(s1 ^ seq.load(Ordering::Relaxed));
    }
    seqs
}

/// Floor of the same bytes as plain memory: one `copy_from_slice` per block.
fn copy_floor(words: &[u64], l: &Layout, first: usize, out: &mut [u64]) {
    let n = out.len() / l.nr_cpus;
    for (cpu, row) in out.chunks_exact_mut(n).enumerate() {
        row.copy_from_slice(&words[l.counter_word(cpu, first)..][..n]);
    }
}

/// The text route: open, read and parse every `cpu` line of `/proc/stat`.
/// Returns the number of values parsed.
fn proc_stat(buf: &mut String) -> usize {
    use std::io::Read;
    buf.clear();
    std::fs::File::open("/proc/stat")
        .unwrap()
        .read_to_string(buf)
        .unwrap();
    let mut n = 0;
    let mut sum = 0u64;
    for line in buf.lines().take_while(|l| l.starts_with("cpu")) {
        for v in line.split_ascii_whitespace().skip(1) {
            sum = sum.wrapping_add(v.parse::<u64>().unwrap());
            n += 1;
        }
    }
    black_box(sum);
    n
}

fn geometry(g: &mut BenchmarkGroup<'_, ThreadTime>, path: &Path, cpus: u32) {
    let mut seg = Segment::open(path).unwrap();
    let map = Map::new(path);
    let layout = *perfabi::view::SegmentView::new(map.atomics())
        .unwrap()
        .layout();
    let nr = seg.nr_cpus();
    assert_eq!(nr, cpus as usize);
    let used = seg.snapshot().unwrap().slots;
    let fam_first = used - FAMILY as usize;

    // One counter: the first slot (every read touches one word per block).
    let h = seg.handle("c0").unwrap();
    let mut per_cpu = vec![0u64; nr];
    g.throughput(Throughput::Elements(nr as u64));
    g.bench_function("handle", |b| {
        b.iter(|| {
            seg.read(black_box(&h), &mut per_cpu).unwrap();
            per_cpu.iter().fold(0u64, |a, &v| a.wrapping_add(v))
        })
    });
    g.bench_function("loop_handle", |b| {
        b.iter(|| {
            let s = loop_floor(map.atomics(), &layout, 0, &mut per_cpu);
            per_cpu.iter().fold(s, |a, &v| a.wrapping_add(v))
        })
    });
    g.bench_function("copy_handle", |b| {
        b.iter(|| {
            copy_floor(map.plain(), &layout, 0, &mut per_cpu);
            per_cpu.iter().fold(0u64, |a, &v| a.wrapping_add(v))
        })
    });

    // The first MANY counters, one read.
    let counters = used - FAMILY as usize;
    let k = MANY.min(counters);
    let slots: Vec<usize> = (0..k).collect();
    let hs: Vec<_> = slots
        .iter()
        .map(|s| seg.handle(&format!("c{s}")).unwrap())
        .collect();
    assert!(hs
        .iter()
        .zip(&slots)
        .all(|(h, &s)| h.instance().slot as usize == s));
    let mut many = vec![0u64; nr * k];
    seg.read_many(&hs, &mut many).unwrap();
    for (row, &s) in many.chunks_exact(nr).zip(&slots) {
        assert!(row
            .iter()
            .enumerate()
            .all(|(c, &v)| v == ((s as u64) << 20) + c as u64));
    }
    let expect = many.clone();
    g.throughput(Throughput::Elements(many.len() as u64));
    g.bench_function("many", |b| {
        b.iter(|| seg.read_many(black_box(&hs), black_box(&mut many)).unwrap())
    });
    assert_eq!(many, expect);
    g.bench_function("loop_many", |b| {
        b.iter(|| loop_many(map.atomics(), &layout, &slots, black_box(&mut many)))
    });
    g.bench_function("naive_many", |b| {
        b.iter(|| naive_many(map.atomics(), &layout, &slots, black_box(&mut many)))
    });

    // One family of FAMILY members.
    let mut fh = seg.family_handle("bench.fam").unwrap();
    let mut fv = FamilyValues::default();
    seg.read_family(&mut fh, &mut fv).unwrap();
    assert_eq!(fv.len(), FAMILY as usize);
    let mut fam = vec![0u64; nr * FAMILY as usize];
    g.throughput(Throughput::Elements(fam.len() as u64));
    g.bench_function("family", |b| {
        b.iter(|| {
            seg.read_family(black_box(&mut fh), black_box(&mut fv))
                .unwrap()
        })
    });
    g.bench_function("loop_family", |b| {
        b.iter(|| loop_floor(map.atomics(), &layout, fam_first, black_box(&mut fam)))
    });
    g.bench_function("copy_family", |b| {
        b.iter(|| copy_floor(map.plain(), &layout, fam_first, black_box(&mut fam)))
    });

    // Every used slot on every CPU.
    let mut snap = Snapshot::default();
    seg.snapshot_into(&mut snap).unwrap();
    let mut all = vec![0u64; nr * used];
    g.throughput(Throughput::Elements(all.len() as u64));
    g.bench_function("snapshot", |b| {
        b.iter(|| seg.snapshot_into(black_box(&mut snap)).unwrap())
    });
    g.bench_function("loop_snapshot", |b| {
        b.iter(|| loop_floor(map.atomics(), &layout, 0, black_box(&mut all)))
    });
    g.bench_function("copy_snapshot", |b| {
        b.iter(|| copy_floor(map.plain(), &layout, 0, black_box(&mut all)))
    });
}

fn main() {
    let short = std::env::var_os("PERFABI_SCALING_SHORT").is_some_and(|v| v != "0");
    let (warm, measure) = if short {
        (Duration::from_millis(20), Duration::from_millis(60))
    } else {
        (Duration::from_millis(100), Duration::from_millis(400))
    };
    let mut c = Criterion::default()
        .with_measurement(ThreadTime)
        .warm_up_time(warm)
        .measurement_time(measure)
        .sample_size(10)
        .without_plots()
        .configure_from_args();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    for cpus in CPUS {
        for instances in INSTANCES {
            let path = dir.path().join(format!("{cpus}x{instances}"));
            let w = segment(&path, cpus, instances);
            let mut g = c.benchmark_group(format!("scaling_{cpus}x{instances}"));
            geometry(&mut g, &path, cpus);
            g.finish();
            drop(w);
            std::fs::remove_file(&path).ok();
        }
    }
    let mut buf = String::new();
    let values = proc_stat(&mut buf);
    let mut g = c.benchmark_group("proc_stat");
    g.throughput(Throughput::Elements(values as u64));
    g.bench_function("read_parse", |b| b.iter(|| proc_stat(&mut buf)));
    g.finish();
    c.final_summary();
}
