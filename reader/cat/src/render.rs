//! Rendering a snapshot: a table for people, and JSON.

use std::fmt::Write as _;

use perfabi::family::Origin;
use perfabi_reader::{Buckets, Family, Instance, Reading, SegmentInfo, Snapshot, ValueType};
use serde::Serialize;

use crate::human;

/// The table: one group of rows per family, one row per instance, values
/// in human units (bytes with IEC prefixes, times in ns/µs/ms/s); per-CPU
/// columns with `per_cpu`. A histogram shows its observations, and its sum,
/// mean and the buckets of p50 and p99 in the last column, with the
/// instance's labels.
pub fn table(s: &Snapshot, per_cpu: bool) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["FAMILY", "INSTANCE", "KIND", "VALUE"];
    let cpus: Vec<String> = (0..s.nr_cpus).map(|c| format!("cpu{c}")).collect();
    if per_cpu {
        head.extend(cpus.iter().map(String::as_str));
    }
    head.push("DETAILS");
    rows.push(head.iter().map(|h| h.to_string()).collect());
    for f in &s.families {
        let shape = human::Shape::of(f);
        if f.members.is_empty() {
            let mut row = vec![
                f.name.clone(),
                "-".into(),
                f.kind.as_str().into(),
                "-".into(),
            ];
            row.extend((0..s.nr_cpus).filter(|_| per_cpu).map(|_| String::new()));
            row.push("(no instances)".into());
            rows.push(row);
        }
        for (k, m) in f.members.iter().enumerate() {
            let total = s.reading(f, m);
            let mut row = vec![
                if k == 0 {
                    f.name.clone()
                } else {
                    String::new()
                },
                if m.instance.is_empty() {
                    "-".into()
                } else {
                    format!("{}={}", f.dimension, m.instance)
                },
                f.kind.as_str().into(),
                human::reading(&shape, &total),
            ];
            if per_cpu {
                row.extend((0..s.nr_cpus).map(|c| human::reading(&shape, &s.reading_on(c, f, m))));
            }
            let mut details = match &total {
                Reading::Histogram(h) => human::histogram_summary(h, f),
                _ => String::new(),
            };
            if !m.labels.is_empty() {
                let labels: Vec<String> =
                    m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
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
    if s.families.is_empty() {
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

/// One counter in JSON.
#[derive(Serialize)]
pub struct JsonCounter<'a> {
    /// Instance name.
    pub name: &'a str,
    unit: &'a str,
    semantics: &'static str,
    #[serde(rename = "type")]
    value_type: &'static str,
    /// Total over CPUs.
    pub total: serde_json::Value,
    per_cpu: Vec<serde_json::Value>,
}

fn json_value(inst: &Instance, v: u64) -> serde_json::Value {
    match inst.value_type {
        ValueType::U64 => v.into(),
        ValueType::I64 => (v as i64).into(),
    }
}

/// The counters of a snapshot as JSON values.
pub fn json_counters(s: &Snapshot) -> Vec<JsonCounter<'_>> {
    s.instances
        .iter()
        .map(|i| JsonCounter {
            name: &i.name,
            unit: &i.unit,
            semantics: i.semantics.as_str(),
            value_type: i.value_type.as_str(),
            total: json_value(i, s.total(i)),
            per_cpu: s.per_cpu(i).map(|v| json_value(i, v)).collect(),
        })
        .collect()
}

/// Header and liveness as JSON.
pub fn json_info(info: &SegmentInfo) -> serde_json::Value {
    let h = &info.header;
    serde_json::json!({
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

/// Every family of a snapshot in JSON, by name: kind, help, dimension,
/// unit, value type, buckets, and its instances by instance string (`""`
/// for the one instance of a family without dimension), each with its
/// labels, total and per-CPU values.
pub fn json_families(s: &Snapshot) -> serde_json::Value {
    let mut fams = serde_json::Map::new();
    for f in &s.families {
        let mut instances = serde_json::Map::new();
        for m in &f.members {
            let labels: serde_json::Map<String, serde_json::Value> = m
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            instances.insert(
                m.instance.clone(),
                serde_json::json!({
                    "instance_id": m.instance_id,
                    "reg_id": m.reg_id,
                    "labels": labels,
                    "total": json_reading(&s.reading(f, m)),
                    "per_cpu": (0..s.nr_cpus)
                        .map(|c| json_reading(&s.reading_on(c, f, m)))
                        .collect::<Vec<_>>(),
                }),
            );
        }
        fams.insert(
            f.name.clone(),
            serde_json::json!({
                "origin": match f.origin {
                    Origin::Entry(_) => "entry",
                    Origin::Family(_) => "family",
                },
                "reg_id": f.reg_id,
                "kind": f.kind.as_str(),
                "help": f.help,
                "dimension": f.dimension,
                "unit": json_unit(f),
                "type": f.value_type.as_str(),
                "buckets": f.buckets.as_ref().map(json_buckets),
                "instances": instances,
            }),
        );
    }
    fams.into()
}
