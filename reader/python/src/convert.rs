//! The reader's values as the plain Python objects of `perfabi._types`
//! (frozen dataclasses). What can be worked out without the GIL is: a
//! read's totals and per-CPU values are computed into [`FamilyReadings`]
//! while it is released, and only the Python objects are made with it.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use perfabi::damon::DamonRead;
use perfabi::unit::{QUANTITY_PAGES, QUANTITY_PLAIN, QUANTITY_RATIO};
use perfabi::{Family, Kind, Member, Reading, Snapshot, Unit, ValueType};
use perfabi_reader::directory::{MergedFamily, Problem, Scrape};
use perfabi_reader::{
    Counter, FamilyHandle, FamilyValues, Liveness, Origin, ReadStats, SegmentInfo,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

/// `perfabi._types.NAME(field=value, ...)`.
macro_rules! make {
    ($py:expr, $class:literal { $($field:ident: $value:expr),* $(,)? }) => {{
        let kwargs = PyDict::new($py);
        $(kwargs.set_item(pyo3::intern!($py, stringify!($field)), $value)?;)*
        class($py, pyo3::intern!($py, $class))?.call((), Some(&kwargs))
    }};
}

/// The class `name` of `perfabi._types`.
fn class<'py>(py: Python<'py>, name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    static TYPES: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = TYPES.get_or_try_init(py, || py.import("perfabi._types").map(Bound::unbind))?;
    module.bind(py).getattr(name)
}

/// One family's values as one consistent read gave them, worked out
/// without the GIL: each instance's total and its value on each CPU.
pub(crate) struct FamilyReadings {
    family: Family,
    generation: u64,
    /// (total, per CPU) of each member, in `family.members` order.
    members: Vec<(Reading, Vec<Reading>)>,
}

impl FamilyReadings {
    /// What [`perfabi_reader::Segment::read_family`] read into `v` with `h`.
    pub(crate) fn of_handle(h: &FamilyHandle, v: &FamilyValues) -> Self {
        let f = h.family();
        let members = (0..f.members.len())
            .map(|k| {
                let per_cpu = (0..v.nr_cpus()).map(|c| v.reading_on(f, k, c));
                (v.reading(f, k), per_cpu.collect())
            })
            .collect();
        Self {
            family: f.clone(),
            generation: v.generation(),
            members,
        }
    }
}

impl FamilyReadings {
    /// A family merged over a directory's segments: each series' merged
    /// value as its total, no per-CPU values (they are several files'),
    /// generation 0 (no one segment's).
    pub(crate) fn of_merged(m: MergedFamily) -> Self {
        Self {
            members: m.readings.into_iter().map(|r| (r, Vec::new())).collect(),
            family: m.family,
            generation: 0,
        }
    }
}

/// A directory's read, worked out without the GIL: its merged families
/// with their readings, the problems met, the segments merged.
pub(crate) struct DirectoryReadings {
    families: Vec<FamilyReadings>,
    problems: Vec<Problem>,
    segments: usize,
}

impl DirectoryReadings {
    pub(crate) fn of(s: Scrape) -> Self {
        Self {
            families: s
                .families
                .into_iter()
                .map(FamilyReadings::of_merged)
                .collect(),
            problems: s.problems,
            segments: s.segments,
        }
    }
}

/// A snapshot's families with their readings, worked out without the GIL.
pub(crate) struct SnapshotReadings {
    generation: u64,
    epoch: u64,
    nr_cpus: usize,
    families: Vec<FamilyReadings>,
}

impl SnapshotReadings {
    pub(crate) fn of(mut s: Snapshot) -> Self {
        let families = std::mem::take(&mut s.families);
        let per_member = |f: &Family, m: &Member| {
            let per_cpu = (0..s.nr_cpus).map(|c| s.reading_on(c, f, m));
            (s.reading(f, m), per_cpu.collect())
        };
        let families = families
            .into_iter()
            .map(|f| FamilyReadings {
                members: f.members.iter().map(|m| per_member(&f, m)).collect(),
                family: f,
                generation: s.generation,
            })
            .collect();
        Self {
            generation: s.generation,
            epoch: s.epoch,
            nr_cpus: s.nr_cpus,
            families,
        }
    }
}

