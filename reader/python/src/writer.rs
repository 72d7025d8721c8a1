//! `perfabi._perfabi.Writer`, `WriterFamily`, `WriterMember`: the Rust
//! writer (`perfabi_shm::writer`) for Python, wrapped, never reimplemented.
//! `perfabi.client` builds prometheus_client's classes on them.
//!
//! Every update is one call into the Rust writer with the GIL held: an
//! update is a few tens of nanoseconds, less than releasing and taking the
//! GIL back would cost, and the writer is `Sync`, so Python threads calling
//! at once are as safe as Rust threads.

use std::path::PathBuf;
use std::sync::Arc;

use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Unit, ValueType};
use perfabi_shm::writer::{self as w, Config, CreateError, FamilyId, MemberId};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// The exception `perfabi.WriterError` for a refusal of the writer: its
/// message, and the stable code of `spec/PERFABI.md` (`duplicate-name`,
/// `table-full`, …) or `io`.
/// Called with the GIL held (`attach` then only takes a token).
fn writer_error(message: String, code: &str) -> PyErr {
    Python::attach(|py| {
        static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
        let made = ERRORS
            .get_or_try_init(py, || py.import("perfabi._errors").map(Bound::unbind))
            .and_then(|m| m.bind(py).getattr("WriterError"))
            .and_then(|class| class.call1((message, code, false)));
        match made {
            Ok(value) => PyErr::from_value(value),
            Err(failed) => failed,
        }
    })
}

fn abi(e: perfabi::Error) -> PyErr {
    writer_error(e.to_string(), e.code())
}

fn create(e: CreateError) -> PyErr {
    match e {
        CreateError::Abi(e) => abi(e),
        CreateError::Io(e) => writer_error(e.to_string(), "io"),
    }
}

/// A segment this process writes: its families are added with
/// [`add_family`](Self::add_family).
#[pyclass(module = "perfabi._perfabi", frozen)]
pub struct Writer {
    w: Arc<w::Writer>,
}

#[pymethods]
impl Writer {
    /// Creates a segment of the writer `name` in the directory `dir`
    /// (created if absent; refused if another user could replace its
    /// files), under a file name new at each creation:
    /// `<name>.<pid>.<nonce>.perfabi`.
    #[staticmethod]
    #[pyo3(signature = (dir, name, max_families = 128, max_members = 1024, max_values = 8192))]
    fn create_in(
        py: Python<'_>,
        dir: PathBuf,
        name: &str,
        max_families: u32,
        max_members: u32,
        max_values: u32,
    ) -> PyResult<Self> {
        let config = Config {
            max_families,
            max_members,
            max_instances: max_values,
            ..Config::default()
        };
        let made = py.detach(|| w::Writer::create_in(&dir, name, &config));
        Ok(Self {
            w: Arc::new(made.map_err(create)?),
        })
    }

    /// The segment file's path.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.w.path().map(PathBuf::from)
    }

    /// Registers a family: `kind` is `"counter"`, `"histogram"`, or
    /// `"gauge"` with how a directory's readers merge it across writers
    /// (`spec/PERFABI.md` §15): `"gauge:sum"` (as `"gauge"`),
    /// `"gauge:max"`, `"gauge:min"` or `"gauge:all"`; `unit` `""`,
    /// `"bytes"` or `"ns"`; a gauge's values are signed; a histogram's
    /// `bounds` are its finite upper bounds, strictly increasing (`+Inf`
    /// follows them).
    #[pyo3(signature = (name, help, dimension, kind, unit, bounds = None))]
    fn add_family(
        &self,
        name: &str,
        help: &str,
        dimension: &str,
        kind: &str,
        unit: &str,
        bounds: Option<Vec<u64>>,
    ) -> PyResult<WriterFamily> {
        let unit = match unit {
            "" => Unit::NONE,
            "bytes" => Unit::BYTES,
            "ns" => Unit::NS,
            other => return Err(writer_error(format!("unknown unit {other:?}"), "bad-unit")),
        };
        let spec = match (kind, bounds) {
            ("counter", None) => FamilySpec::new(name, help, dimension, Kind::Counter, unit),
            (gauge, None) if gauge.starts_with("gauge") => {
                let mode = match gauge {
                    "gauge" | "gauge:sum" => GaugeMode::Sum,
                    "gauge:max" => GaugeMode::Max,
                    "gauge:min" => GaugeMode::Min,
                    "gauge:all" => GaugeMode::All,
                    other => {
                        return Err(writer_error(
                            format!("unknown kind {other:?}"),
                            "bad-family",
                        ))
                    }
                };
                FamilySpec {
                    value_type: ValueType::I64,
                    ..FamilySpec::gauge(name, help, dimension, unit, mode)
                }
            }
            ("histogram", Some(b)) => {
                FamilySpec::histogram(name, help, dimension, unit, Buckets::Explicit(b))
            }
            _ => {
                return Err(writer_error(
                    format!("a {kind} family cannot be made with these buckets"),
                    "bad-family",
                ))
            }
        };
        let id = self.w.add_family(&spec).map_err(abi)?;
        Ok(WriterFamily {
            w: Arc::clone(&self.w),
            id,
        })
    }

    /// Forgets this writer without closing its segment: for a child of
    /// `fork()`, whose copy of the parent's writer must neither write nor
    /// mark the parent's segment closed. The copy is never dropped; the
    /// child lets go of its share of the segment's liveness lock, so the
    /// parent's death is seen when the parent dies (spec §10).
    fn abandon(&self) {
        self.w.abandon_in_fork_child();
        std::mem::forget(Arc::clone(&self.w));
    }
}

