//! `Writer::adjust`, or `Counter::adjust` of a handle, in a loop, for
//! looking at the code of the fast path (`perfabi/shm/benches/adjust-instructions`
//! traces [`hot`] or [`hot_counter`] under gdb and counts the instructions
//! of one iteration) and for a rough time per call.
//!
//! ```text
//! cargo run --release -p perfabi-shm --example adjust_loop -- [lock] [counter] [CALLS]
//! ```
//!
//! Prints ns per call over CALLS calls (default 100,000,000) of adjust
//! (with `counter`: through a [`Counter`] handle), of a load+store and of a
//! `fetch_add` of a private word (the floor and the lock method's core), on
//! the CPU (thread CPU time: waiting for a CPU on a loaded machine is left
//! out) and on the wall clock, and the update engine's slow-path counts.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use perfabi::Semantics;
use perfabi_shm::writer::{Config, Counter, InstanceId, MethodChoice, Writer};

/// `n` adjusts of `id` by 1; false at the first refused one. Never inlined,
/// so that its loop is one function in the disassembly.
#[inline(never)]
pub fn hot(w: &Writer, id: InstanceId, n: u64) -> bool {
    for _ in 0..n {
        if w.adjust(id, 1).is_err() {
            return false;
        }
    }
    true
}

/// `n` adjusts by 1 through the handle `c`; false at the first refused
/// one. What a handle holds cannot change (it is `Copy`, with no interior
/// mutability), so the compiler keeps it in registers across the loop, as
/// in any loop of a caller's; every iteration still loads and compares the
/// slot's registration id. Never inlined, as [`hot`].
#[inline(never)]
pub fn hot_counter(c: &Counter<'_>, n: u64) -> bool {
    for _ in 0..n {
        if c.adjust(1).is_err() {
            return false;
        }
    }
    true
}

/// The floor: `n` relaxed load-add-store of one private word (the
/// loop-carried store-to-load dependency every adjust of one counter has).
#[inline(never)]
fn load_store(a: &AtomicU64, n: u64) {
    for _ in 0..n {
        let a = black_box(a);
        a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

/// `n` uncontended `fetch_add`s (a `lock add`).
#[inline(never)]
fn fetch_add(a: &AtomicU64, n: u64) {
    for _ in 0..n {
        black_box(a).fetch_add(1, Ordering::Relaxed);
    }
}

/// Nanoseconds per iteration of `run`, on the CPU (the thread's CPU time,
/// so that time spent waiting for a CPU on a loaded machine is not
/// counted) and on the wall clock.
fn time(calls: u64, run: impl FnOnce()) -> (f64, f64) {
    let cpu = || rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let (t, c) = (Instant::now(), cpu());
    run();
    let (wall, c1) = (t.elapsed().as_secs_f64(), cpu());
    let on_cpu = (c1.tv_sec - c.tv_sec) as f64 + (c1.tv_nsec - c.tv_nsec) as f64 * 1e-9;
    (on_cpu * 1e9 / calls as f64, wall * 1e9 / calls as f64)
}

fn main() {
    let mut method = MethodChoice::Auto;
    let mut handle = false;
    let mut calls = 100_000_000u64;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "lock" => method = MethodChoice::Lock,
            "counter" => handle = true,
            n => {
                calls = n
                    .parse()
                    .expect("usage: adjust_loop [lock] [counter] [CALLS]")
            }
        }
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let cfg = Config {
        max_instances: 16,
        max_families: 0,
        max_members: 0,
        damon_capacity: 16,
        method,
        ..Config::default()
    };
    let w = Writer::create(dir.path().join("adjust-loop"), &cfg).expect("a segment");
    let id = w.add("x", "", Semantics::Counter).expect("an instance");
    let c = w.counter(id).expect("a handle");
    let run = |n| {
        if handle {
            hot_counter(&c, n)
        } else {
            hot(&w, black_box(id), n)
        }
    };
    assert!(run(1000));
    let (adjust, adjust_wall) = time(calls, || assert!(run(black_box(calls))));
    let a = AtomicU64::new(0);
    let (floor, floor_wall) = time(calls, || load_store(&a, black_box(calls)));
    let (lock_add, lock_add_wall) = time(calls, || fetch_add(&a, black_box(calls)));
    println!(
        "adjust{} ({:?}) {adjust:.2} ns; load+store {floor:.2} ns; fetch_add {lock_add:.2} ns \
         (on the CPU; wall: {adjust_wall:.2}, {floor_wall:.2}, {lock_add_wall:.2} ns) \
         over {calls} calls; {:?}",
        if handle { " via Counter" } else { "" },
        w.method(),
        w.update_stats()
    );
    let snap = w.snapshot().expect("a snapshot");
    let x = snap.find("x").expect("the instance");
    assert_eq!(snap.total(x), calls + 1000);
}
