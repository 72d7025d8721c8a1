//! The writer for C: a segment this process writes (`perfabi_writer`),
//! its families (`perfabi_writer_family`) and their members
//! (`perfabi_member`, the handle every update goes through). The Rust
//! writer (`perfabi_shm::writer`) wrapped, never reimplemented: every
//! rule, refusal and update is its own.
//!
//! Lifetime: every object holds the Rust writer by a reference count, so
//! no order of frees is wrong: perfabi_writer_close() gives up the
//! writer's own reference, and the segment is marked closed (readers see
//! its final values) when the writer and every family and member handle
//! of it are freed. A handle used after its family or member was deleted
//! is refused (`PERFABI_E_UNKNOWN_INSTANCE`), never misapplied.

mod family;
mod member;
mod series;

use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use perfabi_shm::directory;
use perfabi_shm::writer::{Config, Writer};

use crate::error::{guard, guard_value, perfabi_error, Failure};
use crate::ptr;

pub use family::*;
pub use member::*;
pub use series::*;

/// What a writer creates (perfabi_writer_options_default() gives the
/// defaults; NULL options are the defaults too).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct perfabi_writer_options {
    /// Per-CPU blocks; 0: one per possible CPU (the default, and what the
    /// writer's fastest update method needs).
    pub nr_cpus: u32,
    /// Value slots: a counter, gauge or peak member takes one, a histogram
    /// member 2 + its buckets (default 1024).
    pub max_values: u32,
    /// Family table capacity (default 128).
    pub max_families: u32,
    /// Member table capacity (default 1024).
    pub max_members: u32,
    /// The heartbeat interval promised to readers, in milliseconds
    /// (default 1000; 0: no heartbeat). A thread of the writer's own keeps
    /// the promise: the application never has to call anything.
    pub heartbeat_interval_ms: u32,
}

impl perfabi_writer_options {
    /// The Rust writer's configuration of these options.
    fn config(&self) -> Config {
        Config {
            nr_cpus: (self.nr_cpus != 0).then_some(self.nr_cpus),
            max_instances: self.max_values,
            max_families: self.max_families,
            max_members: self.max_members,
            // The C writer publishes no DAMON regions: no rings.
            damon_capacity: 0,
            heartbeat_interval: Duration::from_millis(u64::from(self.heartbeat_interval_ms)),
            ..Config::default()
        }
    }
}

impl Default for perfabi_writer_options {
    fn default() -> Self {
        let c = Config::default();
        Self {
            nr_cpus: 0,
            max_values: c.max_instances,
            max_families: c.max_families,
            max_members: c.max_members,
            heartbeat_interval_ms: u32::try_from(c.heartbeat_interval.as_millis())
                .unwrap_or(u32::MAX),
        }
    }
}

/// A segment this process writes (perfabi_writer_create(),
/// perfabi_writer_create_in()).
///
/// Thread safety: any threads at once (the Rust writer is `Sync`), but
/// perfabi_writer_close() by one thread, once no other uses it.
///
/// fork(): a child must neither update nor close its parent's writer or
/// handles (its updates would land in the parent's segment, counted as the
/// parent's); it creates a writer of its own (perfabi_writer_create_in()
/// gives it a file of its own in the same directory).
pub struct perfabi_writer {
    pub(crate) w: Arc<Writer>,
    path: CString,
}

/// perfabi_writer_options_default() - the default writer options.
///
/// Context: any thread.
/// Return: the defaults (see `perfabi_writer_options`).
#[no_mangle]
pub extern "C" fn perfabi_writer_options_default() -> perfabi_writer_options {
    perfabi_writer_options::default()
}

/// The options behind `opts` (NULL: the defaults).
///
/// # Safety
/// `opts` is NULL or points to a `perfabi_writer_options`.
unsafe fn options(opts: *const perfabi_writer_options) -> perfabi_writer_options {
    // SAFETY: the caller promises NULL or a readable struct (of integers
    // only: any bytes are valid).
    unsafe { opts.as_ref() }.copied().unwrap_or_default()
}

/// The C object of a writer made by `make` (its path kept as C text).
/// `at` says where, for the message of a failure.
fn made(
    func: &str,
    at: &str,
    make: impl FnOnce() -> Result<Writer, perfabi_shm::writer::CreateError>,
) -> Result<perfabi_writer, Failure> {
    let w = make().map_err(|e| Failure::create(func, at, e))?;
    let path = w
        .path()
        .map(|p| crate::error::c_string(&p.to_string_lossy()))
        .unwrap_or_default();
    Ok(perfabi_writer {
        w: Arc::new(w),
        path,
    })
}

