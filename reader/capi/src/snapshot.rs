//! One consistent snapshot of every family and value, for C.

use std::ffi::c_char;

use perfabi_reader::Snapshot;

use crate::error::{guard, guard_value, perfabi_error, Failure};
use crate::family::{self, perfabi_family_info, perfabi_histogram, HistogramOut};
use crate::ptr;
use crate::segment::{self, perfabi_segment};

/// Every family, member and value of a segment, copied inside one
/// metadata generation, each CPU's values one consistent copy: what
/// perfabi_snapshot_take() read.
///
/// Thread safety: immutable; any threads may read it at once. It does not
/// refer to its segment: it stays valid after perfabi_close().
pub struct perfabi_snapshot {
    snap: Snapshot,
    families: Vec<perfabi_family_info>,
}

// Immutable once taken: shared between threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<perfabi_snapshot>();
};

/// perfabi_snapshot_take() - read every family and value of the segment
/// at once, inside one metadata generation.
/// @seg: the segment.
/// @out: receives the snapshot (NULL on failure); free it with
///       perfabi_snapshot_free().
///
/// Context: the thread using the segment. Allocates; a system call at most
/// once a second (the segment's re-check).
/// Return: `PERFABI_OK`; `PERFABI_E_STALE`, `PERFABI_E_BUSY`,
/// `PERFABI_E_TRUNCATED_WHILE_MAPPED`...
///
/// # Safety
/// `seg` is NULL or an open segment used by this thread only; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_take(
    seg: *mut perfabi_segment,
    out: *mut *mut perfabi_snapshot,
) -> perfabi_error {
    const F: &str = "perfabi_snapshot_take";
    guard(F, || {
        let make = || -> Result<perfabi_snapshot, Failure> {
            // SAFETY: the caller promises an open segment, used by this thread.
            let s = unsafe { segment::segment(F, seg) }?;
            let snap = s.seg.snapshot()?;
            let families = snap.families.iter().map(perfabi_family_info::new).collect();
            Ok(perfabi_snapshot { snap, families })
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_snapshot_free() - free a snapshot and its families.
/// @s: a snapshot, or NULL (nothing happens).
///
/// Context: any thread, once no thread uses the snapshot any more.
///
/// # Safety
/// `s` is NULL or a snapshot of perfabi_snapshot_take(), not freed before.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_free(s: *mut perfabi_snapshot) {
    // SAFETY: the caller gives back a snapshot once.
    unsafe { ptr::release("perfabi_snapshot_free", s) }
}

/// The snapshot behind `s`.
///
/// # Safety
/// `s` is NULL or a live snapshot.
unsafe fn snapshot<'a>(
    func: &str,
    s: *const perfabi_snapshot,
) -> Result<&'a perfabi_snapshot, Failure> {
    // SAFETY: the caller's promise, forwarded.
    unsafe { ptr::obj(func, "snapshot", s) }
}

/// perfabi_snapshot_generation() - the metadata generation the snapshot
/// was taken at.
/// @s: the snapshot.
///
/// Context: any thread.
/// Return: the generation; 0 if `s` is NULL.
///
/// # Safety
/// `s` is NULL or a live snapshot.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_generation(s: *const perfabi_snapshot) -> u64 {
    const F: &str = "perfabi_snapshot_generation";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live snapshot.
        Ok(unsafe { snapshot(F, s) }?.snap.generation)
    })
}

/// perfabi_snapshot_nr_cpus() - the CPUs the snapshot's values cover.
/// @s: the snapshot.
///
/// Context: any thread.
/// Return: their number; 0 if `s` is NULL.
///
/// # Safety
/// `s` is NULL or a live snapshot.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_nr_cpus(s: *const perfabi_snapshot) -> usize {
    const F: &str = "perfabi_snapshot_nr_cpus";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live snapshot.
        Ok(unsafe { snapshot(F, s) }?.snap.nr_cpus)
    })
}

/// perfabi_snapshot_nr_families() - the snapshot's families: every live
/// 1.0 counter (as a family of one member) first, then the family table's.
/// @s: the snapshot.
///
/// Context: any thread.
/// Return: their number; 0 if `s` is NULL.
///
/// # Safety
/// `s` is NULL or a live snapshot.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_nr_families(s: *const perfabi_snapshot) -> usize {
    const F: &str = "perfabi_snapshot_nr_families";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live snapshot.
        Ok(unsafe { snapshot(F, s) }?.families.len())
    })
}

/// perfabi_snapshot_family() - one of the snapshot's families.
/// @s: the snapshot.
/// @i: the family, 0 to perfabi_snapshot_nr_families() - 1.
///
/// Context: any thread.
/// Return: the family, which lives as long as the snapshot; NULL for a
/// NULL snapshot or a family past the last.
///
/// # Safety
/// `s` is NULL or a live snapshot.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_family(
    s: *const perfabi_snapshot,
    i: usize,
) -> *const perfabi_family_info {
    const F: &str = "perfabi_snapshot_family";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live snapshot.
        let s = unsafe { snapshot(F, s) }?;
        s.families
            .get(i)
            .map(|f| f as *const perfabi_family_info)
            .ok_or_else(|| Failure::invalid(F, format_args!("family {i} of {}", s.families.len())))
    })
}