pub(crate) fn unit<'py>(py: Python<'py>, u: &Unit) -> PyResult<Bound<'py, PyAny>> {
    let quantity = match u.quantity {
        QUANTITY_PLAIN => "plain",
        QUANTITY_PAGES => "pages",
        QUANTITY_RATIO => "ratio",
        // Decoded families' units are checked (spec §5.2).
        _ => "unknown",
    };
    let (base, factor) = u.base();
    make!(py, "Unit" {
        text: u.to_string(),
        dim_space: u.dim_space,
        dim_time: u.dim_time,
        dim_count: u.dim_count,
        scale_space: u.scale_space,
        scale_time: u.scale_time,
        scale_count: u.scale_count,
        quantity: quantity,
        base: base,
        factor: factor,
    })
}

fn instance<'py>(py: Python<'py>, m: &Member) -> PyResult<Bound<'py, PyAny>> {
    let labels = PyDict::new(py);
    for (k, v) in &m.labels {
        labels.set_item(k, v)?;
    }
    make!(py, "Instance" { name: &m.instance, id: m.instance_id, labels: labels })
}

/// `perfabi.Family` and its instances (to be shared by the values that
/// name them).
fn make_family<'py>(
    py: Python<'py>,
    f: &Family,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    let instances = f
        .members
        .iter()
        .map(|m| instance(py, m))
        .collect::<PyResult<Vec<_>>>()?;
    let instances = PyTuple::new(py, instances)?;
    let buckets = match &f.buckets {
        Some(b) => PyTuple::new(py, (0..b.count()).map(|k| b.bound(k)))?.into_any(),
        None => py.None().into_bound(py),
    };
    let family = make!(py, "Family" {
        name: &f.name,
        help: &f.help,
        kind: f.kind.as_str(),
        unit: unit(py, &f.unit)?,
        unit_text: &f.unit_text,
        dimension: &f.dimension,
        value_type: f.value_type.as_str(),
        buckets: buckets,
        instances: &instances,
        gauge_mode: (f.kind == Kind::Gauge).then(|| f.gauge_mode.as_str()),
    })?;
    Ok((family, instances))
}

/// A `perfabi.Family` made, with its instances and what it was made of.
struct Made {
    from: Family,
    family: Py<PyAny>,
    instances: Py<PyTuple>,
}

/// The `perfabi.Family` objects a `Segment` made so far, by name: a family
/// whose description did not change is not made again, nor its instances,
/// so that a read makes only its values' objects. (They are immutable,
/// their labels a read-only `perfabi._types.Labels`, so sharing them is
/// safe.) Only live families' are kept: `families()` and `snapshot()`
/// prune them, and so does the `Segment` when it prunes its family handles
/// (see `handles.rs`).
///
/// The mutex is taken with the GIL held, and never held while Python code
/// runs: that code may let another thread take the GIL, which may want the
/// mutex too.
#[derive(Default)]
pub(crate) struct Families(Mutex<HashMap<String, Made>>);

