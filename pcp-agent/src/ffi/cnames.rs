//! Name lists handed to libpcp_pmda by the namespace callbacks (and one
//! instance's name by the instance callback, [`OneName`]), in the memory
//! layout it frees: one `malloc` block holding the `n` string
//! pointers followed by the NUL-terminated strings (so one `free` releases
//! all), and a separate `malloc`ed array of `n` `int`s for leaf status
//! (see `pmdaTreeName`/`pmdaTreeChildren` in PCP's `libpcp_pmda/src/tree.c`,
//! and the `free(offspring)`/`free(statuslist)` in its `mainloop.c`).

use std::ffi::{c_char, c_int, CStr, CString};

use super::{pmInDom, pmInResult, PMNS_LEAF_STATUS, PMNS_NONLEAF_STATUS};

/// Why a list could not be made.
#[derive(Debug, PartialEq, Eq)]
pub enum PackError {
    /// A name holds a NUL byte.
    Nul,
    /// More names or bytes than a C `int` counts, or `malloc` failed.
    TooLarge,
}

/// Names packed into one `malloc` block, as `char **`.
///
/// # Safety
/// `ptr` is null (no names) or a `malloc` block of `len` pointers, each to
/// a NUL-terminated string stored after them in the same block. The list
/// owns the block: it frees it when dropped, unless
/// `into_raw` has handed it to libpcp_pmda, which frees it.
#[derive(Debug)]
pub struct NameList {
    ptr: *mut *mut c_char,
    len: usize,
}

