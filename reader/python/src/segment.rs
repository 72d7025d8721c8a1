//! `perfabi.Segment`: the reader's [`reader::Segment`] for Python.
//!
//! Every call that touches the segment runs with the GIL released
//! ([`Python::detach`]): a read may wait for a busy writer for up to
//! `busy_timeout`, and other Python threads run meanwhile. The reader's
//! segment is behind a mutex, taken only with the GIL released, so that
//! threads sharing one `Segment` take turns and none of them can hold the
//! GIL while it waits for another's read.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use perfabi_reader as reader;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::os::unix::ffi::OsStrExt;

use pyo3::exceptions::PyTypeError;
use pyo3::types::{PyBool, PyBytes, PyInt, PyString};

use crate::convert::{self, Families, SnapshotReadings};
use crate::errors;
use crate::handles::Handles;

/// The segment as the mutex guards it.
struct State {
    /// `None` once closed.
    seg: Option<reader::Segment>,
    /// Its families' handles, kept for their next reads.
    handles: Handles,
}

/// An open perfabi segment, read by the Rust reader: no lock, no system
/// call between rechecks, never a torn value.
///
/// path: the segment file (default: default_path()). trust_uid: a uid, or
/// uids, whose files are believed besides this user's and root's;
/// trust_anyone: any owner's. busy_timeout: seconds a read waits for a
/// busy writer before BusyError. require_live: a gone writer's segment
/// raises StaleError or ClosedError instead of giving its last values.
///
/// Every read releases the GIL, and threads may share a Segment. A writer
/// that restarts at the path is followed. A context manager: the segment
/// is closed (unmapped) at the end of the block.
#[pyclass(module = "perfabi", frozen)]
pub struct Segment {
    path: PathBuf,
    state: Mutex<State>,
    /// The Python objects of its families, made once per description
    /// (pruned with the handles).
    families: Families,
}

/// The path argument as the `os` module takes paths: a `str`, `bytes`
/// or an `os.PathLike` giving either (`os.fspath`); a NUL byte is a
/// `ValueError`, as in `open()`.
pub(crate) fn path_arg(path: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    let py = path.py();
    let path = py.import("os")?.getattr("fspath")?.call1((path,))?;
    let path = match path.cast::<PyBytes>() {
        Ok(b) => PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes())),
        // A str: PyO3 encodes it as the file system encoding does
        // (surrogate escapes give back the bytes `os.fsdecode` took).
        Err(_) => path.extract::<PathBuf>()?,
    };
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(PyValueError::new_err("embedded null byte in the path"));
    }
    Ok(path)
}

/// The `trust_uid` argument: a uid, or an iterable of uids; each an `int`
/// in `0..=4294967294` (`(uid_t) -1` names nobody). Anything else is a
/// `TypeError` or `ValueError` that says what was wrong.
pub(crate) fn uids_arg(arg: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    fn one(v: &Bound<'_, PyAny>) -> PyResult<u32> {
        if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "trust_uid: a uid is an int, not {}",
                v.get_type().name()?
            )));
        }
        match v.extract::<u32>() {
            Ok(u) if u != u32::MAX => Ok(u),
            _ => Err(PyValueError::new_err(format!(
                "trust_uid: {v} is not a uid (0 to 4294967294)"
            ))),
        }
    }
    if arg.is_instance_of::<PyInt>() {
        return one(arg).map(|u| vec![u]);
    }
    if arg.is_instance_of::<PyString>() || arg.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!(
            "trust_uid is a uid or a sequence of uids, not {}",
            arg.get_type().name()?
        )));
    }
    let items = arg.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "trust_uid is a uid or a sequence of uids, not {}",
            arg.get_type()
                .name()
                .map_or_else(|_| "that".into(), |n| n.to_string())
        ))
    })?;
    items.map(|v| one(&v?)).collect()
}

/// The `busy_timeout` argument, seconds: 0 or more.
pub(crate) fn busy_timeout_arg(busy_timeout: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(busy_timeout).map_err(|_| {
        PyValueError::new_err(format!(
            "busy_timeout is seconds, 0 or more: not {busy_timeout}"
        ))
    })
}

impl Segment {
    /// Runs `f` on the open segment with the GIL released; the reader's
    /// error becomes its exception, a closed `Segment` a `ValueError`. The
    /// families' Python objects are then pruned as the handles were.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut reader::Segment, &mut Handles) -> Result<T, reader::Error> + Send,
    ) -> PyResult<T> {
        let (r, live) = py.detach(|| {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let State { seg, handles } = &mut *state;
            let r = seg.as_mut().map(|seg| f(seg, handles));
            (r, handles.take_live())
        });
        if let Some(live) = live {
            self.families.keep_only(live.iter().map(String::as_str));
        }
        match r {
            Some(r) => r.map_err(|e| errors::to_py(py, e)),
            None => Err(PyValueError::new_err(format!(
                "the perfabi.Segment of {} is closed",
                self.path.display()
            ))),
        }
    }
}

