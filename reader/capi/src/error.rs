//! Error codes, the thread's last error, and the guard every entry point
//! runs its body in (no panic crosses into C).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use perfabi_reader::Error;

/// What a call of libperfabi returned: `PERFABI_OK`, or why it failed.
///
/// One code for each error code of the Rust reader (`spec/PERFABI.md`
/// §11.6); the codes of §8 (a malformed segment, a busy writer) grouped;
/// then the failures of the C boundary itself. The exact code string of
/// the reader (`"truncated-while-mapped"`, `"bad-magic"`...) is
/// `perfabi_last_error_code_name()`, and the whole message, with the path
/// and what to do, `perfabi_last_error_message()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum perfabi_error {
    /// Success.
    PERFABI_OK = 0,
    /// `not-found`: nothing at the path (start the writer).
    PERFABI_E_NOT_FOUND = 1,
    /// `io`: open, `fstat`, `lseek` or `mmap` failed (see the message).
    PERFABI_E_IO = 2,
    /// `symlink`: the path's last component is a symbolic link, which a
    /// reader does not follow (give the real path).
    PERFABI_E_SYMLINK = 3,
    /// `foreign-link`: a folder on the way is a symbolic link of another
    /// user.
    PERFABI_E_FOREIGN_LINK = 4,
    /// `raced`: the path named another file while it was opened (retry).
    PERFABI_E_RACED = 5,
    /// `not-a-segment-file`: a directory, FIFO, socket, device, a file
    /// with other hard links, or one shorter than a header.
    PERFABI_E_NOT_A_SEGMENT_FILE = 6,
    /// `writable-by-others`: the file's mode lets group or others write it.
    PERFABI_E_WRITABLE_BY_OTHERS = 7,
    /// `untrusted-owner`: the file belongs to a user this reader does not
    /// trust (see `perfabi_options.trust`).
    PERFABI_E_UNTRUSTED_OWNER = 8,
    /// `sparse`: the file has a hole inside its segment.
    PERFABI_E_SPARSE = 9,
    /// `too-large`: the segment is larger than
    /// `perfabi_options.max_segment_bytes`.
    PERFABI_E_TOO_LARGE = 10,
    /// `stale`: the writer is gone or silent (restart it).
    PERFABI_E_STALE = 11,
    /// `closed`: the writer closed the segment; its values are final.
    PERFABI_E_CLOSED = 12,
    /// `truncated-while-mapped`: the file was truncated under the reader;
    /// the read's data was discarded (read again).
    PERFABI_E_TRUNCATED_WHILE_MAPPED = 13,
    /// `header-changed`: the header was zeroed, overwritten or created
    /// again under the reader; the read's data was discarded (read again).
    PERFABI_E_HEADER_CHANGED = 14,
    /// `no-such-counter`: no live counter or instance has that name.
    PERFABI_E_NO_SUCH_COUNTER = 15,
    /// `no-such-family`: no live metric family has that name.
    PERFABI_E_NO_SUCH_FAMILY = 16,
    /// `busy-cpu`, `busy-metadata`: a consistent read did not succeed
    /// within `perfabi_options.busy_timeout_ms` (the writer is updating
    /// too fast, or died mid-update): retry later.
    PERFABI_E_BUSY = 17,
    /// `unknown-instance`: a handle's counter or family was deleted, or
    /// the segment was created again: look it up again.
    PERFABI_E_UNKNOWN_INSTANCE = 18,
    /// `unsupported-major`: the segment is of an ABI major version this
    /// library does not know.
    PERFABI_E_UNSUPPORTED_MAJOR = 19,
    /// Any other code of `spec/PERFABI.md` §8: the segment breaks the
    /// spec (`bad-magic`, `out-of-bounds`, `bad-family`, `bad-histogram`...;
    /// the code string says which).
    PERFABI_E_MALFORMED = 20,
    /// `invalid-argument`: a NULL pointer, a string that is not UTF-8, an
    /// index out of range, or an object used with a segment it does not
    /// belong to.
    PERFABI_E_INVALID_ARGUMENT = 21,
    /// `buffer-too-small`: the caller's array holds fewer values than the
    /// call has (the message says how many it needs).
    PERFABI_E_BUFFER_TOO_SMALL = 22,
    /// `wrong-type`: the value asked for is not of the member's type (a
    /// `u64` of a signed family, a single value of a histogram).
    PERFABI_E_WRONG_TYPE = 23,
    /// `panic`: the library failed inside (a bug; please report the
    /// message). Close the segment the call was given.
    PERFABI_E_PANIC = 24,
    /// `not-read`: a family handle holds no values: it was not read yet,
    /// or its last perfabi_family_read() failed (read it again).
    PERFABI_E_NOT_READ = 25,
    /// A writer's refusal of what it was asked to describe: `bad-name`,
    /// `bad-help`, `bad-unit`, `bad-label-key` (a dimension or label key),
    /// `bad-instance`, `bad-labels`, `bad-buckets` (the rules of
    /// `spec/PERFABI.md` §5; the message says which string).
    PERFABI_E_BAD_NAME = 26,
    /// A writer's `duplicate-name` (a live family or counter has that name
    /// or clashes with it, §5) or `duplicate-instance` (the family has a
    /// live member of that instance).
    PERFABI_E_DUPLICATE = 27,
    /// A writer's `table-full` (no value slots left) or `no-family-room`
    /// (no family or member slot left, or a segment without family
    /// tables): create the writer with larger `perfabi_writer_options`.
    PERFABI_E_TABLE_FULL = 28,
    /// A writer's `wrong-kind`: the update does not fit the member's kind
    /// (observe() of a counter, set() of a counter), or the family spec
    /// does not fit its kind (buckets on a gauge, a signed peak).
    PERFABI_E_WRONG_KIND = 29,
    /// A writer's `bad-config`: `perfabi_writer_options` describe a
    /// segment the ABI cannot hold (the core's code, `bad-capacity`,
    /// `bad-cpu-count`..., is the code string).
    PERFABI_E_BAD_CONFIG = 30,
    /// Not a code: one more than the largest (non-ABI; codes may be added
    /// before it).
    PERFABI_E_MAX = 31,
}