impl Families {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Made>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `perfabi.Family` of `f` and its instances: as made before if `f` is
    /// unchanged since, else made now.
    fn get<'py>(
        &self,
        py: Python<'py>,
        f: &Family,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let known = self
            .map()
            .get(&f.name)
            .filter(|m| m.from == *f)
            .map(|m| (m.family.clone_ref(py), m.instances.clone_ref(py)));
        if let Some((family, instances)) = known {
            return Ok((family.into_bound(py), instances.into_bound(py)));
        }
        let (family, instances) = make_family(py, f)?;
        let made = Made {
            from: f.clone(),
            family: family.clone().unbind(),
            instances: instances.clone().unbind(),
        };
        let replaced = self.map().insert(f.name.clone(), made);
        // Released once the mutex is.
        drop(replaced);
        Ok((family, instances))
    }

    /// Forgets the families not named in `live`, the names of every live
    /// family of the segment.
    pub(crate) fn keep_only<'a>(&self, live: impl IntoIterator<Item = &'a str>) {
        let live: HashSet<&str> = live.into_iter().collect();
        let gone: Vec<Made> = {
            let mut map = self.map();
            let names: Vec<String> = map
                .keys()
                .filter(|n| !live.contains(n.as_str()))
                .cloned()
                .collect();
            names.iter().filter_map(|n| map.remove(n)).collect()
        };
        // Released once the mutex is.
        drop(gone);
    }

    /// How many families are kept.
    pub(crate) fn len(&self) -> usize {
        self.map().len()
    }

    /// Forgets every family (the segment was closed).
    pub(crate) fn clear(&self) {
        let gone = std::mem::take(&mut *self.map());
        // Released once the mutex is.
        drop(gone);
    }

    pub(crate) fn family<'py>(&self, py: Python<'py>, f: &Family) -> PyResult<Bound<'py, PyAny>> {
        self.get(py, f).map(|(family, _)| family)
    }

    /// Every family of the segment.
    pub(crate) fn families<'py>(
        &self,
        py: Python<'py>,
        fs: &[Family],
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.keep_only(fs.iter().map(|f| f.name.as_str()));
        fs.iter().map(|f| self.family(py, f)).collect()
    }

    pub(crate) fn values<'py>(
        &self,
        py: Python<'py>,
        r: &FamilyReadings,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (family, instances) = self.get(py, &r.family)?;
        let values = r
            .members
            .iter()
            .zip(instances.iter())
            .map(|((total, per_cpu), instance)| {
                let per_cpu = per_cpu.iter().map(|v| reading(py, v));
                make!(py, "InstanceValues" {
                    instance: instance,
                    total: reading(py, total)?,
                    per_cpu: PyTuple::new(py, per_cpu.collect::<PyResult<Vec<_>>>()?)?,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        make!(py, "FamilyValues" {
            family: family,
            generation: r.generation,
            values: PyTuple::new(py, values)?,
        })
    }

    pub(crate) fn snapshot<'py>(
        &self,
        py: Python<'py>,
        s: &SnapshotReadings,
    ) -> PyResult<Bound<'py, PyAny>> {
        let families = s
            .families
            .iter()
            .map(|f| self.values(py, f))
            .collect::<PyResult<Vec<_>>>()?;
        self.keep_only(s.families.iter().map(|r| r.family.name.as_str()));
        make!(py, "Snapshot" {
            generation: s.generation,
            epoch: s.epoch,
            nr_cpus: s.nr_cpus,
            families: PyTuple::new(py, families)?,
        })
    }
}

impl Families {
    /// `perfabi.DirectoryRead` of a directory's read.
    pub(crate) fn directory_read<'py>(
        &self,
        py: Python<'py>,
        d: &DirectoryReadings,
    ) -> PyResult<Bound<'py, PyAny>> {
        let families = d
            .families
            .iter()
            .map(|f| self.values(py, f))
            .collect::<PyResult<Vec<_>>>()?;
        self.keep_only(d.families.iter().map(|r| r.family.name.as_str()));
        let problems = d
            .problems
            .iter()
            .map(|p| {
                make!(py, "Problem" {
                    file: p.file.as_os_str(),
                    family: p.family.as_deref(),
                    code: p.code,
                    message: &p.message,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        make!(py, "DirectoryRead" {
            families: PyTuple::new(py, families)?,
            problems: PyTuple::new(py, problems)?,
            segments: d.segments,
        })
    }
}

fn reading<'py>(py: Python<'py>, r: &Reading) -> PyResult<Bound<'py, PyAny>> {
    match r {
        Reading::Unsigned(v) => v.into_bound_py_any(py),
        Reading::Signed(v) => v.into_bound_py_any(py),
        Reading::Histogram(h) => make!(py, "Histogram" {
            count: h.count,
            sum: h.sum,
            buckets: PyTuple::new(py, &h.buckets)?,
        }),
    }
}

