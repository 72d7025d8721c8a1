//! What the read-path benchmarks share (`scaling.rs`, `read_fixed.rs`,
//! `snapshot_fixed.rs`): the clock they time with, the one timing loop,
//! the segment they read, and the plain-loop floors they compare with.
//! Each bench uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use perfabi::layout::CPU_SEQ_WORD;
use perfabi::{FamilySpec, Kind, Layout, Semantics, Unit, ValueType};
use perfabi_shm::writer::{Config, Writer};

/// Members of the family `bench.fam` (the last value slots of a block).
pub const FAMILY: u32 = 16;

/// This thread's CPU time in ns (`CLOCK_THREAD_CPUTIME_ID`): on these
/// shared 2-core machines a stretch during which the thread waited for a
/// core is otherwise counted whole, while cache and TLB misses are in
/// CPU time either way.
pub fn thread_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    u64::try_from(t.tv_sec).unwrap() * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap()
}

/// The timing loop: ns of [`thread_ns`] per call of `f` over `calls` calls.
pub fn per_call(calls: u32, mut f: impl FnMut()) -> f64 {
    let t = thread_ns();
    for _ in 0..calls {
        f();
    }
    (thread_ns() - t) as f64 / f64::from(calls)
}

/// The median of `v` (not empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Criterion's measurement as [`thread_ns`], shown with the wall clock's
/// formatter: the same clock as [`per_call`].
pub struct ThreadTime;

/// The wall clock measurement, for its formatter (ns, µs, ms).
static WALL: WallTime = WallTime;

impl Measurement for ThreadTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

/// A segment at `path` with `cpus` blocks and `instances` used slots:
/// `instances - FAMILY` counters `c0..`, then the family `bench.fam` of
/// [`FAMILY`] members; slot `i` holds `i << 20 | cpu` (a member `m << 40
/// | cpu`) on each CPU, so every value is distinct and non-zero but one.
pub fn segment(path: &Path, cpus: u32, instances: u32) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            nr_cpus: Some(cpus),
            max_instances: instances,
            max_families: 1,
            max_members: FAMILY,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let per_cpu = |base: u64| -> Vec<u64> { (0..u64::from(cpus)).map(|c| base + c).collect() };
    for i in 0..instances - FAMILY {
        let id = w
            .add_external(&format!("c{i}"), "", Semantics::Counter, ValueType::U64)
            .unwrap();
        w.publish_per_cpu(id, &per_cpu(u64::from(i) << 20)).unwrap();
    }
    let f = w
        .add_family(&FamilySpec::new(
            "bench.fam",
            "A family read whole",
            "instance",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    for i in 0..FAMILY {
        let m = w.add_external_member(f, &format!("m{i}"), &[]).unwrap();
        w.publish_member_per_cpu(&m, &per_cpu(u64::from(i) << 40))
            .unwrap();
    }
    assert_eq!(w.snapshot().unwrap().slots, instances as usize);
    w
}

/// Floor of a lock-free read of slots `first..first + out.len() / nr_cpus`
/// on every CPU: per block, the sequence word, the values (relaxed loads
/// into `out`, CPU major), the sequence word again.
pub fn loop_floor(words: &[AtomicU64], l: &Layout, first: usize, out: &mut [u64]) -> u64 {
    let n = out.len() / l.nr_cpus;
    let mut seqs = 0u64;
    for (cpu, row) in out.chunks_exact_mut(n).enumerate() {
        let seq = &words[l.cpu_block_word(cpu) + CPU_SEQ_WORD];
        let s1 = seq.load(Ordering::Relaxed);
        let src = &words[l.counter_word(cpu, first)..][..n];
        for (o, s) in row.iter_mut().zip(src) {
            *o = s.load(Ordering::Relaxed);
        }
        seqs = seqs.wrapping_add(s1 ^ seq.load(Ordering::Relaxed));
    }
    seqs
}

/// Floor of [`Segment::read_many`](perfabi_reader::Segment::read_many) of
/// `slots`: per block, the sequence word, the slots' values (relaxed
/// loads, stored CPU major: `slots.len()` consecutive words per CPU), the
/// sequence word again.
pub fn loop_many(words: &[AtomicU64], l: &Layout, slots: &[usize], out: &mut [u64]) -> u64 {
    let mut seqs = 0u64;
    for (cpu, row) in out.chunks_exact_mut(slots.len()).enumerate() {
        let seq = &words[l.cpu_block_word(cpu) + CPU_SEQ_WORD];
        let s1 = seq.load(Ordering::Relaxed);
        for (o, &s) in row.iter_mut().zip(slots) {
            *o = words[l.counter_word(cpu, s)].load(Ordering::Relaxed);
        }
        seqs = seqs.wrapping_add(s1 ^ seq.load(Ordering::Relaxed));
    }
    seqs
}