use perfabi_error::*;

/// The reader's code strings with a code of their own, and theirs; any
/// other code of a malformed segment is `PERFABI_E_MALFORMED`.
const CODES: [(&str, perfabi_error); 20] = [
    ("not-found", PERFABI_E_NOT_FOUND),
    ("io", PERFABI_E_IO),
    ("symlink", PERFABI_E_SYMLINK),
    ("foreign-link", PERFABI_E_FOREIGN_LINK),
    ("raced", PERFABI_E_RACED),
    ("not-a-segment-file", PERFABI_E_NOT_A_SEGMENT_FILE),
    ("writable-by-others", PERFABI_E_WRITABLE_BY_OTHERS),
    ("untrusted-owner", PERFABI_E_UNTRUSTED_OWNER),
    ("sparse", PERFABI_E_SPARSE),
    ("too-large", PERFABI_E_TOO_LARGE),
    ("stale", PERFABI_E_STALE),
    ("closed", PERFABI_E_CLOSED),
    ("truncated-while-mapped", PERFABI_E_TRUNCATED_WHILE_MAPPED),
    ("header-changed", PERFABI_E_HEADER_CHANGED),
    ("no-such-counter", PERFABI_E_NO_SUCH_COUNTER),
    ("no-such-family", PERFABI_E_NO_SUCH_FAMILY),
    ("busy-cpu", PERFABI_E_BUSY),
    ("busy-metadata", PERFABI_E_BUSY),
    ("unknown-instance", PERFABI_E_UNKNOWN_INSTANCE),
    ("unsupported-major", PERFABI_E_UNSUPPORTED_MAJOR),
];

impl perfabi_error {
    /// The C code of the reader's code string `code`: its own, else
    /// `PERFABI_E_MALFORMED` (every other code is the core's, of a segment
    /// that breaks the spec).
    pub fn of_code(code: &str) -> Self {
        CODES
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(PERFABI_E_MALFORMED, |&(_, e)| e)
    }

    /// The code of `e`.
    pub fn of(e: &Error) -> Self {
        Self::of_code(e.code())
    }

    /// The code whose value is `code`, if any.
    fn from_raw(code: c_int) -> Option<Self> {
        ALL.iter().copied().find(|&e| e as c_int == code)
    }

