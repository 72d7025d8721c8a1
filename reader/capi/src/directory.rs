//! A directory of segments read as one, for C (`spec/PERFABI.md` §15):
//! the reader library's `Directory` (which lists, checks, reads and
//! merges), and what one read of it gave, `perfabi_scrape`. Nothing is
//! merged here: the families and values are the library's.

use std::ffi::c_char;

use perfabi_reader::directory::{Directory, DirectoryOptions, MergedFamily, Scrape};
use perfabi_reader::Reading;

use crate::error::{c_string, guard, guard_value, perfabi_error, Failure};
use crate::family::{self, perfabi_family_info, perfabi_histogram, HistogramOut};
use crate::ptr;
use crate::segment::perfabi_options;

/// A segment directory, open: its segment files stay mapped between
/// reads (a file gone is dropped, a new one opened at the next read).
///
/// Thread safety: one thread at a time; it may move between threads.
pub struct perfabi_directory {
    dir: Directory,
}

/// How perfabi_directory_open() reads a directory. Start from
/// perfabi_directory_options_default() and change the fields you need.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfabi_directory_options {
    /// How each segment file is opened and read (whose files to believe,
    /// busy timeout, size limit); `require_live` is ignored: a dead
    /// writer's counters still count (§15.3).
    pub segment: perfabi_options,
    /// NULL (the default): writers' series merge. Else a label key, say
    /// "writer": every writer's series stay apart under it, its value the
    /// writer's `<name>.<pid>`. The string is copied by
    /// perfabi_directory_open().
    pub writer_label: *const c_char,
    /// Most segment files one read reads (default 10,000); past it the
    /// rest are left out and a problem says so.
    pub max_segments: usize,
}

/// perfabi_directory_options_default() - the options
/// perfabi_directory_open() uses when given NULL: perfabi_options_default()
/// for each file, no writer label, at most 10,000 segment files.
///
/// Context: any thread.
/// Return: the default options.
#[no_mangle]
pub extern "C" fn perfabi_directory_options_default() -> perfabi_directory_options {
    perfabi_directory_options {
        segment: crate::segment::perfabi_options_default(),
        writer_label: std::ptr::null(),
        max_segments: DirectoryOptions::default().max_segments,
    }
}

/// perfabi_directory_default_path() - the directory writers create their
/// segments in when given none: `$PERFABI_DIR` if set and not empty, else
/// `/dev/shm/perfabi-<euid>` (`spec/PERFABI.md` §15.1).
/// @buf: where the path goes, NUL-terminated (cut to fit); NULL to ask
///       only its length.
/// @len: bytes at @buf.
///
/// Context: any thread.
/// Return: the path's length in bytes, without the NUL (as snprintf():
/// the path was cut if this is @len or more).
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn perfabi_directory_default_path(buf: *mut c_char, len: usize) -> usize {
    // SAFETY: the caller's promise, forwarded.
    unsafe { crate::segment::copy_path(&perfabi_reader::directory::default_dir(), buf, len) }
}

