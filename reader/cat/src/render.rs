//! Rendering a snapshot: a table for people, and JSON (streamed).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use perfabi::family::Origin;
use perfabi_reader::directory::Scrape;
use perfabi_reader::view::{self, Families};
use perfabi_reader::{
    Aggregation, Buckets, DamonRead, Family, Instance, Member, Reading, SegmentInfo, Snapshot,
    ValueType,
};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::human::{self, shown};
use crate::json::{Map, Seq};

/// The table: one group of rows per family, one row per instance, values
/// in human units (bytes with IEC prefixes, times in ns/µs/ms/s); per-CPU
/// columns with `per_cpu`. A histogram shows its observations, and its sum,
/// mean and the buckets of p50 and p99 in the last column, with the
/// instance's labels.
pub fn table(s: &Families<'_>, per_cpu: bool) -> String {
    let nr_cpus = if per_cpu { s.nr_cpus() } else { 0 };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["FAMILY", "INSTANCE", "KIND", "VALUE"];
    let cpus: Vec<String> = (0..nr_cpus).map(|c| format!("cpu{c}")).collect();
    head.extend(cpus.iter().map(String::as_str));
    head.push("DETAILS");
    rows.push(head.iter().map(|h| h.to_string()).collect());
    for view in s.iter() {
        let f = view.family;
        let shape = human::Shape::of(f);
        if f.members.is_empty() {
            let mut row = vec![
                shown(&f.name),
                "-".into(),
                f.kind.as_str().into(),
                "-".into(),
            ];
            row.extend((0..nr_cpus).map(|_| String::new()));
            row.push("(no instances)".into());
            rows.push(row);
        }
        for (k, m) in f.members.iter().enumerate() {
            let Some(total) = view.reading(k) else {
                continue;
            };
            let mut row = vec![
                if k == 0 {
                    shown(&f.name)
                } else {
                    String::new()
                },
                if m.instance.is_empty() {
                    "-".into()
                } else {
                    format!("{}={}", shown(&f.dimension), shown(&m.instance))
                },
                f.kind.as_str().into(),
                human::reading(&shape, &total),
            ];
            row.extend((0..nr_cpus).map(|c| {
                view.reading_on(c, k)
                    .map_or_else(String::new, |r| human::reading(&shape, &r))
            }));
            let mut details = match &total {
                Reading::Histogram(h) => human::histogram_summary(h, f),
                _ => String::new(),
            };
            if !m.labels.is_empty() {
                let labels: Vec<String> = m
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{}={}", shown(k), shown(v)))
                    .collect();
                if !details.is_empty() {
                    details.push_str("  ");
                }
                details.push_str(&format!("{{{}}}", labels.join(", ")));
            }
            row.push(details);
            rows.push(row);
        }
    }
    let mut out = columns(&rows);
    if s.is_empty() {
        out.push_str("(no counters registered)\n");
    }
    out
}

/// Lays `rows` out in columns: the first three left-aligned, the numbers
/// right-aligned, the last column as it is.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|v| v.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, v) in r.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let w = width[c];
            if c + 1 == n {
                line.push_str(v);
            } else if c < 3 {
                let _ = write!(line, "{v:<w$}");
            } else {
                let _ = write!(line, "{v:>w$}");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The `--json` document of a snapshot, serialized as it is written by
/// [`write_json`]: the segment's header, the generation, the 1.0 counters
/// and the families. Nothing of it is built in memory but one value (a
/// histogram's buckets, a family's unit) at a time.
struct Document<'a> {
    info: &'a SegmentInfo,
    snap: &'a Snapshot,
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("segment", &json_info(self.info))?;
        m.serialize_entry("generation", &self.snap.generation)?;
        m.serialize_entry("counters", &Counters(self.snap))?;
        m.serialize_entry(
            "families",
            &FamiliesJson(view::Families::snapshot(self.snap)),
        )?;
        m.end()
    }
}