    /// One line saying what the code means, for `perfabi_strerror`.
    fn text(self) -> &'static CStr {
        match self {
            PERFABI_OK => c"success",
            PERFABI_E_NOT_FOUND => c"no segment at the path (is the writer running?)",
            PERFABI_E_IO => c"the segment could not be opened or mapped",
            PERFABI_E_SYMLINK => c"the path is a symbolic link, which readers do not follow",
            PERFABI_E_FOREIGN_LINK => {
                c"the way to the path goes through a symbolic link of another user"
            }
            PERFABI_E_RACED => c"the file was replaced while it was opened (retry)",
            PERFABI_E_NOT_A_SEGMENT_FILE => c"the path names something that is not a segment",
            PERFABI_E_WRITABLE_BY_OTHERS => c"the segment file is writable by others",
            PERFABI_E_UNTRUSTED_OWNER => c"the segment file belongs to an untrusted user",
            PERFABI_E_SPARSE => c"the segment file has a hole",
            PERFABI_E_TOO_LARGE => c"the segment is larger than the reader's limit",
            PERFABI_E_STALE => c"the writer is gone or silent",
            PERFABI_E_CLOSED => c"the writer closed the segment; values are final",
            PERFABI_E_TRUNCATED_WHILE_MAPPED => c"the segment was truncated under the reader (read again)",
            PERFABI_E_HEADER_CHANGED => c"the segment's header changed under the reader (read again)",
            PERFABI_E_NO_SUCH_COUNTER => c"no live counter or instance has that name",
            PERFABI_E_NO_SUCH_FAMILY => c"no live metric family has that name",
            PERFABI_E_BUSY => c"the writer kept the segment busy (retry later)",
            PERFABI_E_UNKNOWN_INSTANCE => {
                c"the handle's counter or family is gone, or the segment was created again (look it up again)"
            }
            PERFABI_E_UNSUPPORTED_MAJOR => c"the segment's ABI major version is not supported",
            PERFABI_E_MALFORMED => c"the segment is malformed",
            PERFABI_E_INVALID_ARGUMENT => c"invalid argument",
            PERFABI_E_BUFFER_TOO_SMALL => c"buffer too small",
            PERFABI_E_WRONG_TYPE => c"the value is not of the type asked for",
            PERFABI_E_PANIC => c"internal error in libperfabi (a bug)",
            PERFABI_E_NOT_READ => {
                c"the family handle holds no values: not read yet, or its last read failed (read it again)"
            }
            PERFABI_E_BAD_NAME => {
                c"the writer refused a name, help, unit, label or buckets (see the naming rules)"
            }
            PERFABI_E_DUPLICATE => c"a live family, counter or member already has that name",
            PERFABI_E_TABLE_FULL => {
                c"the segment has no room left (create the writer with larger tables)"
            }
            PERFABI_E_WRONG_KIND => c"the update or spec does not fit the family's kind",
            PERFABI_E_BAD_CONFIG => c"the writer's options describe no valid segment",
            PERFABI_E_MAX => c"unknown error code",
        }
    }
}

/// Every code, in order (`PERFABI_E_MAX` last).
const ALL: [perfabi_error; 32] = [
    PERFABI_OK,
    PERFABI_E_NOT_FOUND,
    PERFABI_E_IO,
    PERFABI_E_SYMLINK,
    PERFABI_E_FOREIGN_LINK,
    PERFABI_E_RACED,
    PERFABI_E_NOT_A_SEGMENT_FILE,
    PERFABI_E_WRITABLE_BY_OTHERS,
    PERFABI_E_UNTRUSTED_OWNER,
    PERFABI_E_SPARSE,
    PERFABI_E_TOO_LARGE,
    PERFABI_E_STALE,
    PERFABI_E_CLOSED,
    PERFABI_E_TRUNCATED_WHILE_MAPPED,
    PERFABI_E_HEADER_CHANGED,
    PERFABI_E_NO_SUCH_COUNTER,
    PERFABI_E_NO_SUCH_FAMILY,
    PERFABI_E_BUSY,
    PERFABI_E_UNKNOWN_INSTANCE,
    PERFABI_E_UNSUPPORTED_MAJOR,
    PERFABI_E_MALFORMED,
    PERFABI_E_INVALID_ARGUMENT,
    PERFABI_E_BUFFER_TOO_SMALL,
    PERFABI_E_WRONG_TYPE,
    PERFABI_E_PANIC,
    PERFABI_E_NOT_READ,
    PERFABI_E_BAD_NAME,
    PERFABI_E_DUPLICATE,
    PERFABI_E_TABLE_FULL,
    PERFABI_E_WRONG_KIND,
    PERFABI_E_BAD_CONFIG,
    PERFABI_E_MAX,
];