/// perfabi_directory_open() - open a directory of segments, to read as
/// one with perfabi_directory_read().
/// @path: the directory, NUL-terminated UTF-8; NULL for
///        perfabi_directory_default_path(). No symbolic link of another
///        user is followed on the way; the directory must belong to root
///        or a trusted user and, if group or others may write it, be
///        sticky (`spec/PERFABI.md` §15.3).
/// @options: NULL for perfabi_directory_options_default().
/// @out: receives the directory (NULL on failure); close it with
///       perfabi_directory_close().
///
/// Context: any thread. The directory is then used by one thread at a
/// time.
/// Return: `PERFABI_OK`; `PERFABI_E_NOT_FOUND`, `PERFABI_E_FOREIGN_LINK`,
/// `PERFABI_E_UNTRUSTED_OWNER`, `PERFABI_E_WRITABLE_BY_OTHERS`,
/// `PERFABI_E_IO`, `PERFABI_E_INVALID_ARGUMENT` (the message says why).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `options` is NULL or points
/// to a `perfabi_directory_options` whose `writer_label` is NULL or a
/// NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_directory_open(
    path: *const c_char,
    options: *const perfabi_directory_options,
    out: *mut *mut perfabi_directory,
) -> perfabi_error {
    const F: &str = "perfabi_directory_open";
    guard(F, || {
        let make = || -> Result<perfabi_directory, Failure> {
            // SAFETY: the caller promises NULL or a NUL-terminated `path`.
            let path = unsafe { ptr::text_opt(F, "path", path) }?
                .map_or_else(perfabi_reader::directory::default_dir, Into::into);
            // SAFETY: the caller promises `options` is NULL or points to
            // a `perfabi_directory_options`.
            let o = unsafe { options.as_ref() }
                .copied()
                .unwrap_or_else(|| perfabi_directory_options_default());
            // SAFETY: the caller promises NULL or a NUL-terminated label.
            let label = unsafe { ptr::text_opt(F, "options->writer_label", o.writer_label) }?;
            if label == Some("") {
                return Err(Failure::invalid(
                    F,
                    "options->writer_label is empty (NULL for none)",
                ));
            }
            let opts = DirectoryOptions {
                segment: o.segment.to_rust(F)?,
                writer_label: label.map(str::to_string),
                max_segments: o.max_segments,
            };
            Ok(perfabi_directory {
                dir: Directory::open(path, opts)?,
            })
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_directory_close() - close a directory and unmap its segments.
/// @d: a directory from perfabi_directory_open(), or NULL (nothing
///     happens).
///
/// Context: the thread using the directory. Its reads
/// (`perfabi_scrape`) stay valid: they are copies.
///
/// # Safety
/// `d` is NULL or a directory from perfabi_directory_open(), not closed
/// before.
#[no_mangle]
pub unsafe extern "C" fn perfabi_directory_close(d: *mut perfabi_directory) {
    // SAFETY: the caller gives back a directory once.
    unsafe { ptr::release("perfabi_directory_close", d) }
}

/// One read of a directory (perfabi_directory_read()): its merged
/// families with their values, the problems met, and how many segment
/// files were merged.
///
/// Thread safety: immutable; any threads may read it at once. It does not
/// refer to its directory: it stays valid after perfabi_directory_close().
pub struct perfabi_scrape {
    families: Vec<(perfabi_family_info, MergedFamily)>,
    problems: Vec<ProblemText>,
    segments: usize,
}

/// A problem's strings as C strings.
struct ProblemText {
    file: std::ffi::CString,
    family: Option<std::ffi::CString>,
    message: std::ffi::CString,
    code: std::ffi::CString,
}

// Immutable once read: shared between threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<perfabi_scrape>();
};

impl perfabi_scrape {
    fn new(s: Scrape) -> Self {
        Self {
            families: s
                .families
                .into_iter()
                .map(|m| (perfabi_family_info::new(&m.family), m))
                .collect(),
            problems: s
                .problems
                .iter()
                .map(|p| ProblemText {
                    file: c_string(&p.file.display().to_string()),
                    family: p.family.as_deref().map(c_string),
                    message: c_string(&p.message),
                    code: c_string(p.code),
                })
                .collect(),
            segments: s.segments,
        }
    }
}

/// perfabi_directory_read() - list the directory, open its new segment
/// files and merge every segment's families (`spec/PERFABI.md` §15.4):
/// counters and histograms summed over every writer, live or dead (and
/// the directory's kept counts of folded writers), gauges over live
/// writers by their family's mode, peaks the largest.
/// @d: the directory.
/// @out: receives the read (NULL on failure); free it with
///       perfabi_scrape_free().
///
/// A file refused (a link, another user's, writable by others, truncated,
/// with a hole...) or unreadable, a family whose metadata differ between
/// two files, a limit reached: each is a problem of the read
/// (perfabi_scrape_problem_code()), never a failure of it; the rest is served.
///
/// Context: the thread using the directory. Allocates; system calls (the
/// listing, a shared `flock` of the fold lock, opening new files).
/// Return: `PERFABI_OK`; a failure only for the directory as a whole
/// (`PERFABI_E_UNTRUSTED_OWNER`, `PERFABI_E_WRITABLE_BY_OTHERS`,
/// `PERFABI_E_FOREIGN_LINK`, `PERFABI_E_NOT_FOUND`, `PERFABI_E_IO`: a fold
/// held the lock longer than the busy timeout, read again).
///
/// # Safety
/// `d` is NULL or an open directory used by this thread only; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_directory_read(
    d: *mut perfabi_directory,
    out: *mut *mut perfabi_scrape,
) -> perfabi_error {
    const F: &str = "perfabi_directory_read";
    guard(F, || {
        let make = || -> Result<perfabi_scrape, Failure> {
            // SAFETY: the caller promises an open directory, used by this
            // thread.
            let d = unsafe { ptr::obj_mut(F, "d", d) }?;
            Ok(perfabi_scrape::new(d.dir.read()?))
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_scrape_free() - free a directory's read and its families.
/// @s: a read, or NULL (nothing happens).
///
/// Context: any thread, once no thread uses the read any more.
///
/// # Safety
/// `s` is NULL or a read of perfabi_directory_read(), not freed before.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_free(s: *mut perfabi_scrape) {
    // SAFETY: the caller gives back a read once.
    unsafe { ptr::release("perfabi_scrape_free", s) }
}

/// The read behind `s`.
///
/// # Safety
/// `s` is NULL or a live read.
unsafe fn scrape<'a>(func: &str, s: *const perfabi_scrape) -> Result<&'a perfabi_scrape, Failure> {
    // SAFETY: the caller's promise, forwarded.
    unsafe { ptr::obj(func, "scrape", s) }
}

/// perfabi_scrape_nr_segments() - the segment files the read merged.
/// @s: the read.
///
/// Context: any thread.
/// Return: their number; 0 if `s` is NULL.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_nr_segments(s: *const perfabi_scrape) -> usize {
    const F: &str = "perfabi_scrape_nr_segments";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live read.
        Ok(unsafe { scrape(F, s) }?.segments)
    })
}

/// perfabi_scrape_nr_families() - the merged families, sorted by name.
/// @s: the read.
///
/// Context: any thread.
/// Return: their number; 0 if `s` is NULL.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_nr_families(s: *const perfabi_scrape) -> usize {
    const F: &str = "perfabi_scrape_nr_families";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live read.
        Ok(unsafe { scrape(F, s) }?.families.len())
    })
}

