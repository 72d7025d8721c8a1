//! `perfabi._perfabi`, the native half of the `perfabi` Python module: the
//! Rust reader (`perfabi-reader`) for Python, through PyO3.
//!
//! Nothing of the protocol is here: every read is the reader's, made with
//! the GIL released (a read waits up to `busy_timeout` for a busy writer,
//! and other Python threads run meanwhile). This crate only turns the
//! reader's values into the plain Python objects of `perfabi._types` and
//! its errors into the exceptions of `perfabi._errors`; both are pure
//! Python, in `python/perfabi/`, with the package's type stubs.
//!
//! Built by maturin (`pip install reader/python`), which turns on PyO3's
//! `extension-module`; inside the workspace the crate builds as an
//! ordinary Rust library, linked to no libpython.

mod convert;
mod directory;
mod errors;
mod handles;
mod segment;
mod writer;

use pyo3::prelude::*;

/// The segment path `perfabi.Segment()` opens when given none:
/// `$PERFABI_SEGMENT` if set, else `/dev/perfabi` if the kernel module is
/// loaded, else `/sys/fs/bpf/perfabi/kernel` if the eBPF writer pinned its
/// segment there, else `/dev/shm/perfabi.seg` (where `perfabi-exportd`
/// writes).
#[pyfunction]
fn default_path() -> std::ffi::OsString {
    perfabi_reader::default_path().into_os_string()
}

/// The native module: `Segment`, `Directory` and `default_path`, and the writer's
/// classes (`Writer`, `WriterFamily`, `WriterMember`) that `perfabi.client`
/// builds on; `perfabi/__init__.py`
/// re-exports them with the Python types and errors.
#[pymodule]
fn _perfabi(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<segment::Segment>()?;
    m.add_class::<directory::Directory>()?;
    m.add_class::<writer::Writer>()?;
    m.add_class::<writer::WriterFamily>()?;
    m.add_class::<writer::WriterMember>()?;
    m.add_function(wrap_pyfunction!(writer::default_dir, m)?)?;
    m.add_function(wrap_pyfunction!(writer::program_name, m)?)?;
    m.add_function(wrap_pyfunction!(writer::sanitize_name, m)?)?;
    m.add_function(wrap_pyfunction!(default_path, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