/// perfabi_writer_create() - create a segment at a path and write it.
/// @path: where (normally under /dev/shm): the segment is built under a
///        temporary name and renamed into place, replacing an older one
///        (whose readers see it created again).
/// @opts: the options, or NULL for perfabi_writer_options_default().
/// @out: receives the writer (NULL on failure); close it with
///       perfabi_writer_close().
///
/// Context: any thread. Creates a file and starts the writer's heartbeat
/// thread.
/// Return: `PERFABI_OK`; `PERFABI_E_BAD_CONFIG` (options no segment can
/// have), `PERFABI_E_IO` (the file could not be created: the message
/// says why), `PERFABI_E_INVALID_ARGUMENT` (NULL `path` or `out`, a path
/// that is not UTF-8).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `opts` is NULL or points to
/// a `perfabi_writer_options`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_create(
    path: *const c_char,
    opts: *const perfabi_writer_options,
    out: *mut *mut perfabi_writer,
) -> perfabi_error {
    const F: &str = "perfabi_writer_create";
    guard(F, || {
        let make = || {
            // SAFETY: the caller promises a C string and NULL or options.
            let (path, opts) = unsafe { (ptr::text(F, "path", path)?, options(opts)) };
            made(F, path, || Writer::create(path, &opts.config()))
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_writer_create_in() - create a segment of the writer @name in a
/// directory of segments (`spec/PERFABI.md` §15), which readers read as
/// one with every other writer's there: the file is
/// `<name>.<pid>.<nonce>.perfabi`, new at each creation, so a restarted
/// worker never reuses a dead one's file, and a dead one's counts are
/// kept by the directory's fold.
/// @dir: the directory, created (mode 0755) if absent and refused if
///       another user could replace its files; NULL: the default,
///       `$PERFABI_DIR` if set and not empty, else
///       `/dev/shm/perfabi-<euid>` (where readers look by default).
/// @name: the writer's name: 1 to 64 ASCII letters, digits, `_` or `-`.
/// @opts: the options, or NULL for perfabi_writer_options_default().
/// @out: receives the writer (NULL on failure); close it with
///       perfabi_writer_close().
///
/// Context: any thread. Creates a file (and the directory), folds dead
/// writers' segments, starts the writer's heartbeat thread.
/// Return: `PERFABI_OK`; `PERFABI_E_BAD_NAME` (@name), `PERFABI_E_BAD_CONFIG`,
/// `PERFABI_E_IO` (the directory or file could not be made or used: the
/// message says why), `PERFABI_E_INVALID_ARGUMENT` (NULL @name or @out,
/// text that is not UTF-8).
///
/// # Safety
/// `dir` and `name` are NULL or NUL-terminated strings; `opts` is NULL or
/// points to a `perfabi_writer_options`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_create_in(
    dir: *const c_char,
    name: *const c_char,
    opts: *const perfabi_writer_options,
    out: *mut *mut perfabi_writer,
) -> perfabi_error {
    const F: &str = "perfabi_writer_create_in";
    guard(F, || {
        let make = || {
            // SAFETY: the caller promises C strings and NULL or options.
            let (dir, name, opts) = unsafe {
                (
                    ptr::text_opt(F, "dir", dir)?,
                    ptr::text(F, "name", name)?,
                    options(opts),
                )
            };
            if !directory::valid_name(name) {
                return Err(Failure::writer_name(F, name));
            }
            let dir = dir.map_or_else(directory::default_dir, PathBuf::from);
            let at = format!("{}/{name}.*", dir.display());
            made(F, &at, || Writer::create_in(&dir, name, &opts.config()))
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_writer_path() - where a writer's segment is.
/// @w: the writer.
///
/// Context: any thread.
/// Return: the path, a NUL-terminated string owned by the writer, valid
/// until perfabi_writer_close(); NULL if @w is NULL.
///
/// # Safety
/// `w` is NULL or a writer not closed.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_path(w: *const perfabi_writer) -> *const c_char {
    const F: &str = "perfabi_writer_path";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live writer.
        Ok(unsafe { ptr::obj(F, "w", w) }?.path.as_ptr())
    })
}

/// perfabi_writer_close() - give up a writer. The segment is marked closed
/// (readers report the writer gone, with its final values) once the writer
/// and every family and member handle made from it are freed: free them
/// before or after, in any order. Handles still held keep working (their
/// updates count) until they are freed.
/// @w: the writer, or NULL (nothing happens).
///
/// Context: any thread, once no other thread uses @w.
///
/// # Safety
/// `w` is NULL or a writer of perfabi_writer_create() or
/// perfabi_writer_create_in(), not closed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_close(w: *mut perfabi_writer) {
    // SAFETY: the caller gives back a writer once.
    unsafe { ptr::release("perfabi_writer_close", w) }
}