/// perfabi_scrape_family() - one merged family, described as a
/// snapshot's (perfabi_family_name(), perfabi_family_kind(),
/// perfabi_family_nr_members(), perfabi_family_member_label()...). Its
/// members are the merged series, in the order of (instance, labels); with
/// a writer label, each one's last label names its writer. Its
/// perfabi_family_reg_id() and member instance ids are those of the first
/// file that had it.
/// @s: the read.
/// @i: the family, 0 to perfabi_scrape_nr_families() - 1.
///
/// Context: any thread.
/// Return: the family, which lives as long as the read; NULL for a NULL
/// read or a family past the last.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_family(
    s: *const perfabi_scrape,
    i: usize,
) -> *const perfabi_family_info {
    const F: &str = "perfabi_scrape_family";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live read.
        let s = unsafe { scrape(F, s) }?;
        s.families
            .get(i)
            .map(|(f, _)| f as *const perfabi_family_info)
            .ok_or_else(|| Failure::invalid(F, format_args!("family {i} of {}", s.families.len())))
    })
}

/// perfabi_scrape_find_family() - the merged family of a name.
/// @s: the read.
/// @name: the family's name (NUL-terminated).
///
/// Context: any thread.
/// Return: the family, which lives as long as the read; NULL if there is
/// none (last error `PERFABI_E_NO_SUCH_FAMILY`: no file has it, or it was
/// refused, see perfabi_scrape_problem_code()) or for a NULL argument.
///
/// # Safety
/// `s` is NULL or a live read; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_find_family(
    s: *const perfabi_scrape,
    name: *const c_char,
) -> *const perfabi_family_info {
    const F: &str = "perfabi_scrape_find_family";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live read and a C string.
        let (s, name) = unsafe { (scrape(F, s)?, ptr::text(F, "name", name)?) };
        s.families
            .iter()
            .find(|(_, m)| m.family.name == name)
            .map(|(f, _)| f as *const perfabi_family_info)
            .ok_or_else(|| perfabi_reader::Error::NoSuchFamily(name.to_string()).into())
    })
}

