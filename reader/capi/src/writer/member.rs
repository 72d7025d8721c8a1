//! The hot path of the C writer: a member's handle, and its updates — add,
//! set, observe, peak — each one call into the Rust writer, with no lookup
//! by name and no lock.

use std::sync::Arc;

use perfabi::Kind;
use perfabi_shm::writer::{Counter, MemberId, Writer};

use crate::error::{failed, guard_hot, perfabi_error, Failure};
use crate::ptr;

/// A member of a family a writer writes
/// (perfabi_writer_family_add_member()): the handle every update goes
/// through.
///
/// Thread safety: updates from any threads at once (each lands in the
/// block of the CPU its thread runs on); freed by one thread, once no
/// other uses it.
pub struct perfabi_member {
    /// The Rust writer's `Counter` handle of a counter or gauge member (the
    /// id checked once, the words' addresses kept ready), for
    /// perfabi_member_add(). It borrows the writer that `w` keeps alive:
    /// declared first, so it is dropped before (it has no drop of its own).
    counter: Option<Counter<'static>>,
    id: MemberId,
    w: Arc<Writer>,
}

/// The handle of member `id` of `w`.
pub(super) fn make(w: &Arc<Writer>, id: MemberId) -> perfabi_member {
    let counter = match id.kind() {
        Kind::Counter | Kind::Gauge => w.counter(id.instance()).ok().map(|c| {
            // SAFETY: `c` borrows the writer behind `w`, which lives on the
            // heap as long as an `Arc` of it does; the handle keeps one
            // (`perfabi_member::w`) for as long as it keeps `c`, and never
            // gives `c` out with the longer lifetime.
            unsafe { std::mem::transmute::<Counter<'_>, Counter<'static>>(c) }
        }),
        Kind::Peak | Kind::Histogram => None,
    };
    perfabi_member {
        counter,
        id,
        w: Arc::clone(w),
    }
}

/// The failure of an update `func` refused with `e` (out of line: the hot
/// path holds only the call).
#[cold]
#[inline(never)]
fn refused(func: &str, e: perfabi::Error) -> Failure {
    Failure::writer(func, "", &e)
}

/// Runs update `op` of entry point `func` on the member behind `m`: the
/// code of its result, every failure built and recorded out of line, so
/// that a success costs the update and the NULL check only.
///
/// # Safety
/// `m` is NULL or a live member handle.
#[inline(always)]
unsafe fn update(
    func: &'static str,
    m: *const perfabi_member,
    op: impl FnOnce(&perfabi_member) -> Result<(), perfabi::Error>,
) -> perfabi_error {
    guard_hot(func, || {
        // SAFETY: the caller promises NULL or a live handle.
        let Some(m) = (unsafe { m.as_ref() }) else {
            return failed(|| Failure::invalid(func, "m is NULL"));
        };
        match op(m) {
            Ok(()) => perfabi_error::PERFABI_OK,
            Err(e) => failed(|| refused(func, e)),
        }
    })
}

/// perfabi_member_add() - the hot path: add @delta (wrapping; negative
/// subtracts) to a counter or gauge member, on the calling thread's CPU:
/// no system call, no lock, no lookup; a few ns.
/// @m: the member.
/// @delta: what to add.
///
/// Context: any thread, any number at once; never blocks.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_KIND` (a peak or histogram
/// member), `PERFABI_E_UNKNOWN_INSTANCE` (the member or its family was
/// deleted: nothing is written), `PERFABI_E_INVALID_ARGUMENT` (NULL).
///
/// # Safety
/// `m` is NULL or a member handle not freed.
#[no_mangle]
pub unsafe extern "C" fn perfabi_member_add(m: *const perfabi_member, delta: i64) -> perfabi_error {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe {
        update("perfabi_member_add", m, |m| match &m.counter {
            Some(c) => c.adjust(delta),
            None => add_slow(m, delta),
        })
    }
}

/// perfabi_member_add() of a member with no `Counter`: a peak or
/// histogram, which the writer refuses (out of line).
#[cold]
#[inline(never)]
fn add_slow(m: &perfabi_member, delta: i64) -> Result<(), perfabi::Error> {
    m.w.member_add(&m.id, delta)
}

