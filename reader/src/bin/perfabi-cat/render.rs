//! Rendering a snapshot: a table for people, JSON, and OpenMetrics text.

use std::fmt::Write as _;

use perfabi_reader::{Instance, SegmentInfo, Semantics, Snapshot, ValueType};
use serde::Serialize;

/// A value as its type says: unsigned or signed.
pub fn value_text(inst: &Instance, v: u64) -> String {
    match inst.value_type {
        ValueType::U64 => v.to_string(),
        ValueType::I64 => (v as i64).to_string(),
    }
}

/// The table: one row per counter, per-CPU columns with `per_cpu`.
pub fn table(s: &Snapshot, per_cpu: bool) -> String {
    let mut out = String::new();
    let name_w = s
        .instances
        .iter()
        .map(|i| i.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = write!(
        out,
        "{:<name_w$}  {:<8}  {:<7}  {:>20}",
        "NAME", "UNIT", "KIND", "TOTAL"
    );
    if per_cpu {
        for c in 0..s.nr_cpus {
            let _ = write!(out, "  {:>14}", format!("cpu{c}"));
        }
    }
    out.push('\n');
    for i in &s.instances {
        let _ = write!(
            out,
            "{:<name_w$}  {:<8}  {:<7}  {:>20}",
            i.name,
            i.unit,
            i.semantics.as_str(),
            value_text(i, s.total(i))
        );
        if per_cpu {
            for v in s.per_cpu(i) {
                let _ = write!(out, "  {:>14}", value_text(i, v));
            }
        }
        out.push('\n');
    }
    if s.instances.is_empty() {
        out.push_str("(no counters registered)\n");
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

/// The family name of a counter in OpenMetrics: `perfabi_` and the name's
/// flat form (spec §5). Live names have distinct clash keys, so no two
/// families or samples of one page share a name.
pub fn metric_name(inst: &Instance) -> String {
    let base = format!("perfabi_{}", perfabi::name::flat(&inst.name));
    if is_om_counter(inst) {
        // A counter family's samples get `_total`; the family name must not.
        base.strip_suffix("_total")
            .map(str::to_string)
            .unwrap_or(base)
    } else {
        base
    }
}

/// OpenMetrics counters are unsigned and monotonic: a signed perfabi counter
/// (which may go below zero) is exposed as a gauge.
fn is_om_counter(inst: &Instance) -> bool {
    inst.semantics == Semantics::Counter && inst.value_type == ValueType::U64
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// OpenMetrics text exposition (also accepted by Prometheus): counters as
/// `counter` families with `_total` samples, instants as `gauge`s; with
/// `per_cpu`, one sample per CPU labelled `cpu`, else the total alone.
pub fn openmetrics(s: &Snapshot, per_cpu: bool) -> String {
    let mut out = String::new();
    for i in &s.instances {
        let name = metric_name(i);
        let (kind, sample) = if is_om_counter(i) {
            ("counter", format!("{name}_total"))
        } else {
            ("gauge", name.clone())
        };
        let unit = if i.unit.is_empty() {
            String::new()
        } else {
            format!(" ({})", i.unit)
        };
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(
            out,
            "# HELP {name} perfabi {} {}{}",
            i.semantics.as_str(),
            escape_help(&i.name),
            escape_help(&unit)
        );
        if per_cpu {
            for (cpu, v) in s.per_cpu(i).enumerate() {
                let _ = writeln!(out, "{sample}{{cpu=\"{cpu}\"}} {}", value_text(i, v));
            }
        } else {
            let _ = writeln!(out, "{sample} {}", value_text(i, s.total(i)));
        }
    }
    out.push_str("# EOF\n");
    out
}
