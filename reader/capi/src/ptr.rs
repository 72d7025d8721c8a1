//! What C hands over, made into Rust values: the one place the library
//! turns raw pointers into references, strings and slices. Each helper
//! checks for NULL and says which argument of which function was wrong;
//! what it cannot check (that a non-NULL pointer is what the header says
//! it is) is the caller's promise, stated in each function's `# Safety`.

use std::ffi::{c_char, CStr};
use std::ptr::NonNull;

use crate::error::Failure;

/// The object behind `p`, an argument `what` of `func`.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing mutates for `'a`.
#[inline]
pub(crate) unsafe fn obj<'a, T>(func: &str, what: &str, p: *const T) -> Result<&'a T, Failure> {
    // SAFETY: the caller promises that a non-NULL `p` points to a live,
    // unaliased-for-writes `T` (this library's object, given back to it).
    unsafe { p.as_ref() }.ok_or_else(|| Failure::invalid(func, format_args!("{what} is NULL")))
}

/// The object behind `p`, for changing, an argument `what` of `func`.
///
/// # Safety
/// `p` is NULL or points to a live `T` that nothing else uses for `'a`.
#[inline]
pub(crate) unsafe fn obj_mut<'a, T>(
    func: &str,
    what: &str,
    p: *mut T,
) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller promises that a non-NULL `p` points to a live `T`
    // used by no one else during the call (the header's thread rules: one
    // thread at a time per segment and handle).
    unsafe { p.as_mut() }.ok_or_else(|| Failure::invalid(func, format_args!("{what} is NULL")))
}

/// Where to write a result: `p`, not NULL.
#[inline]
pub(crate) fn out<T>(func: &str, what: &str, p: *mut T) -> Result<NonNull<T>, Failure> {
    NonNull::new(p).ok_or_else(|| Failure::invalid(func, format_args!("{what} is NULL")))
}

/// Writes `v` to `p`, which [`out`] checked.
///
/// # Safety
/// `p` points to memory writable as a `T` (C's object of the argument's
/// type; whatever it held is overwritten, not read or dropped).
#[inline]
pub(crate) unsafe fn put<T>(p: NonNull<T>, v: T) {
    // SAFETY: the caller promises `p` is writable as a `T`; `write` neither
    // reads nor drops the old bytes.
    unsafe { p.as_ptr().write(v) }
}

/// Writes `v` to `p` if it is not NULL (an optional result).
///
/// # Safety
/// `p` is NULL or points to memory writable as a `T`.
#[inline]
pub(crate) unsafe fn put_opt<T>(p: *mut T, v: T) {
    if let Some(p) = NonNull::new(p) {
        // SAFETY: the caller's promise, forwarded.
        unsafe { put(p, v) }
    }
}

/// Makes an object for C, an argument `out` of `func`: `*out` is NULL
/// until `make` succeeds, then the new object (a `Box` that C gives back
/// to the matching `_free`).
///
/// # Safety
/// `out` is NULL or writable.
pub(crate) unsafe fn create<T>(
    func: &str,
    out: *mut *mut T,
    make: impl FnOnce() -> Result<T, Failure>,
) -> Result<(), Failure> {
    let out = self::out(func, "out", out)?;
    // SAFETY: `out` is writable (the caller's promise).
    unsafe { put(out, std::ptr::null_mut()) };
    let v = Box::into_raw(Box::new(make()?));
    // SAFETY: as above.
    unsafe { put(out, v) };
    Ok(())
}

/// Writes what `make` returns to `p`, an argument `what` of `func` that
/// is checked first (a NULL `p` fails before anything is done).
///
/// # Safety
/// `p` is NULL or writable as a `T`.
#[inline]
pub(crate) unsafe fn deliver<T>(
    func: &str,
    what: &str,
    p: *mut T,
    make: impl FnOnce() -> Result<T, Failure>,
) -> Result<(), Failure> {
    let p = out(func, what, p)?;
    let v = make()?;
    // SAFETY: `p` is writable (the caller's promise).
    unsafe { put(p, v) };
    Ok(())
}

/// The UTF-8 text behind the C string `p`, an argument `what` of `func`.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays unchanged
/// for `'a`.
pub(crate) unsafe fn text<'a>(
    func: &str,
    what: &str,
    p: *const c_char,
) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::invalid(func, format_args!("{what} is NULL")));
    }
    // SAFETY: non-NULL, and the caller promises a NUL-terminated string
    // that lives and stays unchanged during the call.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Failure::invalid(func, format_args!("{what} is not UTF-8")))
}

/// The text behind `p`, or `None` for NULL (an optional string).
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn text_opt<'a>(
    func: &str,
    what: &str,
    p: *const c_char,
) -> Result<Option<&'a str>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's promise, forwarded.
    unsafe { text(func, what, p) }.map(Some)
}

/// The caller's array `p` of `n` values, of which the call fills `need`
/// (the first `need`); an argument `what` of `func`.
///
/// # Safety
/// `p` is NULL or points to `n` values writable as `u64`s that nothing
/// else uses during the call.
#[inline]
pub(crate) unsafe fn values<'a>(
    func: &str,
    what: &str,
    p: *mut u64,
    n: usize,
    need: usize,
) -> Result<&'a mut [u64], Failure> {
    if p.is_null() {
        return Err(Failure::invalid(func, format_args!("{what} is NULL")));
    }
    if n < need {
        return Err(Failure::too_small(func, what, need, n));
    }
    // SAFETY: non-NULL; the caller promises `n >= need` writable `u64`s
    // (C memory: any bytes in it are a valid `u64`) used by no one else
    // during the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, need) })
}

/// Frees a `Box` the library gave to C (NULL: nothing).
///
/// # Safety
/// `p` is NULL or a pointer this library returned from `Box::into_raw`
/// for a `T`, not freed before and not used after.
pub(crate) unsafe fn free<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: the caller promises that `p` came from `Box::into_raw`
        // and is given back once.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// Frees, for entry point `func`, a `Box` the library gave to C (NULL:
/// nothing), under the guard every entry point runs in.
///
/// # Safety
/// As [`free`].
pub(crate) unsafe fn release<T>(func: &'static str, p: *mut T) {
    crate::error::guard_value(func, (), || {
        // SAFETY: the caller's promise, forwarded.
        unsafe { free(p) };
        Ok(())
    })
}