pub(crate) fn counter<'py>(py: Python<'py>, c: &Counter) -> PyResult<Bound<'py, PyAny>> {
    let i = &c.instance;
    // The reader sums a counter's words as u64; an i64 counter reads as its
    // two's complement, as a family's Reading::Signed does.
    let value = |v: u64| match i.value_type {
        ValueType::U64 => v.into_bound_py_any(py),
        ValueType::I64 => (v as i64).into_bound_py_any(py),
    };
    let per_cpu = c.per_cpu.iter().map(|&v| value(v));
    make!(py, "Counter" {
        name: &i.name,
        unit: &i.unit,
        semantics: i.semantics.as_str(),
        value_type: i.value_type.as_str(),
        total: value(c.total)?,
        per_cpu: PyTuple::new(py, per_cpu.collect::<PyResult<Vec<_>>>()?)?,
        generation: c.generation,
    })
}

pub(crate) fn info<'py>(py: Python<'py>, i: &SegmentInfo) -> PyResult<Bound<'py, PyAny>> {
    let h = &i.header;
    let (liveness, silent_for) = match i.liveness {
        Liveness::Alive => ("alive", None),
        Liveness::Kernel => ("kernel", None),
        Liveness::Closed => ("closed", None),
        Liveness::Silent { silent_for } => ("silent", Some(silent_for.as_secs_f64())),
        Liveness::Dead { silent_for } => ("dead", Some(silent_for.as_secs_f64())),
    };
    let origin = match i.origin {
        Origin::File => "file",
        Origin::KernelDevice => "kernel-device",
        Origin::KernelMap => "kernel-map",
    };
    make!(py, "Info" {
        abi_major: h.abi_major,
        abi_minor: h.abi_minor,
        epoch: h.epoch,
        generation: h.generation,
        metadata_busy: h.metadata_busy,
        writer_pid: h.writer_pid,
        writer_start_ns: h.writer_start_ns,
        heartbeat_ns: h.heartbeat_ns,
        heartbeat_interval_ns: h.heartbeat_interval_ns,
        flags: h.flags,
        nr_cpus: h.nr_cpus,
        max_instances: h.max_instances,
        damon_capacity: h.damon_capacity,
        segment_size: h.segment_size,
        liveness: liveness,
        silent_for: silent_for,
        path: i.path.as_ref().map(|p| p.as_os_str()),
        mapped: i.mapped,
        owner: i.owner,
        origin: origin,
    })
}

pub(crate) fn damon<'py>(
    py: Python<'py>,
    d: &DamonRead,
    dropped: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let aggregations = d
        .aggregations
        .iter()
        .map(|a| {
            let regions = a
                .regions
                .iter()
                .map(|r| {
                    make!(py, "Region" {
                        start: r.start,
                        end: r.end,
                        nr_accesses: r.nr_accesses,
                        age: r.age,
                        frequency: a.frequency(r),
                    })
                })
                .collect::<PyResult<Vec<_>>>()?;
            make!(py, "Aggregation" {
                monitor_id: a.monitor_id,
                target_id: a.target_id,
                aggregation: a.aggregation,
                sample_us: a.intervals.sample_us,
                aggr_us: a.intervals.aggr_us,
                regions: PyTuple::new(py, regions)?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    make!(py, "Damon" {
        aggregations: PyTuple::new(py, aggregations)?,
        busy_cpus: PyTuple::new(py, &d.busy_cpus)?,
        dropped: dropped,
    })
}

pub(crate) fn stats<'py>(py: Python<'py>, s: &ReadStats) -> PyResult<Bound<'py, PyAny>> {
    make!(py, "Stats" {
        busy: s.busy,
        stale: s.stale,
        remaps: s.remaps,
        truncations: s.truncations,
    })
}