/// The writer's code strings (`perfabi::Error::code`) with a code of
/// their own; any other is the reader's mapping ([`perfabi_error::of_code`]:
/// `unknown-instance`, `closed`...). Separate from [`CODES`]: a reader
/// that finds a bad name in a segment has a malformed segment, a writer
/// asked for one has a bad argument.
const WRITER_CODES: [(&str, perfabi_error); 12] = [
    ("bad-name", PERFABI_E_BAD_NAME),
    ("bad-help", PERFABI_E_BAD_NAME),
    ("bad-unit", PERFABI_E_BAD_NAME),
    ("bad-label-key", PERFABI_E_BAD_NAME),
    ("bad-instance", PERFABI_E_BAD_NAME),
    ("bad-labels", PERFABI_E_BAD_NAME),
    ("bad-buckets", PERFABI_E_BAD_NAME),
    ("duplicate-name", PERFABI_E_DUPLICATE),
    ("duplicate-instance", PERFABI_E_DUPLICATE),
    ("table-full", PERFABI_E_TABLE_FULL),
    ("no-family-room", PERFABI_E_TABLE_FULL),
    ("wrong-kind", PERFABI_E_WRONG_KIND),
];

/// Why a call failed: its code, the stable code string and the message
/// that the thread's last error keeps.
#[derive(Debug)]
pub(crate) struct Failure {
    code: perfabi_error,
    name: &'static str,
    message: String,
}

impl Failure {
    /// A bad argument of function `func`.
    pub(crate) fn invalid(func: &str, what: impl std::fmt::Display) -> Self {
        Self {
            code: PERFABI_E_INVALID_ARGUMENT,
            name: "invalid-argument",
            message: format!("{func}: {what}"),
        }
    }

    /// A caller's array of `have` values where `need` are needed.
    pub(crate) fn too_small(func: &str, what: &str, need: usize, have: usize) -> Self {
        Self {
            code: PERFABI_E_BUFFER_TOO_SMALL,
            name: "buffer-too-small",
            message: format!("{func}: {what} holds {have} values; {need} are needed"),
        }
    }

    /// A value asked for as a type the member does not have.
    pub(crate) fn wrong_type(func: &str, what: impl std::fmt::Display) -> Self {
        Self {
            code: PERFABI_E_WRONG_TYPE,
            name: "wrong-type",
            message: format!("{func}: {what}"),
        }
    }

    /// A family handle's values asked for when it holds none.
    pub(crate) fn not_read(func: &str) -> Self {
        Self {
            code: PERFABI_E_NOT_READ,
            name: "not-read",
            message: format!(
                "{func}: the family handle holds no values: it was not read yet, \
                 or its last perfabi_family_read() failed (read it again)"
            ),
        }
    }

    fn panic(func: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        Self {
            code: PERFABI_E_PANIC,
            name: "panic",
            message: format!(
                "{func}: internal error in libperfabi: {what} (a bug: please report it; close the segment)"
            ),
        }
    }

    /// Keeps the failure as the thread's last error; its code. While the
    /// thread ends (a pthread key's destructor, an atexit() handler, after
    /// the thread's thread-local storage was freed) it keeps nothing: the
    /// code is returned all the same (`LocalKey::with` would panic there,
    /// outside `catch_unwind`, and abort the program).
    #[cold]
    fn record(self) -> perfabi_error {
        let code = self.code;
        // An `Err` is a thread whose storage is gone: nothing to keep.
        let _ = LAST.try_with(|l| {
            *l.borrow_mut() = Some(LastError {
                code,
                name: c_string(self.name),
                message: c_string(&self.message),
            })
        });
        code
    }
}

impl Failure {
    /// The Rust writer's refusal `e` in entry point `func`, about `what`
    /// (the name or instance it was given, for the message).
    #[cold]
    pub(crate) fn writer(func: &str, what: &str, e: &perfabi::Error) -> Self {
        let name = e.code();
        let code = WRITER_CODES
            .iter()
            .find(|(c, _)| *c == name)
            .map_or_else(|| perfabi_error::of_code(name), |&(_, c)| c);
        let message = if what.is_empty() {
            format!("{func}: {e}")
        } else {
            format!("{func}: {what}: {e}")
        };
        Self {
            code,
            name,
            message,
        }
    }

