//! Surviving truncation: a SIGBUS guard for segment mappings.
//!
//! If someone truncates a segment file a reader has mapped, the next load
//! from a page past the new end of file raises `SIGBUS`, which would kill the
//! process. Seals prevent this for memfds and the kernel device cannot shrink,
//! but a file on tmpfs can be truncated by anyone allowed to write it.
//!
//! The guard installs a process-wide `SIGBUS` handler once. When the faulting
//! address lies inside a registered mapping, the handler maps an anonymous
//! zero page over the faulting page (`MAP_FIXED`), raises the mapping's
//! fault count, and returns: the load is restarted and reads zeros. Every
//! read of the reader checks the flag afterwards and, if it is set, throws the
//! data away and reports the truncation. A writer's mapping gets a writable
//! zero page, so its stores land nowhere and it can notice and re-create the
//! segment. Faults outside any registered mapping go to the previous handler
//! (or the default action).
//!
//! There is no limit on the number of mappings guarded at once: the registry
//! is a list of fixed-size chunks that grows by one chunk when every slot is
//! taken (chunks are never freed, so the handler can walk them at any time).
//! Registration cannot fail, so no mapping is ever left unguarded.
//!
//! The handler only uses async-signal-safe operations: atomic loads and
//! stores and the `mmap` system call.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once};

/// Slots per chunk of the registry.
const CHUNK: usize = 64;

struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    prot: AtomicUsize,
    /// The fault count of the mapping's Guard (null: the slot is free).
    flag: AtomicPtr<AtomicU64>,
}

/// A block of slots; the registry is a singly linked list of them.
struct Chunk {
    slots: [Slot; CHUNK],
    /// The next chunk, or null; set once, never cleared.
    next: AtomicPtr<Chunk>,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    prot: AtomicUsize::new(0),
    flag: AtomicPtr::new(std::ptr::null_mut()),
};
static FIRST: Chunk = Chunk {
    slots: [EMPTY; CHUNK],
    next: AtomicPtr::new(std::ptr::null_mut()),
};
static INSTALL: Once = Once::new();
static mut PREVIOUS: Option<libc::sigaction> = None;

/// Every chunk of the registry, first to last.
fn chunks() -> impl Iterator<Item = &'static Chunk> {
    std::iter::successors(Some(&FIRST), |c| {
        let next = c.next.load(Ordering::Acquire);
        // SAFETY: a non-null `next` was published (Release) by `grow` from a
        // leaked Box: it stays valid, initialised and unmoved forever.
        (!next.is_null()).then(|| unsafe { &*next })
    })
}

/// Appends a new, empty chunk to the registry and returns it (or the chunk
/// another thread appended at the same moment).
fn grow() -> &'static Chunk {
    let fresh: &'static Chunk = Box::leak(Box::new(Chunk {
        slots: [EMPTY; CHUNK],
        next: AtomicPtr::new(std::ptr::null_mut()),
    }));
    let mut tail = chunks().last().expect("the first chunk always exists");
    loop {
        match tail.next.compare_exchange(
            std::ptr::null_mut(),
            fresh as *const Chunk as *mut Chunk,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return fresh,
            // SAFETY: as in `chunks`: published chunks live forever.
            Err(other) => tail = unsafe { &*other },
        }
    }
}

/// Keeps a mapping registered with the guard while it lives.
pub struct Guard {
    slot: &'static Slot,
    faults: Arc<AtomicU64>,
}