/// Writes the `--json` document of `snap` (segment `info`) to `out`, and a
/// newline: streamed, value by value, so that the memory it takes beside
/// the snapshot is one value's, not the page's (`out` should be buffered).
pub fn write_json(out: &mut impl Write, info: &SegmentInfo, snap: &Snapshot) -> io::Result<()> {
    crate::json::line(out, &Document { info, snap })
}

/// The 1.0 counters of a snapshot: a JSON array, one object per counter.
struct Counters<'a>(&'a Snapshot);

impl Serialize for Counters<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let snap = self.0;
        s.collect_seq(snap.instances.iter().map(|i| Counter { snap, i }))
    }
}

/// One counter in JSON: name, unit, semantics, type, total and per-CPU
/// values.
struct Counter<'a> {
    snap: &'a Snapshot,
    i: &'a Instance,
}

impl Serialize for Counter<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (snap, i) = (self.snap, self.i);
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("name", &i.name)?;
        m.serialize_entry("unit", &i.unit)?;
        m.serialize_entry("semantics", i.semantics.as_str())?;
        m.serialize_entry("type", i.value_type.as_str())?;
        m.serialize_entry("total", &json_value(i, snap.total(i)))?;
        m.serialize_entry(
            "per_cpu",
            &Seq(|| snap.per_cpu(i).map(|v| json_value(i, v))),
        )?;
        m.end()
    }
}

fn json_value(inst: &Instance, v: u64) -> serde_json::Value {
    match inst.value_type {
        ValueType::U64 => v.into(),
        ValueType::I64 => (v as i64).into(),
    }
}

/// The total of every counter of a snapshot by name, as a recording's line
/// holds them.
pub fn counter_totals(s: &Snapshot) -> BTreeMap<String, serde_json::Value> {
    s.instances
        .iter()
        .map(|i| (i.name.clone(), json_value(i, s.total(i))))
        .collect()
}

/// Header and liveness as JSON.
pub fn json_info(info: &SegmentInfo) -> serde_json::Value {
    let h = &info.header;
    serde_json::json!({
        // JSON, written with JSON escapes for every control (crate::json):
        // not raw
        "path": info.path.as_ref().map(|p| p.display().to_string()),
        "abi": format!("{}.{}", h.abi_major, h.abi_minor),
        "epoch": format!("{:#018x}", h.epoch),
        "generation": h.generation,
        "writer_pid": h.writer_pid,
        "writer_start_ns": h.writer_start_ns,
        "heartbeat_ns": h.heartbeat_ns,
        "heartbeat_interval_ns": h.heartbeat_interval_ns,
        "flags": h.flags,
        "liveness": info.liveness,
        "nr_cpus": h.nr_cpus,
        "max_instances": h.max_instances,
        "damon_capacity": h.damon_capacity,
        "segment_size": h.segment_size,
        "mapped": info.mapped,
        "owner_uid": info.owner,
        "origin": match info.origin {
            perfabi_reader::Origin::KernelDevice => "kernel-device",
            perfabi_reader::Origin::KernelMap => "kernel-map",
            perfabi_reader::Origin::File => "file",
        },
    })
}

/// A family's unit in JSON: its text, and its structured fields with the
/// base unit and factor where it has them (a 1.0 entry's unit string that
/// names no unit has only its text).
fn json_unit(f: &Family) -> serde_json::Value {
    let u = f.unit;
    let legacy_unknown =
        matches!(f.origin, Origin::Entry(_)) && perfabi::Unit::from_legacy(&f.unit_text).is_none();
    if legacy_unknown {
        return serde_json::json!({ "text": f.unit_text });
    }
    let (base, factor) = u.base();
    serde_json::json!({
        "text": f.unit_text,
        "dim_space": u.dim_space,
        "dim_time": u.dim_time,
        "dim_count": u.dim_count,
        "scale_space": u.scale_space,
        "scale_time": u.scale_time,
        "scale_count": u.scale_count,
        "quantity": match u.quantity {
            perfabi::unit::QUANTITY_PAGES => "pages",
            perfabi::unit::QUANTITY_RATIO => "ratio",
            _ => "plain",
        },
        "base": base,
        "factor": factor,
    })
}