    /// A segment the Rust writer could not create (`perfabi_writer_create`,
    /// `_create_in`): options it refuses are `PERFABI_E_BAD_CONFIG` (a
    /// writer name it refuses `PERFABI_E_BAD_NAME`), anything of the
    /// system `PERFABI_E_IO`.
    #[cold]
    pub(crate) fn create(func: &str, at: &str, e: perfabi_shm::writer::CreateError) -> Self {
        use perfabi_shm::writer::CreateError;
        match e {
            CreateError::Abi(a) => {
                let name = a.code();
                let code = if name == "bad-name" {
                    PERFABI_E_BAD_NAME
                } else {
                    PERFABI_E_BAD_CONFIG
                };
                Self {
                    code,
                    name,
                    message: format!("{func}: {at}: {e}", e = CreateError::Abi(a)),
                }
            }
            CreateError::Io(io) => Self {
                code: PERFABI_E_IO,
                name: "io",
                message: format!("{func}: cannot create the segment at {at}: {io}"),
            },
        }
    }
}

impl Failure {
    /// A writer name (of a segment file in a directory) the rules of
    /// `perfabi_shm::directory::valid_name` refuse.
    #[cold]
    pub(crate) fn writer_name(func: &str, name: &str) -> Self {
        Self {
            code: PERFABI_E_BAD_NAME,
            name: "bad-name",
            message: format!(
                "{func}: name \"{}\": use 1 to {} ASCII letters, digits, '_' or '-'",
                name.escape_default(),
                perfabi_shm::directory::MAX_NAME_LEN
            ),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self {
            code: perfabi_error::of(&e),
            name: e.code(),
            message: e.to_string(),
        }
    }
}

/// `s` as a C string: a NUL inside (none of the reader's texts has one) is
/// shown as `?`.
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "?")).expect("NULs replaced")
}

struct LastError {
    code: perfabi_error,
    name: CString,
    message: CString,
}

thread_local! {
    static LAST: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// `f` of the thread's last error; `None` if no call failed on the thread,
/// or if its thread-local storage is gone (a call while the thread ends:
/// see [`Failure::record`]).
fn last<T>(f: impl FnOnce(&LastError) -> T) -> Option<T> {
    LAST.try_with(|l| l.borrow().as_ref().map(f)).ok().flatten()
}

/// Runs the body of entry point `func`: its failure, or a panic inside
/// it, becomes the thread's last error and the code returned. Inlined,
/// so that a success costs its checks only.
#[inline]
pub(crate) fn guard(
    func: &'static str,
    body: impl FnOnce() -> Result<(), Failure>,
) -> perfabi_error {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => PERFABI_OK,
        Ok(Err(f)) => f.record(),
        Err(p) => Failure::panic(func, &*p).record(),
    }
}

/// [`guard`] for a hot path (perfabi_member_add()): `body` returns the
/// code itself and builds and records every failure out of line
/// ([`failed`]), so that a success costs neither a stack frame for a
/// `Failure` nor its copies: only the body's own work.
#[inline(always)]
pub(crate) fn guard_hot(func: &'static str, body: impl FnOnce() -> perfabi_error) -> perfabi_error {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(code) => code,
        Err(p) => panicked(func, p),
    }
}

/// A panic of entry point `func`, recorded as its failure (out of line).
#[cold]
#[inline(never)]
fn panicked(func: &'static str, p: Box<dyn std::any::Any + Send>) -> perfabi_error {
    Failure::panic(func, &*p).record()
}

/// The failure `make` builds, recorded as the thread's last error, out
/// of line: the slow path of a [`guard_hot`] body.
#[cold]
#[inline(never)]
pub(crate) fn failed(make: impl FnOnce() -> Failure) -> perfabi_error {
    make().record()
}

/// [`guard`] for an entry point that returns a value: `fallback` (NULL, 0)
/// when it fails.
pub(crate) fn guard_value<T>(
    func: &'static str,
    fallback: T,
    body: impl FnOnce() -> Result<T, Failure>,
) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(f)) => {
            f.record();
            fallback
        }
        Err(p) => {
            Failure::panic(func, &*p).record();
            fallback
        }
    }
}

