//! The reader's errors as the exceptions of `perfabi._errors`: one class
//! per kind of failure, each carrying the reader's message (its `Display`,
//! which says what to do), its stable code (`spec/PERFABI.md` §11.6) and
//! whether a retry may clear it.

use perfabi_reader::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};

/// The class of `perfabi._errors` that stands for `e` (the package's
/// README and `_errors.py` document the hierarchy).
fn class_name(e: &Error) -> &'static str {
    match e {
        Error::NotFound(_) => "NotFoundError",
        Error::Io(..) => "IoError",
        Error::Symlink(_) | Error::ForeignLink { .. } => "SymlinkError",
        Error::Writable(..) | Error::WritablePin(..) | Error::Untrusted { .. } => "UntrustedError",
        Error::Raced(_) => "RacedError",
        Error::NotASegmentFile(..) | Error::Sparse { .. } | Error::TooLarge { .. } => {
            "NotASegmentError"
        }
        // A handle refused by the read that followed its look-up in the
        // same call (one kept from an earlier call is looked up again):
        // what it named was deleted, or the segment created again, in
        // between. Not a malformed segment.
        Error::Abi(perfabi::Error::UnknownInstance) => "UnknownInstanceError",
        Error::Abi(_) => "AbiError",
        Error::Busy(_) => "BusyError",
        Error::Stale { .. } => "StaleError",
        Error::Closed => "ClosedError",
        Error::Truncated(_) => "TruncatedError",
        Error::HeaderChanged(_) => "HeaderChangedError",
        Error::NoSuchCounter(_) => "NoSuchCounterError",
        Error::NoSuchFamily(_) => "NoSuchFamilyError",
        // A kind of failure added to the reader later: the base class,
        // with its own code.
        _ => "Error",
    }
}

/// The exception for the reader's error `e`. Should the exception itself
/// fail to be made (`perfabi._errors` not importable), that failure is
/// what is raised.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    exception(py, &e).unwrap_or_else(|failed| failed)
}

fn exception(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = ERRORS.get_or_try_init(py, || py.import("perfabi._errors").map(Bound::unbind))?;
    let class = module.bind(py).getattr(class_name(e))?;
    let extra = PyDict::new(py);
    match e {
        Error::Stale {
            pid,
            silent_for,
            dead,
        } => {
            extra.set_item("pid", pid)?;
            extra.set_item("silent_for", silent_for.as_secs_f64())?;
            extra.set_item("dead", dead)?;
        }
        Error::Io(_, io) => extra.set_item("errno", io.raw_os_error())?,
        _ => {}
    }
    let (message, transient) = match e {
        // The reader's "bad segment: no live instance with this id" is about
        // an id Python never sees; reading again looks the name up afresh.
        Error::Abi(perfabi::Error::UnknownInstance) => (
            "what was being read was deleted, or its segment created again, \
             during the read: read it again"
                .to_string(),
            true,
        ),
        _ => (e.to_string(), e.is_transient()),
    };
    let value = class.call((message, e.code(), transient), Some(&extra))?;
    Ok(PyErr::from_value(value))
}
