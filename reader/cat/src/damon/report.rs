//! A report of the views over time, drawn: as text for a terminal (each
//! section a header, the heatmap of [`term`], the working set's table and
//! chart of [`wss_text`]), or as JSON (the raw numbers: times in ns from
//! the window's start, addresses and sizes in bytes, frequencies 0..=1).

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::axis;
use super::section::{Heat, Section, Wss};
use super::term::{self, Colour};
use super::wss_text;
use crate::human;

/// Seconds, as the headers show them.
fn secs(ns: u64) -> String {
    axis::seconds(ns, 3)
}

/// The first line of a section: who, how many aggregations, the
/// intervals, the time range.
fn title(s: &Section) -> String {
    format!(
        "monitor {} target {}: {} aggregation{} (sampling {}, aggregation {}), time {} to {} ({})",
        s.monitor_id,
        s.target_id,
        s.aggregations,
        if s.aggregations == 1 { "" } else { "s" },
        human::time_ns(f64::from(s.intervals.sample_us) * 1e3),
        human::time_ns(f64::from(s.intervals.aggr_us) * 1e3),
        secs(s.time.0),
        secs(s.time.1),
        if s.time_given {
            format!("--time-range, of a window of {}", secs(s.window_ns))
        } else {
            "the whole window; --time-range to choose".into()
        }
    )
}

/// The line that says which addresses a heatmap draws.
fn heat_line(h: &Heat) -> String {
    format!(
        "heatmap of addresses {:#x} to {:#x} ({}{})",
        h.addr.0,
        h.addr.1,
        human::bytes((h.addr.1 - h.addr.0) as f64),
        if h.given {
            ", --address-range"
        } else {
            ": the busiest run of regions; --address-range to choose"
        }
    )
}

/// The line that says what a working set counts.
fn wss_line(w: &Wss, s: &Section) -> String {
    let samples = s.intervals.aggr_us / s.intervals.sample_us.max(1);
    let addr = if w.given {
        format!("in {:#x} to {:#x} (--address-range)", w.addr.0, w.addr.1)
    } else {
        "in the whole address space".into()
    };
    format!(
        "working set size: the regions accessed in at least {} of {samples} samples (--wss-min-accesses), of at least {} (--wss-min-size), {addr}",
        w.threshold.min_accesses,
        human::bytes(w.threshold.min_size as f64)
    )
}

/// The report as text: `preface` lines, then each section; cells drawn
/// with `colour`, the working set's chart `wss` (lines, columns) large.
pub fn text(
    sections: &[Section],
    preface: &[String],
    colour: Colour,
    wss: (usize, usize),
) -> String {
    let mut out = String::new();
    for p in preface {
        let _ = writeln!(out, "{p}");
    }
    for (k, s) in sections.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}", title(s));
        if let Some(h) = &s.heat {
            out.push_str(&term::heatmap(&h.grid, &[heat_line(h)], colour));
        }
        if let Some(w) = &s.wss {
            if s.heat.is_some() {
                out.push('\n');
            }
            let _ = writeln!(out, "{}", wss_line(w, s));
            out.push_str(&wss_text::table(&w.percentiles, w.mean));
            out.push_str(&wss_text::chart(&w.series, s.time, wss.0, wss.1));
        }
    }
    out
}

/// An address range and how it was chosen, for JSON.
fn json_range(addr: (u64, u64), chosen: &str) -> Value {
    json!({ "start": addr.0, "end": addr.1, "chosen": chosen })
}

/// One section as JSON.
fn json_section(s: &Section) -> Value {
    let mut v = json!({
        "monitor_id": s.monitor_id,
        "target_id": s.target_id,
        "sample_us": s.intervals.sample_us,
        "aggr_us": s.intervals.aggr_us,
        "aggregations": s.aggregations,
        "window_ns": s.window_ns,
        "time_range_ns": {
            "start": s.time.0,
            "end": s.time.1,
            "chosen": if s.time_given { "given" } else { "whole window" },
        },
    });
    if let Some(h) = &s.heat {
        let g = &h.grid;
        let cells: Vec<Vec<Option<f64>>> = (0..g.rows())
            .map(|r| (0..g.cols()).map(|c| g.get(r, c)).collect())
            .collect();
        v["heatmap"] = json!({
            "address_range": json_range(h.addr, if h.given { "given" } else { "busiest" }),
            "times_ns": g.times,
            "addrs": g.addrs,
            "cells": cells,
        });
    }
    if let Some(w) = &s.wss {
        v["wss"] = json!({
            "address_range": json_range(w.addr, if w.given { "given" } else { "all" }),
            "min_accesses": w.threshold.min_accesses,
            "min_size": w.threshold.min_size,
            "series": w.series.iter().map(|&(t, b)| json!({ "t_ns": t, "bytes": b })).collect::<Vec<_>>(),
            "percentiles": w.percentiles.iter().map(|&(p, b)| json!({ "p": p, "bytes": b })).collect::<Vec<_>>(),
            "mean": w.mean,
        });
    }
    v
}

/// The report as JSON: `{"sections": [...]}` and the fields of `extra`.
/// A heatmap's `cells` are rows of columns, row 0 the lowest addresses
/// (`addrs[r]..addrs[r + 1]`), column 0 the earliest times
/// (`times_ns[c]..times_ns[c + 1]`), `null` where nothing was monitored.
pub fn json(sections: &[Section], extra: serde_json::Map<String, Value>) -> Value {
    let mut doc = extra;
    doc.insert(
        "sections".into(),
        Value::Array(sections.iter().map(json_section).collect()),
    );
    Value::Object(doc)
}