/// perfabi_member_set() - set a gauge member's value (its sum over CPUs):
/// the calling thread's CPU's share takes the difference. Adds racing with
/// it count as before or after it.
/// @m: the member.
/// @value: the new value (a gauge of `PERFABI_VALUE_U64` reads it as
///         unsigned).
///
/// Context: any thread; sets of one writer are serialised (a lock).
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_KIND` (not a gauge),
/// `PERFABI_E_UNKNOWN_INSTANCE` (deleted), `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `m` is NULL or a member handle not freed.
#[no_mangle]
pub unsafe extern "C" fn perfabi_member_set(m: *const perfabi_member, value: i64) -> perfabi_error {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { update("perfabi_member_set", m, |m| m.w.member_set(&m.id, value)) }
}

/// perfabi_member_observe() - record one observation in a histogram
/// member: its count, sum and bucket change in one update, so a reader
/// never sees them disagree.
/// @m: the member.
/// @value: the observation.
///
/// Context: any thread, any number at once; never blocks.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_KIND` (not a histogram),
/// `PERFABI_E_UNKNOWN_INSTANCE` (deleted), `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `m` is NULL or a member handle not freed.
#[no_mangle]
pub unsafe extern "C" fn perfabi_member_observe(
    m: *const perfabi_member,
    value: u64,
) -> perfabi_error {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { update("perfabi_member_observe", m, |m| m.w.observe(&m.id, value)) }
}

/// perfabi_member_peak() - record @value in a peak member: the calling
/// thread's CPU's high-water mark becomes @value if it is larger (readers
/// take the maximum over CPUs).
/// @m: the member.
/// @value: the value seen.
///
/// Context: any thread, any number at once; never blocks.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_KIND` (not a peak),
/// `PERFABI_E_UNKNOWN_INSTANCE` (deleted), `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `m` is NULL or a member handle not freed.
#[no_mangle]
pub unsafe extern "C" fn perfabi_member_peak(
    m: *const perfabi_member,
    value: u64,
) -> perfabi_error {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { update("perfabi_member_peak", m, |m| m.w.peak(&m.id, value)) }
}

/// perfabi_member_reset_peak() - reset a peak member to 0 on every CPU, as
/// one change: a reader's snapshot holds every CPU's mark from before the
/// reset or every one from after it.
/// @m: the member.
///
/// Context: any thread. Takes the writer's metadata lock.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_KIND` (not a peak),
/// `PERFABI_E_UNKNOWN_INSTANCE` (deleted), `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `m` is NULL or a member handle not freed.
#[no_mangle]
pub unsafe extern "C" fn perfabi_member_reset_peak(m: *const perfabi_member) -> perfabi_error {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { update("perfabi_member_reset_peak", m, |m| m.w.reset_peak(&m.id)) }
}

/// perfabi_member_delete() - delete a member from the segment (readers see
/// it gone at once). The handle stays allocated (free it): its updates
/// are refused from now on, and never reach the member that may reuse its
/// slots.
/// @m: the member.
///
/// Context: any thread. Takes the writer's metadata lock.
/// Return: `PERFABI_OK`; `PERFABI_E_UNKNOWN_INSTANCE` (deleted before, or
/// its family was), `PERFABI_E_INVALID_ARGUMENT` (NULL).
///
/// # Safety
/// `m` is NULL or a member handle not freed.
#[no_mangle]
pub unsafe extern "C" fn perfabi_member_delete(m: *const perfabi_member) -> perfabi_error {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { update("perfabi_member_delete", m, |m| m.w.del_member(&m.id)) }
}

/// perfabi_member_free() - free a member handle (the member stays in the
/// segment: perfabi_member_delete() deletes it).
/// @m: the handle, or NULL (nothing happens).
///
/// Context: any thread, once no other uses @m.
///
/// # Safety
/// `m` is NULL or a handle of perfabi_writer_family_add_member(), not
/// freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn perfabi_member_free(m: *mut perfabi_member) {
    // SAFETY: the caller gives back a handle once.
    unsafe { ptr::release("perfabi_member_free", m) }
}