impl Guard {
    /// Registers the mapping `[start, start + len)`, writable or not. Never
    /// fails: the registry grows when all its slots are taken.
    ///
    /// # Safety
    ///
    /// `[start, start + len)` must be a mapping that the caller owns and
    /// that outlives the Guard: on a fault there, the handler maps a zero
    /// page over the faulting page.
    pub unsafe fn register(start: usize, len: usize, writable: bool) -> Self {
        install();
        let faults = Arc::new(AtomicU64::new(0));
        let flag = Arc::as_ptr(&faults) as *mut AtomicU64;
        let claim = |s: &Slot| {
            s.flag
                .compare_exchange(
                    std::ptr::null_mut(),
                    flag,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        };
        let slot = loop {
            if let Some(s) = chunks().flat_map(|c| c.slots.iter()).find(|s| claim(s)) {
                break s;
            }
            if let Some(s) = grow().slots.iter().find(|s| claim(s)) {
                break s;
            }
        };
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        slot.prot.store(prot as usize, Ordering::Release);
        slot.len.store(len, Ordering::Release);
        // Last: the handler matches a slot by its start.
        slot.start.store(start, Ordering::Release);
        Self { slot, faults }
    }

    /// How many times an access to this mapping hit a truncated page (a
    /// zero page was mapped in). It only grows: an owner that maps its range
    /// anew compares with the count it saw just before, so a handler that
    /// was still running for an old fault is never missed.
    #[inline]
    pub fn faults(&self) -> u64 {
        self.faults.load(Ordering::Acquire)
    }

    /// Whether an access to this mapping ever hit a truncated page.
    pub fn faulted(&self) -> bool {
        self.faults() > 0
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let s = self.slot;
        s.start.store(0, Ordering::Release);
        s.len.store(0, Ordering::Release);
        // The Arc outlives this store: the handler may still hold the pointer
        // only while a fault in this mapping is being handled, which cannot
        // happen once the mapping's owner is being dropped.
        s.flag.store(std::ptr::null_mut(), Ordering::Release);
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: `sa` is fully initialised (zeroed, then the handler, mask
        // and flags set); `old` receives the previous action, stored before
        // any mapping is registered (registration happens after this call),
        // so the handler never reads `PREVIOUS` while it is written.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &sa, &mut old) == 0 {
                PREVIOUS = Some(old);
            }
        }
    });
}

/// Maps a zero page over the faulting page if `addr` lies in a registered
/// mapping; true if it did (the fault is handled). A slot is matched by its
/// start and length first; its owner frees it only when nothing can fault
/// in the mapping any more (the mapping's owner is being dropped).
fn cover(addr: usize) -> bool {
    for s in chunks().flat_map(|c| c.slots.iter()) {
        let start = s.start.load(Ordering::Acquire);
        let len = s.len.load(Ordering::Acquire);
        if start == 0 || addr < start || addr - start >= len {
            continue;
        }
        let flag = s.flag.load(Ordering::Acquire);
        let prot = s.prot.load(Ordering::Acquire) as libc::c_int;
        // SAFETY: sysconf is async-signal-safe in practice (glibc reads a
        // cached value); the result is the page size.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let at = addr & !(page - 1);
        // SAFETY: `at` is a page inside a mapping this process registered and
        // still owns; replacing that page with a private zero page of the
        // same protection changes only what its accesses see (the file is
        // gone there anyway). mmap is async-signal-safe.
        let r = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if r != libc::MAP_FAILED && !flag.is_null() {
            // SAFETY: `flag` points into the Arc held by the mapping's Guard,
            // which lives as long as the registration.
            unsafe { (*flag).fetch_add(1, Ordering::AcqRel) };
            return true;
        }
        return false;
    }
    false
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // Only a fault the kernel raised (si_code > 0: BUS_ADRERR, …) is
    // covered; a SIGBUS sent by kill or sigqueue, whatever address it
    // names, is not a truncation.
    if code > 0 && cover(addr) {
        return;
    }
    // Not ours: behave as if we were not installed.
    // SAFETY: PREVIOUS was written once before any registration; reading it
    // here is a plain load. Calling the previous handler with the same
    // arguments is what the kernel would have done; sigaction and raise are
    // async-signal-safe.
    unsafe {
        match *std::ptr::addr_of!(PREVIOUS) {
            Some(old) if old.sa_sigaction == libc::SIG_IGN && code <= 0 => {}
            Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(old.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                    f(sig);
                }
                // A handler that gave up (as Rust's own stack-overflow
                // handler does: it restores the default and returns, relying
                // on the fault to happen again) leaves a sent signal
                // undelivered: deliver it as the default action would.
                if code <= 0 {
                    let mut cur: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut cur);
                    if cur.sa_sigaction == libc::SIG_DFL {
                        libc::raise(libc::SIGBUS);
                    }
                }
            }
            _ => {
                // Restore the default action. A fault re-executes the
                // faulting load, which then terminates the process as usual;
                // a signal sent by someone is raised again, as delivered.
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
                if code <= 0 {
                    libc::raise(libc::SIGBUS);
                }
            }
        }
    }
}
