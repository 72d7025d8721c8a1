//! `perfabi.Directory`: the reader library's segment directory
//! ([`reader::directory::Directory`], `spec/PERFABI.md` §15) for Python.
//! Nothing is merged here: the families and values are the library's,
//! made into the same `perfabi._types` objects as a segment's snapshot.
//!
//! As with `perfabi.Segment`, a read runs with the GIL released, behind a
//! mutex taken only while it is released.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use perfabi_reader as reader;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::{DirectoryReadings, Families};
use crate::errors;
use crate::segment::{busy_timeout_arg, path_arg, uids_arg};

/// A directory of segments (one per writer process), read as one: each
/// read lists it, opens new segment files and merges every segment's
/// families (counters and histograms summed over every writer, live or
/// dead; gauges over live writers by their family's mode; peaks the
/// largest).
///
/// path: the directory (default: default_dir(), where perfabi.client's
/// processes write). writer_label: a label key that keeps each writer's
/// series apart (its value the writer's `<name>.<pid>`) instead of merging
/// them. trust_uid, trust_anyone: whose files to believe besides this
/// user's and root's. busy_timeout: seconds a read waits for a busy writer
/// or a fold. max_segments: most segment files one read reads.
///
/// A file refused or unreadable, a family whose metadata differ between
/// files, a limit reached: each is one of the read's `problems`, never an
/// exception; only a directory refused as a whole raises. A context
/// manager: the segments are unmapped at the end of the block.
#[pyclass(module = "perfabi", frozen)]
pub struct Directory {
    path: PathBuf,
    /// `None` once closed.
    dir: Mutex<Option<reader::directory::Directory>>,
    /// The Python objects of its families, made once per description.
    families: Families,
}

// The signature's default (a literal, for Python's introspection).
const _: () = assert!(reader::directory::DEFAULT_MAX_SEGMENTS == 10_000);

impl Directory {
    /// The error of a use after `close()`, as a closed file's.
    fn closed(&self) -> PyErr {
        PyValueError::new_err(format!(
            "the perfabi.Directory of {} is closed",
            self.path.display()
        ))
    }
}

#[pymethods]
impl Directory {
    /// Opens the directory at `path` (default: `default_dir()`).
    #[new]
    #[pyo3(signature = (path=None, *, writer_label=None, trust_uid=None, trust_anyone=false, busy_timeout=0.2, max_segments=10_000))]
    fn new(
        py: Python<'_>,
        path: Option<&Bound<'_, PyAny>>,
        writer_label: Option<String>,
        trust_uid: Option<&Bound<'_, PyAny>>,
        trust_anyone: bool,
        busy_timeout: f64,
        max_segments: usize,
    ) -> PyResult<Self> {
        let busy_timeout = busy_timeout_arg(busy_timeout)?;
        if writer_label.as_deref() == Some("") {
            return Err(PyValueError::new_err(
                "writer_label is a label key, not empty (None for none)",
            ));
        }
        let uids = trust_uid.map(uids_arg).transpose()?.unwrap_or_default();
        let path = path
            .map(path_arg)
            .transpose()?
            .unwrap_or_else(reader::directory::default_dir);
        let opts = reader::directory::DirectoryOptions {
            segment: reader::Options {
                trust: reader::Trust::from_flags(trust_anyone, &uids),
                busy_timeout,
                ..reader::Options::default()
            },
            writer_label,
            max_segments,
        };
        let dir = py
            .detach(|| reader::directory::Directory::open(&path, opts))
            .map_err(|e| errors::to_py(py, e))?;
        Ok(Self {
            path,
            dir: Mutex::new(Some(dir)),
            families: Families::default(),
        })
    }

    /// The directory's path.
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        let Ok(path) = self.path.as_os_str().into_pyobject(py);
        path
    }

    /// Every family merged over the directory's segments, with the
    /// problems met and the number of segments merged.
    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| {
            let mut dir = self.dir.lock().unwrap_or_else(PoisonError::into_inner);
            dir.as_mut().map(|d| d.read().map(DirectoryReadings::of))
        });
        match r {
            Some(Ok(r)) => self.families.directory_read(py, &r),
            Some(Err(e)) => Err(errors::to_py(py, e)),
            None => Err(self.closed()),
        }
    }

    /// Unmaps its segments; later reads raise ValueError. Closing twice is
    /// allowed.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let closed = self
                .dir
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            // Unmapped once the mutex is released.
            drop(closed);
        });
        self.families.clear();
    }

    /// `with Directory(...) as d:` closes it at the end of the block.
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let this = slf.get();
        let open = slf.py().detach(|| {
            let dir = this.dir.lock().unwrap_or_else(PoisonError::into_inner);
            dir.is_some()
        });
        if !open {
            return Err(this.closed());
        }
        Ok(slf)
    }

    /// Closes it (exceptions of the block go on).
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

    /// `perfabi.Directory('/path')`.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("perfabi.Directory({})", self.path(py).repr()?))
    }
}
