//! `cargo bench -p perfabi-shm`, then `python3 perfabi/shm/benches/ratios.py` for the
#![cfg(not(loom))]
//! ratios the ABI issue asks for.
//!
//! * `adjust/*`: one thread, ns per call (rseq and lock methods, each
//!   through `Writer::adjust` and through a `Counter` handle, `*_counter`,
//!   kept in registers, and `*_counter_reloaded`, loaded from memory at
//!   every call; and plain atomics for scale);
//! * `adjust_cpu_time/*`: the same, timed with the thread's CPU clock rather
//!   than the wall clock: on a machine shared with other work the wall
//!   clock also counts the time the thread waited for a CPU (on 2 busy
//!   cores, often as much again). `perfabi/shm/benches/adjust-instructions`
//!   counts the instructions of one adjust;
//! * `two_threads/*`: 2 threads, each `iters` updates; time per update per
//!   thread, per-CPU `adjust` (and through a `Counter` handle) vs
//!   `fetch_add` on one shared `AtomicU64`;
//! * `snapshot/*`: a consistent snapshot of 1,024 counters on every CPU vs
//!   `memcpy` of the same number of bytes;
//! * `damon/*`: publishing one aggregation of 10,000 regions (rseq and lock
//!   methods), next to the floors: a copy of the same records already
//!   encoded (`copy_from_slice`), and relaxed atomic stores of their words;
//!   `damon_cpu_time/*` the publications and the copy again, timed with the
//!   thread's CPU clock (see `adjust_cpu_time`);
//! * `histogram/*`: one histogram `observe` (count, sum and bucket: one
//!   multi-word update) next to one `adjust`, rseq and lock methods, log2
//!   and explicit buckets.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Bencher, Criterion, Throughput};
use perfabi::{Buckets, FamilySpec, Semantics, Snapshot, Unit};
use perfabi_shm::writer::{Config, MethodChoice, Writer};

#[path = "fixtures/damon.rs"]
mod damon_fixture;

fn writer(dir: &tempfile::TempDir, method: MethodChoice, n: u32) -> Writer {
    let cfg = Config {
        max_instances: n.max(1),
        damon_capacity: 16,
        method,
        ..Config::default()
    };
    Writer::create(dir.path().join(format!("bench-{method:?}")), &cfg).unwrap()
}

/// The calling thread's CPU time.
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// `b.iter(routine)`, timed with the wall clock or (`cpu_clock`) with the
/// thread's CPU clock; either way `routine` runs as `iter` runs it: in a
/// loop, inlined, its result through `black_box`.
fn time<O>(b: &mut Bencher, cpu_clock: bool, mut routine: impl FnMut() -> O) {
    if !cpu_clock {
        return b.iter(routine);
    }
    b.iter_custom(|iters| {
        let start = thread_cpu_time();
        for _ in 0..iters {
            black_box(routine());
        }
        thread_cpu_time() - start
    })
}

fn adjust(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    for (group, cpu_clock) in [("adjust", false), ("adjust_cpu_time", true)] {
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(1));
        for m in [MethodChoice::Auto, MethodChoice::Lock] {
            let w = writer(&dir, m, 16);
            let id = w.add("x", "", Semantics::Counter).unwrap();
            // Whether it succeeded, rather than the `Result` itself, goes to
            // `black_box`: the `Result` would be spilled (16 bytes) to the
            // stack and copied in pieces, whose reloads stall on store
            // forwarding (a loop of them took 10 ns a call on the machine
            // this was written on, where the adjust itself takes 3 ns); and
            // not `unwrap`, whose panic message makes the routine too large
            // for LLVM to inline into criterion's loop.
            let method = format!("{:?}", w.method()).to_lowercase();
            g.bench_function(&method, |b| {
                time(b, cpu_clock, || w.adjust(black_box(id), 1).is_ok())
            });
            // The handle, as a caller's loop uses it: what it holds cannot
            // change (`Copy`, no interior mutability), so the compiler keeps
            // it in registers; every call loads and compares the slot's
            // registration id and runs the whole update.
            let c = w.counter(id).unwrap();
            g.bench_function(format!("{method}_counter"), |b| {
                time(b, cpu_clock, || c.adjust(1).is_ok())
            });
            // The handle through `black_box(&c)`: every call loads all it
            // holds from memory, as a caller that reaches it through a
            // pointer of unknown provenance (the black_box itself adds a
            // store and a reload of that pointer to each call).
            g.bench_function(format!("{method}_counter_reloaded"), |b| {
                time(b, cpu_clock, || black_box(&c).adjust(1).is_ok())
            });
        }
        let a = AtomicU64::new(0);
        g.bench_function("baseline_fetch_add_uncontended", |b| {
            time(b, cpu_clock, || {
                black_box(&a).fetch_add(1, Ordering::Relaxed)
            })
        });
        g.bench_function("baseline_load_store", |b| {
            time(b, cpu_clock, || {
                let a = black_box(&a);
                a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed)
            })
        });
        g.finish();
    }
}