/// perfabi_strerror() - what an error code means, in one line.
/// @code: a `perfabi_error` (any int: an unknown one is "unknown error
/// code").
///
/// Context: any thread.
/// Return: a static, NUL-terminated string (never NULL, never freed).
#[no_mangle]
pub extern "C" fn perfabi_strerror(code: c_int) -> *const c_char {
    perfabi_error::from_raw(code)
        .unwrap_or(PERFABI_E_MAX)
        .text()
        .as_ptr()
}

/// perfabi_last_error_code() - the code of the calling thread's last
/// failed call.
///
/// Context: per thread: each thread has its own last error, set by every
/// call that fails on it and left alone by calls that succeed. While a
/// thread ends — in a pthread key's destructor, or an atexit() handler,
/// once the thread's thread-local storage was freed — it has none: calls
/// that fail there still return their code, but keep no last error.
/// Return: that code; `PERFABI_OK` if no call failed on this thread yet,
/// or while the thread ends.
#[no_mangle]
pub extern "C" fn perfabi_last_error_code() -> perfabi_error {
    last(|e| e.code).unwrap_or(PERFABI_OK)
}

/// perfabi_last_error_message() - the message of the calling thread's last
/// failed call: the Rust reader's own text, with the path and what to do
/// (`"no segment at /dev/shm/app.seg: is the exporter running?"`).
///
/// Context: per thread (see perfabi_last_error_code()).
/// Return: a NUL-terminated string owned by the library, valid on this
/// thread until its next failing call or its end; "" if no call failed on
/// it yet, or while the thread ends (a static string). Never NULL.
#[no_mangle]
pub extern "C" fn perfabi_last_error_message() -> *const c_char {
    last(|e| e.message.as_ptr()).unwrap_or(c"".as_ptr())
}