impl NameList {
    /// The names, packed.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<NameList, PackError> {
        // Collected, so that both passes below see the same names.
        let names: Vec<&str> = names.into_iter().collect();
        let n = names.len();
        if n == 0 {
            return Ok(NameList {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        if c_int::try_from(n).is_err() {
            return Err(PackError::TooLarge);
        }
        let mut bytes = 0usize;
        for s in &names {
            if s.as_bytes().contains(&0) {
                return Err(PackError::Nul);
            }
            bytes = bytes.checked_add(s.len() + 1).ok_or(PackError::TooLarge)?;
        }
        let pointers = n
            .checked_mul(std::mem::size_of::<*mut c_char>())
            .ok_or(PackError::TooLarge)?;
        let total = pointers.checked_add(bytes).ok_or(PackError::TooLarge)?;
        // SAFETY: malloc of a non-zero size; the result is checked for null.
        let block = unsafe { libc::malloc(total) } as *mut u8;
        if block.is_null() {
            return Err(PackError::TooLarge);
        }
        let list = NameList {
            ptr: block.cast(),
            len: n,
        };
        let mut at = pointers;
        for (i, s) in names.iter().enumerate() {
            // SAFETY: `block` holds `total` bytes: `n` pointers (`i < n`),
            // then every string and its NUL; `at + s.len() + 1 <= total`
            // because `bytes` summed exactly these lengths. malloc's
            // alignment suits a pointer array at the block's start.
            unsafe {
                let dst = block.add(at);
                std::ptr::copy_nonoverlapping(s.as_ptr(), dst, s.len());
                *dst.add(s.len()) = 0;
                *list.ptr.add(i) = dst as *mut c_char;
            }
            at += s.len() + 1;
        }
        Ok(list)
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Name `i`.
    pub fn get(&self, i: usize) -> Option<&CStr> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i < len`: a pointer of the block to a NUL-terminated
        // string in it, which lives as long as `self`.
        Some(unsafe { CStr::from_ptr(*self.ptr.add(i)) })
    }

    /// The block, for libpcp_pmda to free; null for no names.
    pub(super) fn into_raw(self) -> *mut *mut c_char {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }
}

impl Drop for NameList {
    fn drop(&mut self) {
        // SAFETY: null or a malloc block this list owns (see the type).
        unsafe { libc::free(self.ptr.cast()) };
    }
}

/// The answer to "the name of instance `inst`": a `malloc`ed
/// `pmInResult` of one name, its `namelist` and the name `malloc`ed apart,
/// as `pmdaInstance` makes it and `__pmFreeInResult` frees it.
///
/// # Safety
/// `ptr` is a block as described, owned by this value until `into_raw`
/// hands it to libpcp_pmda; dropped before, it is freed as libpcp would.
#[derive(Debug)]
pub struct OneName {
    ptr: *mut pmInResult,
}

impl OneName {
    /// The result naming one instance of `indom` `name`.
    pub fn new(indom: pmInDom, name: &str) -> Result<OneName, PackError> {
        let c = CString::new(name).map_err(|_| PackError::Nul)?;
        // SAFETY: malloc of non-zero sizes, each result checked; strdup of
        // a valid C string. On a failure, what was made is freed.
        unsafe {
            let res = libc::malloc(std::mem::size_of::<pmInResult>()) as *mut pmInResult;
            if res.is_null() {
                return Err(PackError::TooLarge);
            }
            res.write(pmInResult {
                indom,
                numinst: 1,
                instlist: std::ptr::null_mut(),
                namelist: std::ptr::null_mut(),
            });
            let out = OneName { ptr: res };
            let list = libc::malloc(std::mem::size_of::<*mut c_char>()) as *mut *mut c_char;
            if list.is_null() {
                return Err(PackError::TooLarge);
            }
            list.write(std::ptr::null_mut());
            (*res).namelist = list;
            let dup = libc::strdup(c.as_ptr());
            if dup.is_null() {
                return Err(PackError::TooLarge);
            }
            list.write(dup);
            Ok(out)
        }
    }

    /// The name in it.
    pub fn name(&self) -> &CStr {
        // SAFETY: made by new: one non-null, NUL-terminated name.
        unsafe { CStr::from_ptr(*(*self.ptr).namelist) }
    }

    /// The result, for libpcp_pmda to send and free.
    pub(super) fn into_raw(self) -> *mut pmInResult {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }
}

impl Drop for OneName {
    fn drop(&mut self) {
        // SAFETY: the block made by new (see the type), freed as
        // __pmFreeInResult does: the name (if set), the list, the struct.
        unsafe {
            let list = (*self.ptr).namelist;
            if !list.is_null() {
                libc::free((*list).cast());
                libc::free(list.cast());
            }
            libc::free(self.ptr.cast());
        }
    }
}

/// A `malloc`ed array of `PMNS_LEAF_STATUS`/`PMNS_NONLEAF_STATUS`, as
/// `int *`.
///
/// # Safety
/// `ptr` is null (none) or a `malloc` block of `len` ints, owned as a
/// [`NameList`] owns its block.
#[derive(Debug)]
pub struct StatusList {
    ptr: *mut c_int,
    len: usize,
}

impl StatusList {
    /// The status of each entry of `leaf`: a leaf (a metric) or not.
    pub fn new(leaf: impl IntoIterator<Item = bool>) -> Result<StatusList, PackError> {
        let status: Vec<c_int> = leaf
            .into_iter()
            .map(|l| {
                if l {
                    PMNS_LEAF_STATUS
                } else {
                    PMNS_NONLEAF_STATUS
                }
            })
            .collect();
        let n = status.len();
        if n == 0 {
            return Ok(StatusList {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        let size = n
            .checked_mul(std::mem::size_of::<c_int>())
            .ok_or(PackError::TooLarge)?;
        // SAFETY: malloc of a non-zero size; the result is checked for null.
        let out = unsafe { libc::malloc(size) } as *mut c_int;
        if out.is_null() {
            return Err(PackError::TooLarge);
        }
        // SAFETY: `out` holds `n` ints, as many as `status` has; malloc's
        // alignment suits an int.
        unsafe { std::ptr::copy_nonoverlapping(status.as_ptr(), out, n) };
        Ok(StatusList { ptr: out, len: n })
    }

    /// Status `i`.
    pub fn get(&self, i: usize) -> Option<c_int> {
        // SAFETY: `i < len`: an int of the block.
        (i < self.len).then(|| unsafe { *self.ptr.add(i) })
    }

    /// The array, for libpcp_pmda to free; null for none.
    pub(super) fn into_raw(self) -> *mut c_int {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }
}

impl Drop for StatusList {
    fn drop(&mut self) {
        // SAFETY: null or a malloc block this list owns (see the type).
        unsafe { libc::free(self.ptr.cast()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_names_read_back_and_free_with_one_free() {
        let names = ["segment", "counter", "x_2"];
        let list = NameList::new(names.iter().copied()).unwrap();
        assert_eq!(list.len(), names.len());
        for (i, want) in names.iter().enumerate() {
            assert_eq!(list.get(i).unwrap().to_str().unwrap(), *want);
        }
        assert!(list.get(names.len()).is_none());
        let st = StatusList::new([true, false, true]).unwrap();
        assert_eq!(
            [st.get(0), st.get(1), st.get(2), st.get(3)],
            [Some(0), Some(1), Some(0), None]
        );
        let (list, st) = (list.into_raw(), st.into_raw());
        // SAFETY: both came from malloc, as libpcp_pmda expects, and are
        // freed once each.
        unsafe {
            libc::free(list.cast());
            libc::free(st.cast());
        }
        assert!(NameList::new([]).unwrap().into_raw().is_null());
        assert!(StatusList::new([]).unwrap().into_raw().is_null());
        assert_eq!(NameList::new(["a\0b"]).unwrap_err(), PackError::Nul);
        // Dropped, not handed out: freed by the lists themselves.
        drop(NameList::new(names).unwrap());
        drop(StatusList::new([false]).unwrap());
        // One instance's name: read back, freed by drop or as libpcp does.
        let one = OneName::new(7, "kdamond1/target0/region13").unwrap();
        assert_eq!(one.name().to_str().unwrap(), "kdamond1/target0/region13");
        drop(one);
        let raw = OneName::new(7, "x").unwrap().into_raw();
        // SAFETY: as __pmFreeInResult frees it.
        unsafe {
            assert_eq!(((*raw).indom, (*raw).numinst), (7, 1));
            assert!((*raw).instlist.is_null());
            libc::free((*(*raw).namelist).cast());
            libc::free((*raw).namelist.cast());
            libc::free(raw.cast());
        }
        assert_eq!(OneName::new(7, "a\0b").unwrap_err(), PackError::Nul);
    }
}
