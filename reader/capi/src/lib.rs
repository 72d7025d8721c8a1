//! libperfabi: the perfabi reader for C programs.
//!
//! A C face on the one Rust reader (`perfabi-reader`): open a segment,
//! take consistent snapshots of its families and values, look a counter or
//! a family up once and read it again and again on the hot path (no system
//! call, no allocation), read DAMON regions. Nothing here reads a segment
//! itself: every read is the reader's, with its guarantees (never a torn
//! value, never a hang, never a crash on a truncated or hostile file).
//! And a C face on the Rust writer (`perfabi_shm::writer`, module
//! `writer`): create a segment, add families and members, update them.
//!
//! The C header `include/perfabi.h` is generated from this crate by
//! cbindgen (`reader/capi/regenerate-header`; a test fails while it is
//! stale) and installed, with `libperfabi.so.0` and `libperfabi.a`, by
//! `make -C reader/capi` then `make -C reader/capi install PREFIX=...`.
//!
//! Conventions of every entry point:
//!
//! * A call that can fail returns a `perfabi_error` (`PERFABI_OK`: 0) and
//!   writes its results through pointers; an accessor returns its value,
//!   NULL or 0 when it fails. A failure sets the calling thread's last
//!   error (perfabi_last_error_message(), perfabi_last_error_code_name());
//!   a success leaves it. While a thread ends (a pthread key's
//!   destructor, an atexit() handler) a failure returns its code only.
//! * Every pointer is checked for NULL (`PERFABI_E_INVALID_ARGUMENT`), and
//!   every string for UTF-8; nothing else of a pointer can be checked:
//!   each function's `# Safety` says what it must point to.
//! * No panic crosses into C: each body runs under `catch_unwind`, and a
//!   panic is `PERFABI_E_PANIC` with its message.
//! * Threads: a segment and its handles (with a family handle's family)
//!   are used by one thread at a time, the thread using the segment (they
//!   may move between threads); snapshots (with their families) and DAMON
//!   results are immutable, for any threads at once; the last error is per
//!   thread. A writer and its family and member handles are for any
//!   threads at once (the Rust writer is `Sync`), each freed by one
//!   thread once no other uses it. Each function's `Context:` line says
//!   which applies.
//!
//! This crate is the FFI home of the reader (`tests/architecture`): its
//! `unsafe` code turns C's pointers into Rust values, in `ptr` and at each
//! entry point, each block with the invariant it relies on.
#![allow(non_camel_case_types)] // C's names: perfabi_segment, PERFABI_OK

mod damon;
mod error;
mod family;
mod handle;
mod ptr;
mod segment;
mod snapshot;
mod writer;

use std::ffi::c_char;

pub use damon::*;
pub use error::perfabi_error;
pub use error::{perfabi_last_error_code, perfabi_last_error_code_name};
pub use error::{perfabi_last_error_message, perfabi_strerror};
pub use family::*;
pub use handle::*;
pub use segment::*;
pub use snapshot::*;
pub use writer::*;

/// Major version of libperfabi (of the C API: its soname is
/// `libperfabi.so.0` while this is 0).
pub const PERFABI_CAPI_VERSION_MAJOR: u32 = 0;
/// Minor version of libperfabi.
pub const PERFABI_CAPI_VERSION_MINOR: u32 = 1;
/// Patch version of libperfabi.
pub const PERFABI_CAPI_VERSION_PATCH: u32 = 0;

/// perfabi_version() - the version of the library loaded, as
/// `"MAJOR.MINOR.PATCH"` (compare with the header's
/// `PERFABI_CAPI_VERSION_*`).
///
/// Context: any thread.
/// Return: a static, NUL-terminated string.
#[no_mangle]
pub extern "C" fn perfabi_version() -> *const c_char {
    VERSION.as_ptr()
}

const VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
    Ok(v) => v,
    Err(_) => panic!("the package version has no NUL"),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_version_is_the_package_version() {
        let v = format!(
            "{PERFABI_CAPI_VERSION_MAJOR}.{PERFABI_CAPI_VERSION_MINOR}.{PERFABI_CAPI_VERSION_PATCH}"
        );
        assert_eq!(v, env!("CARGO_PKG_VERSION"));
        assert_eq!(VERSION.to_str().unwrap(), v);
    }
}
