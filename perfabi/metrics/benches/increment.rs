//! `cargo bench -p perfabi-metrics --bench increment`: the hot path of the
//! `metrics` facade, next to the perfabi writer's own.
//!
//! * `increment/adjust`: `perfabi_shm::writer::Counter::adjust(1)`, a
//!   counter member's handle used directly (the floor);
//! * `increment/facade`: `metrics::Counter::increment(1)` on a handle the
//!   recorder registered (`let c = counter!(..)` once): one dynamic call
//!   into the recorder's handle, then that same `adjust`;
//! * `increment/macro_each_time`: `counter!("..").increment(1)`, which
//!   registers again at every call (the recorder's lock and map look-up),
//!   for scale: what keeping the handle saves.
//!
//! Criterion's `increment/adjust` has measured 7–8 ns here, slower than
//! `increment/facade` (4–5.5 ns), likely because inside criterion's loop the
//! handle is not kept in registers (not examined further). The in-turns
//! rounds below keep it there (2.5–3.9 ns), the floor the ratio is
//! taken against.
//!
//! All are timed with the thread's CPU clock (not the wall clock, which on
//! a busy machine also counts waits for a CPU). Then, so that the ratio is
//! taken side by side in one run, the first two are timed again in turns
//! (30 rounds of 1,000,000 calls each, in turns), and the bench prints
//! `METRICS-RATIO facade/adjust <ratio of the bests>` and the bests in ns
//! per call.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Bencher, Criterion};
use metrics::{counter, with_local_recorder};
use perfabi::{FamilySpec, Kind, Unit};
use perfabi_metrics::PerfabiBuilder;
use perfabi_shm::writer::{Config, Writer};

/// The calling thread's CPU time.
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// `b.iter_custom` timed with the thread's CPU clock.
fn cpu_time(b: &mut Bencher, mut routine: impl FnMut()) {
    b.iter_custom(|iters| {
        let t = thread_cpu_time();
        for _ in 0..iters {
            routine();
        }
        thread_cpu_time() - t
    })
}

/// ns per call of `n` calls of `routine`, by the thread's CPU clock.
fn per_call(n: u32, mut routine: impl FnMut()) -> f64 {
    let t = thread_cpu_time();
    for _ in 0..n {
        routine();
    }
    (thread_cpu_time() - t).as_nanos() as f64 / f64::from(n)
}

fn increment(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    // The floor: a counter member of a writer of the same configuration.
    let config = Config {
        max_instances: 64,
        max_families: 16,
        max_members: 64,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create(dir.path().join("direct.perfabi"), &config).unwrap();
    let f = w
        .add_family(&FamilySpec::new(
            "requests",
            "",
            "",
            Kind::Counter,
            Unit::NONE,
        ))
        .unwrap();
    let direct = w
        .counter(w.add_member(f, "", &[]).unwrap().instance())
        .unwrap();

    let recorder = PerfabiBuilder::new()
        .config(config)
        .path(dir.path().join("facade.perfabi"))
        .build()
        .unwrap();
    let facade = with_local_recorder(&recorder, || counter!("requests"));

    let mut g = c.benchmark_group("increment");
    g.bench_function("adjust", |b| {
        cpu_time(b, || {
            let _ = black_box(direct.adjust(black_box(1)));
        })
    });
    g.bench_function("facade", |b| {
        cpu_time(b, || black_box(&facade).increment(black_box(1)))
    });
    with_local_recorder(&recorder, || {
        g.bench_function("macro_each_time", |b| {
            cpu_time(b, || counter!("requests").increment(black_box(1)))
        })
    });
    g.finish();

    let (mut adjust, mut via_facade) = (f64::MAX, f64::MAX);
    for _ in 0..30 {
        adjust = adjust.min(per_call(1_000_000, || {
            let _ = black_box(direct.adjust(black_box(1)));
        }));
        via_facade = via_facade.min(per_call(1_000_000, || {
            black_box(&facade).increment(black_box(1))
        }));
    }
    println!(
        "METRICS-RATIO facade/adjust {:.2} (ns per call: facade {via_facade:.2}, adjust {adjust:.2}; best of 30 rounds of 1,000,000 calls each, in turns, thread CPU time)",
        via_facade / adjust
    );
}

criterion_group!(benches, increment);
criterion_main!(benches);
