//! The member instance of a label series, for a C program that maps sets
//! of labels onto members as the Python and `metrics` writers do
//! (`spec/PERFABI.md` §9.2): their one rule,
//! `perfabi_shm::writer::series_instance`, so that its series merge with
//! theirs in a directory and no two lists of values share an instance.

use std::ffi::c_char;

use perfabi::layout::MAX_LABELS;

use crate::error::{guard, perfabi_error, Failure};
use crate::ptr;

/// perfabi_series_instance() - the member instance of a series of two to
/// four labels (`spec/PERFABI.md` §9.2): each value with `%`, `,`, `"`,
/// `\` and every byte outside printable ASCII without space written
/// `%XX`, the values joined by `,` (`x%2Cy,z` for `x,y` and `z`), or, if
/// that is longer than 63 bytes, `#` and 16 hex digits of its FNV-1a
/// hash. Give the labels themselves as the member's labels
/// (perfabi_writer_family_add_member()) in a family of dimension
/// `series`.
/// @values: the label values, in the order of the family's label keys.
/// @nr_values: how many, 2 to 4.
/// @out: receives the instance, NUL-terminated.
/// @out_len: bytes at @out; 64 always suffice.
///
/// Context: any thread; allocates.
/// Return: `PERFABI_OK`; `PERFABI_E_INVALID_ARGUMENT` (@nr_values not 2
/// to 4, a NULL or non-UTF-8 value, @out NULL, or @out_len too small:
/// nothing written then).
///
/// # Safety
/// `values` is NULL or holds `nr_values` pointers, each NULL or a
/// NUL-terminated string; `out` is NULL or writable for `out_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn perfabi_series_instance(
    values: *const *const c_char,
    nr_values: usize,
    out: *mut c_char,
    out_len: usize,
) -> perfabi_error {
    const F: &str = "perfabi_series_instance";
    guard(F, || {
        // Bounded before anything is read.
        if !(2..=MAX_LABELS).contains(&nr_values) {
            return Err(Failure::invalid(
                F,
                format_args!("{nr_values} values: a series of labels has 2 to {MAX_LABELS}"),
            ));
        }
        if values.is_null() {
            return Err(Failure::invalid(F, "values is NULL"));
        }
        if out.is_null() {
            return Err(Failure::invalid(F, "out is NULL"));
        }
        // SAFETY: non-NULL; the caller promises `nr_values` pointers (at
        // most MAX_LABELS, checked above).
        let pointers = unsafe { std::slice::from_raw_parts(values, nr_values) };
        let mut texts = Vec::with_capacity(nr_values);
        for p in pointers {
            // SAFETY: the caller promises NULL or a C string.
            texts.push(unsafe { ptr::text(F, "a value", *p)? });
        }
        let instance = perfabi_shm::writer::series_instance(texts);
        if instance.len() >= out_len {
            return Err(Failure::invalid(
                F,
                format_args!(
                    "out_len {out_len}: the instance needs {} bytes",
                    instance.len() + 1
                ),
            ));
        }
        // SAFETY: `out` is writable for `out_len` bytes (the caller's
        // promise), more than the instance and its NUL (checked above);
        // a Rust string never overlaps the caller's buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(instance.as_ptr(), out.cast::<u8>(), instance.len());
            *out.add(instance.len()) = 0;
        }
        Ok(())
    })
}