/// A histogram family's buckets in JSON: layout, finite upper bounds (the
/// last bucket is `+Inf`) and the number of buckets.
fn json_buckets(b: &Buckets) -> serde_json::Value {
    let bounds: Vec<u64> = (0..b.count()).filter_map(|k| b.bound(k)).collect();
    match b {
        Buckets::Log2 { first, n } => serde_json::json!({
            "layout": "log2", "log2_first": first, "count": n, "bounds": bounds,
        }),
        Buckets::Explicit(_) => serde_json::json!({
            "layout": "explicit", "count": b.count(), "bounds": bounds,
        }),
    }
}

/// A reading in JSON: a number, or a histogram's count, sum and
/// per-bucket (not cumulative) counts.
pub fn json_reading(r: &Reading) -> serde_json::Value {
    match r {
        Reading::Unsigned(v) => (*v).into(),
        Reading::Signed(v) => (*v).into(),
        Reading::Histogram(h) => serde_json::json!({
            "count": h.count, "sum": h.sum, "buckets": h.buckets,
        }),
    }
}

/// Every family in JSON, by name: kind, help, dimension, unit, value
/// type, buckets, and its instances by instance string (`""` for the one
/// instance of a family without dimension), each with its labels, total
/// and per-CPU values; a directory's merged family has, instead of
/// `instances`, its gauge mode, the number of `writers` that had it and
/// its `series` (a list: a writer label keeps one instance's series
/// apart), each with its instance, labels and total.
struct FamiliesJson<'a>(view::Families<'a>);

impl Serialize for FamiliesJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|f| (&f.family.name, FamilyJson(f))))
    }
}

/// One family in JSON (see [`FamiliesJson`]).
struct FamilyJson<'a>(view::FamilyView<'a>);

impl Serialize for FamilyJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (view, f) = (self.0, self.0.family);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry(
            "origin",
            match f.origin {
                Origin::Entry(_) => "entry",
                Origin::Family(_) => "family",
            },
        )?;
        m.serialize_entry("reg_id", &f.reg_id)?;
        m.serialize_entry("kind", f.kind.as_str())?;
        m.serialize_entry("help", &f.help)?;
        m.serialize_entry("dimension", &f.dimension)?;
        m.serialize_entry("unit", &json_unit(f))?;
        m.serialize_entry("type", f.value_type.as_str())?;
        m.serialize_entry("buckets", &f.buckets.as_ref().map(json_buckets))?;
        match view.writers() {
            None => m.serialize_entry(
                "instances",
                &Map(|| {
                    f.members
                        .iter()
                        .enumerate()
                        .map(move |(k, mem)| (&mem.instance, MemberJson { view, k, mem }))
                }),
            )?,
            Some(writers) => {
                m.serialize_entry("gauge_mode", f.gauge_mode.as_str())?;
                m.serialize_entry("writers", &writers)?;
                m.serialize_entry(
                    "series",
                    &Seq(|| {
                        f.members
                            .iter()
                            .enumerate()
                            .map(move |(k, mem)| MemberJson { view, k, mem })
                    }),
                )?;
            }
        }
        m.end()
    }
}

/// One instance of a family in JSON: ids, labels, total and per-CPU
/// readings; a merged series: instance, labels and total.
struct MemberJson<'a> {
    view: view::FamilyView<'a>,
    k: usize,
    mem: &'a Member,
}