/// A family of a [`Writer`]: its members are added with
/// [`add_member`](Self::add_member).
#[pyclass(module = "perfabi._perfabi", frozen)]
pub struct WriterFamily {
    w: Arc<w::Writer>,
    id: FamilyId,
}

#[pymethods]
impl WriterFamily {
    /// Adds the member `instance` (empty in a family without dimension)
    /// with up to four extra `(key, value)` labels.
    #[pyo3(signature = (instance, labels = Vec::new()))]
    fn add_member(&self, instance: &str, labels: Vec<(String, String)>) -> PyResult<WriterMember> {
        let pairs: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let id = self.w.add_member(self.id, instance, &pairs).map_err(abi)?;
        Ok(WriterMember {
            w: Arc::clone(&self.w),
            id,
        })
    }
}

/// A member of a [`WriterFamily`]: the handle every update goes through.
#[pyclass(module = "perfabi._perfabi", frozen)]
pub struct WriterMember {
    w: Arc<w::Writer>,
    id: MemberId,
}

#[pymethods]
impl WriterMember {
    /// Adds `delta` (wrapping) to a counter or gauge.
    fn add(&self, delta: i64) -> PyResult<()> {
        self.w.member_add(&self.id, delta).map_err(abi)
    }

    /// Sets a gauge's value.
    fn set(&self, value: i64) -> PyResult<()> {
        self.w.member_set(&self.id, value).map_err(abi)
    }

    /// Records one observation in a histogram.
    fn observe(&self, value: u64) -> PyResult<()> {
        self.w.observe(&self.id, value).map_err(abi)
    }
}

/// The directory writers use when the program names none: `$PERFABI_DIR`,
/// else `/dev/shm/perfabi-<euid>`.
#[pyfunction]
pub fn default_dir() -> PathBuf {
    perfabi_shm::directory::default_dir()
}

/// The program's name as a writer name: the executable's file name,
/// made of the letters a writer name may hold.
#[pyfunction]
pub fn program_name() -> String {
    perfabi_shm::directory::program_name()
}

/// `name` made a writer name: letters, digits, `_` and `-` kept, other
/// characters `_`, at most 64 bytes (`"perfabi"` if nothing is left).
#[pyfunction]
pub fn sanitize_name(name: &str) -> String {
    perfabi_shm::directory::sanitize_name(name)
}

/// The family dimension, member instance and member labels of a series
/// whose `(key, value)` labels are `labels`, in their order: the writer's
/// one rule (`spec/PERFABI.md` §9.2, `perfabi_shm::writer::series_member`):
/// none, no dimension; one, its key; two to four, `series`, the values
/// escaped (`%XX`) and joined by `,` (hashed if longer than an instance
/// holds), each label a member label. More than four, or a key twice:
/// `bad-labels`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn series_member(
    labels: Vec<(String, String)>,
) -> PyResult<(String, String, Vec<(String, String)>)> {
    let m = perfabi_shm::writer::series_member(&labels).map_err(abi)?;
    Ok((
        m.dimension.to_string(),
        m.instance,
        m.labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    ))
}
