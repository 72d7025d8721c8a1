//! The README's claim for the read hot path (`Segment::read` with a
//! handle; also `Segment::status` and `Segment::read_ranges` between
//! rechecks, what an agent does at every request): no system call and no
//! allocation. The reads run on a thread that a seccomp filter traps on
//! every system call (SIGSYS, counted), with a global allocator that
//! counts that thread's allocations. The test first shows both counters
//! count (one `getppid`, one `Box`), then requires zero of each over
//! 100,000 reads.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use perfabi::Semantics;
use perfabi_reader::Segment;
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::probe::{self, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The probe's counters are the process's: one test counts at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_read_hot_path_makes_no_system_call_and_no_allocation() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
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
    // `status` looks at the path once a recheck interval: not in this loop.
    let mut seg = Segment::open_with(
        &path,
        perfabi_reader::Options {
            recheck: std::time::Duration::from_secs(3600),
            ..Default::default()
        },
    )
    .unwrap();
    let h = seg.handle("net.rx_bytes").unwrap();
    let mut out = vec![0u64; seg.nr_cpus()];
    let runs = [(h.instance().slot as usize, 1)];
    let mut row = vec![0u64; seg.nr_cpus()];

    probe::count_trapped_system_calls();
    let (calls, allocs, total, sum) = std::thread::scope(|s| {
        s.spawn(|| {
            probe::trap_syscalls_of_this_thread();
            probe::count_this_thread(true);
            // The counters count: one system call, one allocation (the
            // process's counters: another test may have counted before).
            let before = (probe::system_calls(), probe::allocations());
            std::hint::black_box(rustix::process::getppid());
            let b = std::hint::black_box(Box::new(7u64));
            let shown = (probe::system_calls(), probe::allocations());
            assert_eq!(
                (shown.0 - before.0, shown.1 - before.1),
                (1, 1),
                "the counters do not count"
            );
            drop(b);
            let (c0, a0) = shown;
            let mut sum = 0u64;
            let n = 100_000u64;
            for _ in 0..n {
                let _ = seg.read(&h, &mut out).unwrap();
                sum = sum.wrapping_add(out.iter().sum::<u64>());
                // What an agent does around it: the header between
                // rechecks, and a run of value slots.
                let (header, _) = seg.status().unwrap();
                let g = seg.read_ranges(&runs, &mut row).unwrap();
                assert_eq!(g, header.generation);
                sum = sum.wrapping_add(row.iter().sum::<u64>());
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
    assert_eq!(sum, 2 * 42 * total, "the reads returned the value");
    println!("{total} hot-path reads: {calls} system calls, {allocs} allocations");
    assert_eq!((calls, allocs), (0, 0));
}

/// The same for a family handle (`Segment::read_family`): once the handle
/// and the values have held the family's instances, reading them again
/// makes no system call and no allocation.
#[test]
fn the_family_hot_path_makes_no_system_call_and_no_allocation() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    use perfabi::{Buckets, FamilySpec, Unit};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            max_instances: 256,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "disk.latency",
            "Request latency",
            "device",
            Unit::NS,
            Buckets::Log2 { first: 10, n: 8 },
        ))
        .unwrap();
    for d in ["sda", "sdb", "vda"] {
        let m = w.add_member(lat, d, &[]).unwrap();
        w.observe(&m, 5000).unwrap();
    }
    let mut seg = Segment::open(&path).unwrap();
    let mut h = seg.family_handle("disk.latency").unwrap();
    let mut out = perfabi_reader::FamilyValues::default();
    seg.read_family(&mut h, &mut out).unwrap();

    probe::count_trapped_system_calls();
    let (calls, allocs, count) = std::thread::scope(|s| {
        s.spawn(|| {
            probe::trap_syscalls_of_this_thread();
            probe::count_this_thread(true);
            let (c0, a0) = (probe::system_calls(), probe::allocations());
            let mut count = 0u64;
            for _ in 0..100_000 {
                seg.read_family(&mut h, &mut out).unwrap();
                for k in 0..out.len() {
                    for cpu in 0..out.nr_cpus() {
                        count += out.words(k, cpu)[0];
                    }
                }
            }
            let calls = probe::system_calls() - c0;
            let allocs = probe::allocations() - a0;
            probe::count_this_thread(false);
            (calls, allocs, count)
        })
        .join()
        .unwrap()
    });
    assert_eq!(count, 3 * 100_000, "the reads returned the counts");
    println!("100000 family reads (3 histograms): {calls} system calls, {allocs} allocations");
    assert_eq!((calls, allocs), (0, 0));
}