impl Serialize for MemberJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (view, k, mem) = (self.view, self.k, self.mem);
        let total = view.reading(k).map(|r| json_reading(&r));
        let mut m = s.serialize_map(None)?;
        if view.writers().is_some() {
            m.serialize_entry("instance", &mem.instance)?;
            m.serialize_entry("labels", &Map(|| mem.labels.iter().map(|(k, v)| (k, v))))?;
            m.serialize_entry("total", &total)?;
            return m.end();
        }
        m.serialize_entry("instance_id", &mem.instance_id)?;
        m.serialize_entry("reg_id", &mem.reg_id)?;
        m.serialize_entry("labels", &Map(|| mem.labels.iter().map(|(k, v)| (k, v))))?;
        m.serialize_entry("total", &total)?;
        m.serialize_entry(
            "per_cpu",
            &Seq(|| {
                (0..)
                    .map_while(move |c| view.reading_on(c, k))
                    .map(|r| json_reading(&r))
            }),
        )?;
        m.end()
    }
}

/// Writes the `--json` document of a directory's merged read `scrape` of
/// `dir` to `out`, and a newline: the directory (path, segment files
/// merged, problems: file, family, code and message each) and the merged
/// families (see [`FamiliesJson`]), streamed as [`write_json`] streams a
/// segment's.
pub fn write_directory_json(out: &mut impl Write, dir: &Path, scrape: &Scrape) -> io::Result<()> {
    crate::json::line(out, &DirectoryDocument { dir, scrape })
}

/// The `--json` document of a directory (see [`write_directory_json`]).
struct DirectoryDocument<'a> {
    dir: &'a Path,
    scrape: &'a Scrape,
}

impl Serialize for DirectoryDocument<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry(
            "directory",
            &serde_json::json!({
                // JSON, written with JSON escapes for every control:
                // not raw
                "path": self.dir.display().to_string(),
                "segments": self.scrape.segments,
                "problems": self.scrape.problems.iter().map(|p| serde_json::json!({
                    // JSON escapes, as above:
                    // not raw
                    "file": p.file.display().to_string(),
                    "family": p.family,
                    "code": p.code,
                    "message": p.message,
                })).collect::<Vec<_>>(),
            }),
        )?;
        m.serialize_entry(
            "families",
            &FamiliesJson(view::Families::merged(&self.scrape.families)),
        )?;
        m.end()
    }
}

/// Writes `--damon --json` to `out`, and a newline: the latest
/// aggregations with their regions (each with its access frequency), the
/// regions the writer dropped and the CPUs left out, streamed a region at
/// a time (`out` should be buffered).
pub fn write_damon_json(out: &mut impl Write, read: &DamonRead, dropped: u64) -> io::Result<()> {
    crate::json::line(out, &DamonJson { read, dropped })
}

/// The `--damon --json` document (see [`write_damon_json`]).
struct DamonJson<'a> {
    read: &'a DamonRead,
    dropped: u64,
}

impl Serialize for DamonJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry(
            "aggregations",
            &Seq(|| self.read.aggregations.iter().map(AggregationJson)),
        )?;
        m.serialize_entry("dropped_regions", &self.dropped)?;
        m.serialize_entry("busy_cpus", &self.read.busy_cpus)?;
        m.end()
    }
}

/// One aggregation in JSON: its ids, intervals and regions.
struct AggregationJson<'a>(&'a Aggregation);

impl Serialize for AggregationJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = self.0;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("monitor_id", &a.monitor_id)?;
        m.serialize_entry("target_id", &a.target_id)?;
        m.serialize_entry("aggregation", &a.aggregation)?;
        m.serialize_entry("sample_us", &a.intervals.sample_us)?;
        m.serialize_entry("aggr_us", &a.intervals.aggr_us)?;
        m.serialize_entry(
            "regions",
            &Seq(|| {
                a.regions.iter().map(move |r| {
                    Map(move || {
                        [
                            ("start", serde_json::Value::from(r.start)),
                            ("end", r.end.into()),
                            ("nr_accesses", r.nr_accesses.into()),
                            ("age", r.age.into()),
                            ("frequency", a.frequency(r).into()),
                        ]
                        .into_iter()
                    })
                })
            }),
        )?;
        m.end()
    }
}