/// Runs `op` `iters` times on each of two threads started together, thread
/// `i` pinned to CPU `i` (so the comparison measures cache-line traffic, not
/// the scheduler); returns the wall time of the slower one. `op` is
/// inlined into each thread's loop (a call through `dyn Fn` would cost the
/// adjust, whose address depends on loads, more than the `fetch_add`); the
/// threads are scoped, so `op` may borrow (a `Counter` borrows its writer).
fn two_threads(iters: u64, op: &(impl Fn() + Sync)) -> Duration {
    let barrier = Barrier::new(2);
    thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|cpu| {
                let b = &barrier;
                s.spawn(move || {
                    let mut set = rustix::thread::CpuSet::new();
                    set.set(cpu);
                    let _ = rustix::thread::sched_setaffinity(None, &set);
                    b.wait();
                    let t = Instant::now();
                    for _ in 0..iters {
                        op();
                    }
                    t.elapsed()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn contention(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(&dir, MethodChoice::Auto, 16);
    let id = w.add("x", "", Semantics::Counter).unwrap();
    let counter = w.counter(id).unwrap();
    let shared = AtomicU64::new(0);
    let mut g = c.benchmark_group("two_threads");
    g.throughput(Throughput::Elements(2));
    g.measurement_time(Duration::from_secs(4));
    let op = || assert!(w.adjust(black_box(id), 1).is_ok());
    g.bench_function("percpu_adjust", |b| {
        b.iter_custom(|iters| two_threads(iters, &op))
    });
    let op = || assert!(counter.adjust(1).is_ok());
    g.bench_function("percpu_counter", |b| {
        b.iter_custom(|iters| two_threads(iters, &op))
    });
    let op = || {
        black_box(&shared).fetch_add(1, Ordering::Relaxed);
    };
    g.bench_function("shared_fetch_add", |b| {
        b.iter_custom(|iters| two_threads(iters, &op))
    });
    // No sharing at all: what two threads cost each other on this machine.
    let private: [crossbeam_utils::CachePadded<AtomicU64>; 2] = Default::default();
    let op = || {
        let cpu = rustix::thread::sched_getcpu() & 1;
        let a = black_box(&private[cpu]);
        a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    };
    g.bench_function("baseline_private_getcpu", |b| {
        b.iter_custom(|iters| two_threads(iters, &op))
    });
    g.finish();
}

fn snapshot(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(&dir, MethodChoice::Auto, 1024);
    for i in 0..1024 {
        let id = w.add(&format!("c{i}"), "", Semantics::Counter).unwrap();
        w.adjust(id, i).unwrap();
    }
    let view = w.view();
    let cpus = view.layout().nr_cpus;
    let bytes = (cpus * 1024 * 8) as u64;
    let mut g = c.benchmark_group("snapshot");
    g.throughput(Throughput::Bytes(bytes));
    let mut snap = Snapshot::default();
    view.snapshot_into(&mut snap, 64).unwrap();
    assert_eq!(snap.instances.len(), 1024);
    g.bench_function(format!("perfabi_1024x{cpus}"), |b| {
        b.iter(|| view.snapshot_into(black_box(&mut snap), 64).unwrap())
    });
    let src = vec![1u64; cpus * 1024];
    let mut dst = vec![0u64; cpus * 1024];
    g.bench_function(format!("memcpy_1024x{cpus}"), |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)));
    });
    g.finish();
}