/// The merged family `f` of read `s`: one of its own, not another's.
///
/// # Safety
/// `s` and `f` are NULL or live.
unsafe fn merged<'a>(
    func: &str,
    s: *const perfabi_scrape,
    f: *const perfabi_family_info,
) -> Result<&'a MergedFamily, Failure> {
    // SAFETY: the caller promises a live read.
    let s = unsafe { scrape(func, s) }?;
    // Compared by address before anything is read through `f`.
    s.families
        .iter()
        .find(|(x, _)| std::ptr::eq(x, f))
        .map(|(_, m)| m)
        .ok_or_else(|| Failure::invalid(func, "family is not one of this read's"))
}

/// Member `k`'s merged value.
fn value(func: &str, m: &MergedFamily, k: usize) -> Result<Reading, Failure> {
    m.readings.get(k).cloned().ok_or_else(|| {
        Failure::invalid(
            func,
            format_args!(
                "member {k} of family {}, which has {}",
                m.family.name,
                m.readings.len()
            ),
        )
    })
}

/// perfabi_scrape_family_writers() - how many segments (and the kept
/// counts of folded writers, as one) had a merged family.
/// @s: the read.
/// @f: one of the read's families.
///
/// Context: any thread.
/// Return: their number; 0 for a NULL argument or another read's family.
///
/// # Safety
/// `s` and `f` are NULL or live.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_family_writers(
    s: *const perfabi_scrape,
    f: *const perfabi_family_info,
) -> usize {
    const F: &str = "perfabi_scrape_family_writers";
    guard_value(F, 0, || {
        // SAFETY: the caller promises live objects.
        Ok(unsafe { merged(F, s, f) }?.writers)
    })
}

/// perfabi_scrape_u64() - a merged unsigned value: a counter's, gauge's
/// or peak's of type `PERFABI_VALUE_U64` (the sum over writers; by the
/// gauge mode for a gauge; the largest for a peak).
/// @s: the read.
/// @f: one of the read's families.
/// @k: the member (merged series).
/// @out: receives the value.
///
/// Context: any thread.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_TYPE` for a signed family or a
/// histogram; `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `s` and `f` are NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_u64(
    s: *const perfabi_scrape,
    f: *const perfabi_family_info,
    k: usize,
    out: *mut u64,
) -> perfabi_error {
    const F: &str = "perfabi_scrape_u64";
    guard(F, || {
        // SAFETY: the caller promises live objects.
        let m = unsafe { merged(F, s, f) }?;
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe {
            ptr::deliver(F, "out", out, || {
                family::as_u64(F, &m.family, value(F, m, k)?)
            })
        }
    })
}

/// perfabi_scrape_i64() - a merged signed value (type
/// `PERFABI_VALUE_I64`).
/// @s: the read.
/// @f: one of the read's families.
/// @k: the member (merged series).
/// @out: receives the value.
///
/// Context: any thread.
/// Return: `PERFABI_OK`; `PERFABI_E_WRONG_TYPE` for an unsigned family or
/// a histogram; `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `s` and `f` are NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_i64(
    s: *const perfabi_scrape,
    f: *const perfabi_family_info,
    k: usize,
    out: *mut i64,
) -> perfabi_error {
    const F: &str = "perfabi_scrape_i64";
    guard(F, || {
        // SAFETY: the caller promises live objects.
        let m = unsafe { merged(F, s, f) }?;
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe {
            ptr::deliver(F, "out", out, || {
                family::as_i64(F, &m.family, value(F, m, k)?)
            })
        }
    })
}

/// perfabi_scrape_histogram() - a merged histogram (count, sum and each
/// bucket summed over writers).
/// @s: the read.
/// @f: one of the read's families, a histogram.
/// @k: the member (merged series).
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
pub unsafe extern "C" fn perfabi_scrape_histogram(
    s: *const perfabi_scrape,
    f: *const perfabi_family_info,
    k: usize,
    out: *mut perfabi_histogram,
    buckets: *mut u64,
    n: usize,
) -> perfabi_error {
    const F: &str = "perfabi_scrape_histogram";
    guard(F, || {
        // SAFETY: the caller promises live objects.
        let m = unsafe { merged(F, s, f) }?;
        let out = ptr::out(F, "out", out)?;
        let r = value(F, m, k)?;
        // SAFETY: `out` and `buckets` are writable (the caller's promise).
        unsafe { family::put_histogram(F, &m.family, r, HistogramOut { out, buckets, n }) }
    })
}