/// perfabi_last_error_code_name() - the stable code string of the calling
/// thread's last failed call: the reader's (`spec/PERFABI.md` §8, §11.6:
/// `"truncated-while-mapped"`, `"bad-magic"`...), or the C boundary's
/// (`"invalid-argument"`, `"buffer-too-small"`, `"wrong-type"`,
/// `"not-read"`, `"panic"`).
///
/// Context: per thread (see perfabi_last_error_code()).
/// Return: a NUL-terminated string owned by the library, valid as the
/// message is; "" if no call failed on this thread yet, or while the
/// thread ends (a static string). Never NULL.
#[no_mangle]
pub extern "C" fn perfabi_last_error_code_name() -> *const c_char {
    last(|e| e.name.as_ptr()).unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_in_order_and_each_has_a_text() {
        for (k, e) in ALL.iter().enumerate() {
            assert_eq!(*e as usize, k, "{e:?}");
            assert_eq!(perfabi_error::from_raw(k as c_int), Some(*e));
        }
        let texts: std::collections::HashSet<_> = ALL.iter().map(|e| e.text()).collect();
        assert_eq!(texts.len(), ALL.len(), "one text per code");
        assert_eq!(perfabi_error::from_raw(-1), None);
    }

    /// Every code of the reference reader's table (`spec/PERFABI.md`
    /// §11.6) has a C code of its own: none falls into the group of
    /// malformed segments, and no two share one.
    #[test]
    fn each_reader_code_of_the_spec_has_its_own() {
        let spec = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../spec/PERFABI.md"
        ))
        .unwrap();
        let table = spec
            .split("### 11.6")
            .nth(1)
            .and_then(|s| s.split("\n\n").nth(2))
            .expect("the table of section 11.6");
        let codes: Vec<&str> = table
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        assert_eq!(codes.len(), 16, "{table}");
        let mut seen = std::collections::HashSet::new();
        for c in codes {
            let e = perfabi_error::of_code(c);
            assert_ne!(e, PERFABI_E_MALFORMED, "{c}");
            assert!(seen.insert(e), "{c} shares {e:?}");
        }
        for (c, e) in [
            ("bad-magic", PERFABI_E_MALFORMED),
            ("bad-histogram", PERFABI_E_MALFORMED),
            ("busy-cpu", PERFABI_E_BUSY),
        ] {
            assert_eq!(perfabi_error::of_code(c), e);
        }
    }

    /// A call failing in a thread-local destructor that runs after the
    /// last error's (destructors run in the reverse order of their
    /// registration) returns its code and keeps nothing; it aborted.
    #[test]
    fn a_failure_once_the_last_error_is_destroyed_returns_its_code() {
        struct FailOnDrop(std::sync::mpsc::Sender<(perfabi_error, perfabi_error)>);
        impl Drop for FailOnDrop {
            fn drop(&mut self) {
                let code = guard("perfabi_test", || {
                    Err(Failure::invalid("perfabi_test", "late"))
                });
                let _ = self.0.send((code, perfabi_last_error_code()));
            }
        }
        thread_local! {
            static LATE: RefCell<Option<FailOnDrop>> = const { RefCell::new(None) };
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            LATE.with(|l| *l.borrow_mut() = Some(FailOnDrop(tx)));
            let early = guard("perfabi_test", || {
                Err(Failure::invalid("perfabi_test", "early"))
            });
            assert_eq!(early, perfabi_last_error_code(), "LAST is registered now");
        })
        .join()
        .unwrap();
        assert_eq!(rx.recv().unwrap(), (PERFABI_E_INVALID_ARGUMENT, PERFABI_OK));
    }

    /// A writer's refusal has the writer's code, with the core's code
    /// string kept; the same code met while reading a segment is still a
    /// malformed segment's.
    #[test]
    fn a_writers_refusal_has_its_code_and_the_same_code_read_is_malformed() {
        use perfabi::Error as E;
        for (e, c) in [
            (E::BadName, PERFABI_E_BAD_NAME),
            (E::BadHelp, PERFABI_E_BAD_NAME),
            (E::BadUnit, PERFABI_E_BAD_NAME),
            (E::BadLabelKey, PERFABI_E_BAD_NAME),
            (E::BadInstance, PERFABI_E_BAD_NAME),
            (E::BadLabels, PERFABI_E_BAD_NAME),
            (E::BadBuckets, PERFABI_E_BAD_NAME),
            (E::DuplicateName, PERFABI_E_DUPLICATE),
            (E::DuplicateInstance, PERFABI_E_DUPLICATE),
            (E::TableFull, PERFABI_E_TABLE_FULL),
            (E::NoFamilyRoom, PERFABI_E_TABLE_FULL),
            (E::WrongKind, PERFABI_E_WRONG_KIND),
        ] {
            let f = Failure::writer("perfabi_test", "family x", &e);
            assert_eq!((f.code, f.name), (c, e.code()), "{e:?}");
            assert!(
                f.message.starts_with("perfabi_test: family x: "),
                "{}",
                f.message
            );
            assert_eq!(
                perfabi_error::of_code(e.code()),
                PERFABI_E_MALFORMED,
                "{e:?}"
            );
        }
        // A code of the reader's own stays the reader's.
        let f = Failure::writer("perfabi_test", "", &E::UnknownInstance);
        assert_eq!(f.code, PERFABI_E_UNKNOWN_INSTANCE);
        assert_eq!(f.message, format!("perfabi_test: {}", E::UnknownInstance));
        let f = Failure::create(
            "perfabi_test",
            "/x",
            perfabi_shm::writer::CreateError::Abi(E::BadCpuCount(0)),
        );
        assert_eq!((f.code, f.name), (PERFABI_E_BAD_CONFIG, "bad-cpu-count"));
    }

    #[test]
    fn a_panic_is_an_error_of_the_thread_only() {
        let code = guard("perfabi_test", || panic!("boom"));
        assert_eq!(code, PERFABI_E_PANIC);
        assert_eq!(perfabi_last_error_code(), PERFABI_E_PANIC);
        // SAFETY: the library's strings are NUL-terminated and live on.
        let msg = unsafe { CStr::from_ptr(perfabi_last_error_message()) };
        assert!(msg
            .to_str()
            .unwrap()
            .contains("perfabi_test: internal error in libperfabi: boom"));
        std::thread::spawn(|| assert_eq!(perfabi_last_error_code(), PERFABI_OK))
            .join()
            .unwrap();
        assert_eq!(guard("perfabi_test", || Ok(())), PERFABI_OK);
        assert_eq!(
            perfabi_last_error_code(),
            PERFABI_E_PANIC,
            "a success leaves it"
        );
    }
}
