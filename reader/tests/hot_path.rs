//! The README's claim for the read hot path (`Segment::read` with a
//! handle): no system call and no allocation. The reads run on a thread
//! that a seccomp filter traps on every system call (SIGSYS, counted), with
//! a global allocator that counts that thread's allocations. The test first
//! shows both counters count (one `getppid`, one `Box`), then requires zero
//! of each over 100,000 reads.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use perfabi::writer::{Config, Writer};
use perfabi::Semantics;
use perfabi_reader::Segment;

/// Allocations made by a thread that asked to be counted.
static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// System calls the seccomp filter trapped.
static SYSCALLS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

struct Counting;

// SAFETY: every call is passed on to the system allocator unchanged; the
// counting touches only an atomic and a const-initialised thread local
// (neither allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

extern "C" fn on_sigsys(_: libc::c_int) {
    SYSCALLS.fetch_add(1, Ordering::Relaxed);
}

/// From here on this thread's system calls (but for returning from a
/// signal handler and exiting) are not made: each raises SIGSYS, counted.
fn trap_syscalls_of_this_thread() {
    let stmt = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let allow = [libc::SYS_rt_sigreturn, libc::SYS_exit, libc::SYS_exit_group];
    let mut prog = vec![stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0)];
    for (i, nr) in allow.iter().enumerate() {
        // Jump over the remaining tests and the trap to the final allow.
        let to_allow = (allow.len() - i) as u8;
        prog.push(stmt(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            *nr as u32,
            to_allow,
            0,
        ));
    }
    prog.push(stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_TRAP,
        0,
        0,
    ));
    prog.push(stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_ALLOW,
        0,
        0,
    ));
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: prctl with these arguments only sets this thread's
    // no_new_privs flag and installs the filter it reads from `fprog`,
    // which outlives the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &fprog as *const libc::sock_fprog as libc::c_ulong,
            ),
            0,
            "seccomp: {}",
            std::io::Error::last_os_error()
        );
    }
}

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

    // SAFETY: installs a handler that only increments an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigsys as extern "C" fn(libc::c_int) as usize;
        assert_eq!(libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()), 0);
    }
    let (calls, allocs, total, sum) = std::thread::scope(|s| {
        s.spawn(|| {
            trap_syscalls_of_this_thread();
            COUNTED.with(|c| c.set(true));
            // The counters count: one system call, one allocation.
            // SAFETY: getppid has no preconditions (here it is trapped).
            unsafe { libc::getppid() };
            let b = std::hint::black_box(Box::new(7u64));
            let shown = (
                SYSCALLS.load(Ordering::Relaxed),
                ALLOCS.load(Ordering::Relaxed),
            );
            assert_eq!(shown, (1, 1), "the counters do not count");
            drop(b);
            let (c0, a0) = shown;
            let mut sum = 0u64;
            let n = 100_000u64;
            for _ in 0..n {
                let _ = seg.read(&h, &mut out).unwrap();
                sum = sum.wrapping_add(out.iter().sum::<u64>());
            }
            let calls = SYSCALLS.load(Ordering::Relaxed) - c0;
            let allocs = ALLOCS.load(Ordering::Relaxed) - a0;
            COUNTED.with(|c| c.set(false));
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