/// perfabi_scrape_nr_problems() - the problems of the read: files refused
/// or unreadable, families refused for conflicting metadata, limits
/// reached. Each spoiled only itself.
/// @s: the read.
///
/// Context: any thread.
/// Return: their number; 0 if `s` is NULL.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_nr_problems(s: *const perfabi_scrape) -> usize {
    const F: &str = "perfabi_scrape_nr_problems";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live read.
        Ok(unsafe { scrape(F, s) }?.problems.len())
    })
}

/// Problem `i` of read `s`, an argument of `func`.
///
/// # Safety
/// `s` is NULL or a live read.
unsafe fn problem<'a>(
    func: &str,
    s: *const perfabi_scrape,
    i: usize,
) -> Result<&'a ProblemText, Failure> {
    // SAFETY: the caller promises a live read.
    let s = unsafe { scrape(func, s) }?;
    s.problems
        .get(i)
        .ok_or_else(|| Failure::invalid(func, format_args!("problem {i} of {}", s.problems.len())))
}

/// perfabi_scrape_problem_message() - a problem's whole message, in one
/// line, naming its file (and, for a family refused, both files that
/// disagree and on what).
/// @s: the read.
/// @i: the problem, 0 to perfabi_scrape_nr_problems() - 1.
///
/// Context: any thread.
/// Return: a NUL-terminated string that lives as long as the read; NULL
/// for a NULL read or a problem past the last.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_problem_message(
    s: *const perfabi_scrape,
    i: usize,
) -> *const c_char {
    const F: &str = "perfabi_scrape_problem_message";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live read.
        Ok(unsafe { problem(F, s, i) }?.message.as_ptr())
    })
}

/// perfabi_scrape_problem_code() - a problem's code: the reader's code
/// string of a file refused or unreadable (`spec/PERFABI.md` §11.6:
/// "symlink", "untrusted-owner", "sparse"...), "family-conflict" for a
/// family refused (live writers disagree) or a dead writer's counts of it
/// left out (§15.4), "limit" for a limit reached.
/// @s: the read.
/// @i: the problem, 0 to perfabi_scrape_nr_problems() - 1.
///
/// Context: any thread.
/// Return: a NUL-terminated string that lives as long as the read; NULL
/// for a NULL read or a problem past the last.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_problem_code(
    s: *const perfabi_scrape,
    i: usize,
) -> *const c_char {
    const F: &str = "perfabi_scrape_problem_code";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live read.
        Ok(unsafe { problem(F, s, i) }?.code.as_ptr())
    })
}

/// perfabi_scrape_problem_file() - the file a problem concerns (the first
/// of the two, for a family refused; the directory, for a limit).
/// @s: the read.
/// @i: the problem, 0 to perfabi_scrape_nr_problems() - 1.
///
/// Context: any thread.
/// Return: a NUL-terminated string that lives as long as the read; NULL
/// for a NULL read or a problem past the last.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_problem_file(
    s: *const perfabi_scrape,
    i: usize,
) -> *const c_char {
    const F: &str = "perfabi_scrape_problem_file";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live read.
        Ok(unsafe { problem(F, s, i) }?.file.as_ptr())
    })
}

/// perfabi_scrape_problem_family() - the family a problem concerns: one
/// refused, or one whose counts in the problem's file were left out
/// (`spec/PERFABI.md` §15.4).
/// @s: the read.
/// @i: the problem, 0 to perfabi_scrape_nr_problems() - 1.
///
/// Context: any thread.
/// Return: a NUL-terminated string that lives as long as the read; NULL
/// for a problem of a file or a limit (the last error unchanged), a NULL
/// read or a problem past the last.
///
/// # Safety
/// `s` is NULL or a live read.
#[no_mangle]
pub unsafe extern "C" fn perfabi_scrape_problem_family(
    s: *const perfabi_scrape,
    i: usize,
) -> *const c_char {
    const F: &str = "perfabi_scrape_problem_family";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live read.
        let p = unsafe { problem(F, s, i) }?;
        Ok(p.family.as_ref().map_or(std::ptr::null(), |f| f.as_ptr()))
    })
}
