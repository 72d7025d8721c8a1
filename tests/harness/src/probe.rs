//! Probes of a hot path: counting the allocations and the system calls of
//! one thread (a global allocator that counts, and a seccomp filter that
//! traps every system call to a counting SIGSYS handler).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Allocations made by a thread that asked to be counted.
static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// System calls the seccomp filter trapped.
static SYSCALLS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

/// A global allocator that counts the allocations of threads that asked
/// for it ([`count_this_thread`]); declare it in a test binary with
/// `#[global_allocator] static A: Counting = Counting;`.
pub struct Counting;

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

extern "C" fn on_sigsys(_: libc::c_int) {
    SYSCALLS.fetch_add(1, Ordering::Relaxed);
}

/// From here on this thread's system calls (but for returning from a
/// signal handler and exiting) are not made: each raises SIGSYS, counted.
pub fn trap_syscalls_of_this_thread() {
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

/// Starts or stops counting this thread's allocations.
pub fn count_this_thread(on: bool) {
    COUNTED.with(|c| c.set(on));
}

/// Allocations counted so far.
pub fn allocations() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

/// System calls trapped so far.
pub fn system_calls() -> u64 {
    SYSCALLS.load(Ordering::Relaxed)
}

/// Installs the process's SIGSYS handler, which counts each trapped call.
pub fn count_trapped_system_calls() {
    // SAFETY: installs a handler that only increments an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigsys as extern "C" fn(libc::c_int) as usize;
        assert_eq!(libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()), 0);
    }
}