/// perfabi_snapshot_find_family() - the snapshot's family of a name.
/// @s: the snapshot.
/// @name: the family's name (NUL-terminated), or a 1.0 counter's.
///
/// Context: any thread.
/// Return: the family, which lives as long as the snapshot; NULL if there
/// is none (last error `PERFABI_E_NO_SUCH_FAMILY`) or for a NULL argument.
///
/// # Safety
/// `s` is NULL or a live snapshot; `name` is NULL or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_find_family(
    s: *const perfabi_snapshot,
    name: *const c_char,
) -> *const perfabi_family_info {
    const F: &str = "perfabi_snapshot_find_family";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live snapshot and a C string.
        let (s, name) = unsafe { (snapshot(F, s)?, ptr::text(F, "name", name)?) };
        s.families
            .iter()
            .find(|f| f.family.name == name)
            .map(|f| f as *const perfabi_family_info)
            .ok_or_else(|| perfabi_reader::Error::NoSuchFamily(name.to_string()).into())
    })
}

/// The family `f` of snapshot `s`: one of its own, not another's.
///
/// # Safety
/// `s` and `f` are NULL or live.
unsafe fn parts<'a>(
    func: &str,
    s: *const perfabi_snapshot,
    f: *const perfabi_family_info,
) -> Result<(&'a perfabi_snapshot, &'a perfabi_family_info), Failure> {
    // SAFETY: the caller promises a live snapshot.
    let s = unsafe { snapshot(func, s) }?;
    // Compared by address before anything is read through `f`.
    let own = s.families.iter().find(|x| std::ptr::eq(*x, f));
    let f = own.ok_or_else(|| Failure::invalid(func, "family is not one of this snapshot's"))?;
    Ok((s, f))
}

/// perfabi_snapshot_u64() - an unsigned member's value in the snapshot:
/// a counter's, gauge's or peak's of type `PERFABI_VALUE_U64`.
/// @s: the snapshot.
/// @f: one of the snapshot's families.
/// @k: the member.
/// @cpu: a CPU, or `PERFABI_TOTAL` for the total over CPUs (the maximum
///       for a peak).
/// @out: receives the value.
///
/// Context: any thread.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_TYPE` for a signed family or a
/// histogram; `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `s` and `f` are NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_u64(
    s: *const perfabi_snapshot,
    f: *const perfabi_family_info,
    k: usize,
    cpu: u32,
    out: *mut u64,
) -> perfabi_error {
    const F: &str = "perfabi_snapshot_u64";
    guard(F, || {
        // SAFETY: the caller promises live objects.
        let (s, f) = unsafe { parts(F, s, f) }?;
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe {
            ptr::deliver(F, "out", out, || {
                family::get_u64(F, &s.snap, &f.family, k, cpu)
            })
        }
    })
}

/// perfabi_snapshot_i64() - a signed member's value in the snapshot (type
/// `PERFABI_VALUE_I64`).
/// @s: the snapshot.
/// @f: one of the snapshot's families.
/// @k: the member.
/// @cpu: a CPU, or `PERFABI_TOTAL`.
/// @out: receives the value.
///
/// Context: any thread.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_TYPE` for an unsigned family or
/// a histogram; `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `s` and `f` are NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_i64(
    s: *const perfabi_snapshot,
    f: *const perfabi_family_info,
    k: usize,
    cpu: u32,
    out: *mut i64,
) -> perfabi_error {
    const F: &str = "perfabi_snapshot_i64";
    guard(F, || {
        // SAFETY: the caller promises live objects.
        let (s, f) = unsafe { parts(F, s, f) }?;
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe {
            ptr::deliver(F, "out", out, || {
                family::get_i64(F, &s.snap, &f.family, k, cpu)
            })
        }
    })
}

/// perfabi_snapshot_histogram() - a histogram member's values in the
/// snapshot.
/// @s: the snapshot.
/// @f: one of the snapshot's families, a histogram.
/// @k: the member.
/// @cpu: a CPU, or `PERFABI_TOTAL` (bucket by bucket).
/// @out: receives the count, the sum and the number of buckets.
/// @buckets: receives the observations of each bucket (not cumulative),
///           the last one `+Inf`.
/// @n: the values `buckets` holds (perfabi_family_nr_buckets() suffice).
///
/// Context: any thread.
/// Return: `PERFABI_OK`; `PERFABI_E_BUFFER_TOO_SMALL` (then `out` is
/// filled, `out->nr_buckets` says how many are needed);
/// `PERFABI_E_WRONG_TYPE` if the family is not a histogram.
///
/// # Safety
/// `s` and `f` are NULL or live; `out` is NULL or writable; `buckets` is
/// NULL or `n` writable values.
#[no_mangle]
pub unsafe extern "C" fn perfabi_snapshot_histogram(
    s: *const perfabi_snapshot,
    f: *const perfabi_family_info,
    k: usize,
    cpu: u32,
    out: *mut perfabi_histogram,
    buckets: *mut u64,
    n: usize,
) -> perfabi_error {
    const F: &str = "perfabi_snapshot_histogram";
    guard(F, || {
        // SAFETY: the caller promises live objects.
        let (s, f) = unsafe { parts(F, s, f) }?;
        let out = ptr::out(F, "out", out)?;
        // SAFETY: `out` and `buckets` are writable (the caller's promise).
        unsafe {
            family::get_histogram(
                F,
                &s.snap,
                &f.family,
                k,
                cpu,
                HistogramOut { out, buckets, n },
            )
        }
    })
}