#[pymethods]
impl Segment {
    /// Opens the segment at `path` (default: `default_path()`).
    #[new]
    #[pyo3(signature = (path=None, *, trust_uid=None, trust_anyone=false, busy_timeout=0.2, require_live=true))]
    fn new(
        py: Python<'_>,
        path: Option<&Bound<'_, PyAny>>,
        trust_uid: Option<&Bound<'_, PyAny>>,
        trust_anyone: bool,
        busy_timeout: f64,
        require_live: bool,
    ) -> PyResult<Self> {
        let busy_timeout = busy_timeout_arg(busy_timeout)?;
        let uids = trust_uid.map(uids_arg).transpose()?.unwrap_or_default();
        let path = path.map(path_arg).transpose()?;
        let opts = reader::Options {
            trust: reader::Trust::from_flags(trust_anyone, &uids),
            busy_timeout,
            require_live,
            ..reader::Options::default()
        };
        let path = path.unwrap_or_else(reader::default_path);
        let seg = py
            .detach(|| reader::Segment::open_with(&path, opts))
            .map_err(|e| errors::to_py(py, e))?;
        Ok(Self {
            path,
            state: Mutex::new(State {
                seg: Some(seg),
                handles: Handles::default(),
            }),
            families: Families::default(),
        })
    }

    /// The path the segment was opened at.
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        let Ok(path) = self.path.as_os_str().into_pyobject(py);
        path
    }

    /// Per-CPU blocks of the segment (per-CPU values of every read).
    #[getter]
    fn nr_cpus(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |seg, _| Ok(seg.nr_cpus()))
    }

    /// Header fields and the writer's liveness, looked at now.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let i = self.with(py, |seg, _| seg.info())?;
        convert::info(py, &i)
    }

    /// Every metric family with its live instances.
    fn families<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let fs = self.with(py, |seg, handles| {
            let fs = seg.families()?;
            handles.keep_families(&fs);
            Ok(fs)
        })?;
        self.families.families(py, &fs)
    }

    /// The family called `name`, with its live instances.
    fn family<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let f = self.with(py, |seg, handles| handles.family(seg, name))?;
        self.families.family(py, &f)
    }

    /// One family's values, every instance on every CPU, in one generation.
    fn read<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let r = self.with(py, |seg, handles| handles.read(seg, name))?;
        self.families.values(py, &r)
    }

    /// Every family's values in one consistent generation.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.with(py, |seg, handles| {
            let s = seg.snapshot()?;
            handles.keep_families(&s.families);
            Ok(SnapshotReadings::of(s))
        })?;
        self.families.snapshot(py, &s)
    }

    /// One flat (ABI 1.0) counter by name: its per-CPU values and total.
    fn counter<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let c = self.with(py, |seg, _| seg.counter(name))?;
        convert::counter(py, &c)
    }

    /// The latest complete DAMON aggregation of every (monitor, target).
    fn damon<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (d, dropped) = self.with(py, |seg, _| Ok((seg.damon()?, seg.damon_dropped())))?;
        convert::damon(py, &d, dropped)
    }

    /// What this Segment's reads ran into so far.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.with(py, |seg, _| Ok(seg.stats()))?;
        convert::stats(py, &s)
    }

    /// Unmaps the segment and forgets its families; later calls raise
    /// ValueError. Closing twice is allowed.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let closed = (state.seg.take(), std::mem::take(&mut state.handles));
            drop(state);
            // Unmapped once the mutex is released.
            drop(closed);
        });
        self.families.clear();
    }

    /// For the tests: how many family handles and `perfabi.Family` objects
    /// the Segment keeps (not in the stubs).
    fn _cache_sizes(&self, py: Python<'_>) -> (usize, usize) {
        let handles = py.detach(|| {
            let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.handles.len()
        });
        (handles, self.families.len())
    }

    /// `with Segment(...) as seg:` closes it at the end of the block. A
    /// closed `Segment` is a `ValueError`, as a closed file is.
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().with(slf.py(), |_, _| Ok(()))?;
        Ok(slf)
    }

    /// Closes the segment (exceptions of the block go on).
    #[pyo3(signature = (exc_type, exc, tb))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        exc: Option<Bound<'_, PyAny>>,
        tb: Option<Bound<'_, PyAny>>,
    ) {
        let _ = (exc_type, exc, tb);
        self.close(py);
    }

    /// `perfabi.Segment('/path')`.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("perfabi.Segment({})", self.path(py).repr()?))
    }
}