fn damon(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = damon_fixture::config();
    let w = Writer::create(dir.path().join("damon"), &cfg).unwrap();
    let lock_cfg = Config {
        method: MethodChoice::Lock,
        ..cfg
    };
    let lock = Writer::create(dir.path().join("damon-lock"), &lock_cfg).unwrap();
    let a = damon_fixture::aggregation();
    // Once outside the benchmarks, so the check below holds when a filter
    // leaves them out.
    w.publish_damon(&a).unwrap();
    lock.publish_damon(&a).unwrap();
    // The floor: the same records, already encoded, copied into a buffer
    // of the same size.
    let records = damon_fixture::encoded(&a);
    let mut dst = vec![[0u64; perfabi::layout::DAMON_RECORD_WORDS]; records.len()];
    // `damon` on the wall clock; `damon_cpu_time` the same publications and
    // copy on the thread's CPU clock, which leaves out the time the thread
    // waited for a CPU on a machine busy with other work.
    for (group, cpu_clock) in [("damon", false), ("damon_cpu_time", true)] {
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(a.regions.len() as u64));
        g.bench_function("publish_10000_regions", |b| {
            time(b, cpu_clock, || w.publish_damon(black_box(&a)).unwrap())
        });
        // The lock method, where the default is rseq (`publish_10000_regions`
        // is already the lock method where rseq is not available).
        if w.method() != lock.method() {
            g.bench_function("publish_10000_regions_lock", |b| {
                time(b, cpu_clock, || lock.publish_damon(black_box(&a)).unwrap())
            });
        }
        g.bench_function("copy_10000_records", |b| {
            time(b, cpu_clock, || dst.copy_from_slice(black_box(&records)))
        });
        g.finish();
    }
    // A second floor, on the wall clock: the same words stored one by one
    // with relaxed atomic stores (what a writer of shared memory may do
    // without assembly).
    let mut g = c.benchmark_group("damon");
    g.throughput(Throughput::Elements(a.regions.len() as u64));
    let words: Vec<u64> = records.iter().flatten().copied().collect();
    let shared: Vec<AtomicU64> = words.iter().map(|_| AtomicU64::new(0)).collect();
    g.bench_function("atomic_store_10000_records", |b| {
        b.iter(|| {
            for (d, &v) in shared.iter().zip(black_box(&words)) {
                d.store(v, Ordering::Relaxed);
            }
        })
    });
    g.finish();
    for w in [&w, &lock] {
        assert_eq!(
            w.view().damon(64).aggregations[0].regions.len() as u64,
            damon_fixture::REGIONS
        );
    }
}

/// `observe` of a histogram member beside `adjust` of a counter, on the
/// same writer, for each method: what one observation (count, sum and
/// bucket, one multi-word update of the CPU's block) costs over one word.
fn histogram(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("histogram");
    g.throughput(Throughput::Elements(1));
    let mut seen = Vec::new();
    for m in [MethodChoice::Auto, MethodChoice::Lock] {
        let w = writer(&dir, m, 256);
        let method = format!("{:?}", w.method()).to_lowercase();
        if seen.contains(&method) {
            continue; // no rseq here: Auto is the lock method
        }
        seen.push(method.clone());
        let id = w.add("x", "", Semantics::Counter).unwrap();
        let log2 = w
            .add_family(&FamilySpec::histogram(
                "lat",
                "latency",
                "",
                Unit::NS,
                Buckets::Log2 { first: 10, n: 24 },
            ))
            .unwrap();
        let log2 = w.add_member(log2, "", &[]).unwrap();
        let explicit = w
            .add_family(&FamilySpec::histogram(
                "size",
                "sizes",
                "",
                Unit::BYTES,
                Buckets::Explicit((1..=16).map(|k| k * 1000).collect()),
            ))
            .unwrap();
        let explicit = w.add_member(explicit, "", &[]).unwrap();
        // Once outside the benchmarks, so the check below holds when a
        // filter (`-- adjust`) leaves the observations out.
        w.observe(&log2, 183_000).unwrap();
        g.bench_function(format!("adjust_{method}"), |b| {
            b.iter(|| w.adjust(black_box(id), 1))
        });
        g.bench_function(format!("observe_log2_{method}"), |b| {
            b.iter(|| w.observe(black_box(&log2), black_box(183_000)))
        });
        g.bench_function(format!("observe_explicit_{method}"), |b| {
            b.iter(|| w.observe(black_box(&explicit), black_box(7_500)))
        });
        let snap = w.snapshot().unwrap();
        let f = snap.family("lat").unwrap();
        let perfabi::Reading::Histogram(h) = snap.reading(f, &f.members[0]) else {
            unreachable!()
        };
        assert!(h.count > 0 && h.consistent());
    }
    g.finish();
}

criterion_group!(benches, adjust, contention, snapshot, damon, histogram);
criterion_main!(benches);
