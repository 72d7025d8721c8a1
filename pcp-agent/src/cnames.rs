//! Name lists handed to libpcp_pmda by the namespace callbacks, in the
//! memory layout it frees: one `malloc` block holding the `n` string
//! pointers followed by the NUL-terminated strings (so one `free` releases
//! all), and a separate `malloc`ed array of `n` `int`s for leaf status
//! (see `pmdaTreeName`/`pmdaTreeChildren` in PCP's `libpcp_pmda/src/tree.c`,
//! and the `free(offspring)`/`free(statuslist)` in its `mainloop.c`).

use std::ffi::{c_char, c_int};

use crate::ffi::{PMNS_LEAF_STATUS, PMNS_NONLEAF_STATUS};

/// Why a list could not be made.
#[derive(Debug, PartialEq, Eq)]
pub enum PackError {
    /// A name holds a NUL byte.
    Nul,
    /// More names or bytes than a C `int` counts, or `malloc` failed.
    TooLarge,
}

/// The names packed into one `malloc` block, as `char **`; null for no
/// names. The caller hands it to libpcp_pmda, which frees it.
pub fn pack<'a>(
    names: impl ExactSizeIterator<Item = &'a str> + Clone,
) -> Result<*mut *mut c_char, PackError> {
    let n = names.len();
    if n == 0 {
        return Ok(std::ptr::null_mut());
    }
    if c_int::try_from(n).is_err() {
        return Err(PackError::TooLarge);
    }
    let mut bytes = 0usize;
    for s in names.clone() {
        if s.as_bytes().contains(&0) {
            return Err(PackError::Nul);
        }
        bytes = bytes.checked_add(s.len() + 1).ok_or(PackError::TooLarge)?;
    }
    let pointers = n * std::mem::size_of::<*mut c_char>();
    let total = pointers.checked_add(bytes).ok_or(PackError::TooLarge)?;
    // SAFETY: malloc of a non-zero size; the result is checked for null.
    let block = unsafe { libc::malloc(total) } as *mut u8;
    if block.is_null() {
        return Err(PackError::TooLarge);
    }
    let list = block as *mut *mut c_char;
    let mut at = pointers;
    for (i, s) in names.enumerate() {
        // SAFETY: `block` holds `total` bytes: `n` pointers (`i < n`), then
        // every string and its NUL; `at + s.len() + 1 <= total` because
        // `bytes` summed exactly these lengths. malloc's alignment suits a
        // pointer array at the block's start.
        unsafe {
            let dst = block.add(at);
            std::ptr::copy_nonoverlapping(s.as_ptr(), dst, s.len());
            *dst.add(s.len()) = 0;
            *list.add(i) = dst as *mut c_char;
        }
        at += s.len() + 1;
    }
    Ok(list)
}

/// A `malloc`ed array of `PMNS_LEAF_STATUS`/`PMNS_NONLEAF_STATUS`, one per
/// entry of `leaf`; null for none.
pub fn statuses(leaf: impl ExactSizeIterator<Item = bool>) -> Result<*mut c_int, PackError> {
    let n = leaf.len();
    if n == 0 {
        return Ok(std::ptr::null_mut());
    }
    let size = n
        .checked_mul(std::mem::size_of::<c_int>())
        .ok_or(PackError::TooLarge)?;
    // SAFETY: malloc of a non-zero size; the result is checked for null.
    let out = unsafe { libc::malloc(size) } as *mut c_int;
    if out.is_null() {
        return Err(PackError::TooLarge);
    }
    for (i, l) in leaf.enumerate() {
        let v = if l {
            PMNS_LEAF_STATUS
        } else {
            PMNS_NONLEAF_STATUS
        };
        // SAFETY: `out` holds `n` ints and `i < n` (an ExactSizeIterator).
        unsafe { *out.add(i) = v };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn packed_names_read_back_and_free_with_one_free() {
        let names = ["segment", "counter", "x_2"];
        let list = pack(names.iter().copied()).unwrap();
        for (i, want) in names.iter().enumerate() {
            // SAFETY: pack made `names.len()` valid C strings.
            let got = unsafe { CStr::from_ptr(*list.add(i)) };
            assert_eq!(got.to_str().unwrap(), *want);
        }
        let st = statuses([true, false, true].into_iter()).unwrap();
        // SAFETY: three ints were written.
        assert_eq!(unsafe { [*st, *st.add(1), *st.add(2)] }, [0, 1, 0]);
        // SAFETY: both came from malloc, as libpcp_pmda expects.
        unsafe {
            libc::free(list.cast());
            libc::free(st.cast());
        }
        assert!(pack([].iter().copied()).unwrap().is_null());
        assert!(statuses([].into_iter()).unwrap().is_null());
        assert_eq!(pack(["a\0b"].iter().copied()), Err(PackError::Nul));
    }
}
