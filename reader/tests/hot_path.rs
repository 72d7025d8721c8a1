//! The README's claim for the read hot path (`Segment::read` with a
//! handle): no system call and no allocation. The reads run on a thread
//! that a seccomp filter traps on every system call (SIGSYS, counted), with
//! a global allocator that counts that thread's allocations. The test first
//! shows both counters count (one `getppid`, one `Box`), then requires zero
//! of each over 100,000 reads.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use perfabi::Semantics;
use perfabi_reader::Segment;
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::probe::{self, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn the_read_hot_path_makes_no_system_call_and_no_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            max_instances: 16,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let c = w.add("net.rx_bytes", "bytes", Semantics::Counter).unwrap();
    w.adjust(c, 42).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    let h = seg.handle("net.rx_bytes").unwrap();
    let mut out = vec![0u64; seg.nr_cpus()];

    probe::count_trapped_system_calls();
    let (calls, allocs, total, sum) = std::thread::scope(|s| {
        s.spawn(|| {
            probe::trap_syscalls_of_this_thread();
            probe::count_this_thread(true);
            // The counters count: one system call, one allocation.
            std::hint::black_box(rustix::process::getppid());
            let b = std::hint::black_box(Box::new(7u64));
            let shown = (probe::system_calls(), probe::allocations());
            assert_eq!(shown, (1, 1), "the counters do not count");
            drop(b);
            let (c0, a0) = shown;
            let mut sum = 0u64;
            let n = 100_000u64;
            for _ in 0..n {
                let _ = seg.read(&h, &mut out).unwrap();
                sum = sum.wrapping_add(out.iter().sum::<u64>());
            }
            let calls = probe::system_calls() - c0;
            let allocs = probe::allocations() - a0;
            probe::count_this_thread(false);
            // Whatever the thread does after this (its exit) is not counted.
            (calls, allocs, n, sum)
        })
        .join()
        .unwrap()
    });
    assert_eq!(sum, 42 * total, "the reads returned the value");
    println!("{total} hot-path reads: {calls} system calls, {allocs} allocations");
    assert_eq!((calls, allocs), (0, 0));
}
