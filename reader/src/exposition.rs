//! OpenMetrics text exposition of a snapshot's families (also read by
//! Prometheus), shared by `perfabi-cat --openmetrics` and
//! `perfabi-prometheus`.
//!
//! * One metric family per perfabi family (an ABI 1.0 entry is a family of
//!   one instance), named [`perfabi::name::openmetrics`]: `perfabi_` and the
//!   name's flat form. Live names have distinct clash keys (spec §5), so no
//!   two families, nor their samples, share a name.
//! * `# TYPE`: an unsigned counter is a `counter` (samples `_total`; the
//!   family name without a `_total` of its own); a signed counter (which may
//!   go below zero), a gauge and a peak are `gauge`s; a histogram is a
//!   `histogram` with cumulative `_bucket{le=…}` samples (`+Inf` last),
//!   `_count` and `_sum`.
//! * `# UNIT` only when the family name already ends with `_<base unit>`
//!   ([`perfabi::Unit::base`]: `bytes`, `seconds`, …): values (and `le`
//!   bounds, and sums) are then converted to the base unit. Otherwise there
//!   is no `UNIT` line, values are as stored, and the help text ends with
//!   `(unit: <unit>)`.
//! * Labels: `cpu` for per-CPU samples (`--cpu`), the family's dimension with
//!   the instance string, the instance's extra labels; `le` last.
//! * [`Format::Prometheus`] is the same samples in the Prometheus text
//!   format 0.0.4, for scrapers that do not ask for OpenMetrics: metadata
//!   named as the samples (`# TYPE x_total counter`), no `# UNIT`, no
//!   `# EOF`.

use std::fmt::Write as _;

use crate::{Family, Histogram, Kind, Member, Reading, Snapshot, ValueType};
use perfabi::family::Origin;

/// How one family is exposed.
struct Exposed {
    /// The family name (`# TYPE`, `# HELP`, `# UNIT`).
    name: String,
    /// `counter`, `gauge` or `histogram`.
    typ: &'static str,
    /// The base unit of a `# UNIT` line, if the family has one.
    unit: Option<String>,
    /// What one stored unit is worth in the base unit (1 without `UNIT`).
    factor: f64,
}

fn exposed(f: &Family) -> Exposed {
    let base = perfabi::name::openmetrics(&f.name);
    let (typ, name) = match (f.kind, f.value_type) {
        (Kind::Counter, ValueType::U64) => (
            "counter",
            // A counter family's samples get `_total`; the family name must
            // not have it.
            base.strip_suffix("_total")
                .map_or(base.clone(), str::to_string),
        ),
        (Kind::Histogram, _) => ("histogram", base),
        _ => ("gauge", base),
    };
    let (unit, factor) = f.unit.base();
    if !unit.is_empty() && name.ends_with(&format!("_{unit}")) {
        Exposed {
            name,
            typ,
            unit: Some(unit),
            factor,
        }
    } else {
        Exposed {
            name,
            typ,
            unit: None,
            factor: 1.0,
        }
    }
}

/// The help text: the family's own, or for a 1.0 entry (which has none)
/// `perfabi <counter|instant> <name>`, with the unit when no `# UNIT` line
/// says it.
fn help(f: &Family, e: &Exposed) -> String {
    match f.origin {
        Origin::Entry(_) => {
            let semantics = if f.kind == Kind::Counter {
                "counter"
            } else {
                "instant"
            };
            let unit = if f.unit_text.is_empty() || e.unit.is_some() {
                String::new()
            } else {
                format!(" ({})", f.unit_text)
            };
            format!("perfabi {semantics} {}{unit}", f.name)
        }
        Origin::Family(_) => {
            let mut h = if f.help.is_empty() {
                format!("perfabi {} {}", f.kind.as_str(), f.name)
            } else {
                f.help.clone()
            };
            let unit = f.unit.to_string();
            if e.unit.is_none() && !unit.is_empty() {
                let _ = write!(h, " (unit: {unit})");
            }
            h
        }
    }
}

/// Escapes help text as an OpenMetrics escaped string: backslash, double
/// quote and newline (as a label value).
fn escape_help(s: &str) -> String {
    escape_label(s)
}

/// Escapes help text for the Prometheus text format: backslash and newline
/// only (a double quote stays as it is there).
fn escape_text_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Escapes a label value: backslash, double quote and newline.
fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A number in base units: exact for whole numbers, else the shortest text
/// that reads back as the same `f64` (`1e-9`, `0.25`).
fn float_text(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:?}")
    }
}

/// `v` stored units in the base unit: divided by `1 / factor` when that is
/// a whole number (`µs` → `s`: `10 / 1e6` is `1e-5`, where `10 * 1e-6` is
/// `9.999999999999999e-6`), else multiplied by `factor`.
fn to_base(v: f64, factor: f64) -> f64 {
    let inv = (1.0 / factor).round();
    if factor < 1.0 && inv * factor == 1.0 {
        v / inv
    } else {
        v * factor
    }
}

/// A stored value converted by `factor` (kept exact when it is 1).
fn value_text(r: &Reading, factor: f64) -> String {
    match (r, factor == 1.0) {
        (Reading::Unsigned(v), true) => v.to_string(),
        (Reading::Signed(v), true) => v.to_string(),
        (Reading::Unsigned(v), false) => float_text(to_base(*v as f64, factor)),
        (Reading::Signed(v), false) => float_text(to_base(*v as f64, factor)),
        (Reading::Histogram(h), _) => value_text(&Reading::Unsigned(h.count), 1.0),
    }
}

/// `{k="v",…}` of `labels` (no braces if there are none).
fn label_text(labels: &[(&str, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// Writes one series of `f` (one instance, one CPU or the total).
fn series(out: &mut String, f: &Family, e: &Exposed, labels: &[(&str, String)], r: &Reading) {
    match (r, e.typ) {
        (Reading::Histogram(h), _) => histogram(out, f, e, labels, h),
        (_, "counter") => {
            let _ = writeln!(
                out,
                "{}_total{} {}",
                e.name,
                label_text(labels),
                value_text(r, e.factor)
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "{}{} {}",
                e.name,
                label_text(labels),
                value_text(r, e.factor)
            );
        }
    }
}

/// A histogram's samples: cumulative buckets (bounds in the exposed unit;
/// bounds that become one number there are one bucket), `+Inf` last, then
/// `_count` (the `+Inf` bucket's count: one consistent copy's count equals
/// it) and `_sum`.
fn histogram(out: &mut String, f: &Family, e: &Exposed, labels: &[(&str, String)], h: &Histogram) {
    let Some(b) = &f.buckets else {
        return;
    };
    let mut with_le: Vec<(&str, String)> = labels.to_vec();
    with_le.push(("le", String::new()));
    let last = with_le.len() - 1;
    let mut cumulative = 0u128;
    let mut pending: Option<(f64, u128)> = None;
    for (k, &c) in h.buckets.iter().enumerate() {
        cumulative += u128::from(c);
        let Some(bound) = b.bound(k) else {
            continue;
        };
        let le = to_base(bound as f64, e.factor);
        if let Some((prev, n)) = pending {
            if prev != le {
                with_le[last].1 = float_text(prev);
                let _ = writeln!(out, "{}_bucket{} {n}", e.name, label_text(&with_le));
            }
        }
        pending = Some((le, cumulative));
    }
    if let Some((prev, n)) = pending {
        with_le[last].1 = float_text(prev);
        let _ = writeln!(out, "{}_bucket{} {n}", e.name, label_text(&with_le));
    }
    with_le[last].1 = "+Inf".to_string();
    let _ = writeln!(
        out,
        "{}_bucket{} {cumulative}",
        e.name,
        label_text(&with_le)
    );
    let _ = writeln!(out, "{}_count{} {cumulative}", e.name, label_text(labels));
    let sum = if e.factor == 1.0 {
        h.sum.to_string()
    } else {
        float_text(to_base(h.sum as f64, e.factor))
    };
    let _ = writeln!(out, "{}_sum{} {sum}", e.name, label_text(labels));
}

/// The labels of member `m` of `f`: `cpu` (if given), the dimension with
/// the instance string, the extra labels.
fn member_labels<'a>(f: &'a Family, m: &'a Member, cpu: Option<usize>) -> Vec<(&'a str, String)> {
    let mut l: Vec<(&str, String)> = Vec::new();
    if let Some(c) = cpu {
        l.push(("cpu", c.to_string()));
    }
    if !f.dimension.is_empty() {
        l.push((f.dimension.as_str(), m.instance.clone()));
    }
    l.extend(m.labels.iter().map(|(k, v)| (k.as_str(), v.clone())));
    l
}

/// A text exposition format, as negotiated by a scraper's `Accept` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0: `# TYPE`, `# UNIT`, `# HELP` of the family name
    /// (a counter's without `_total`), help text escaped as a string, and
    /// `# EOF` last.
    OpenMetrics,
    /// The Prometheus text format 0.0.4 (what Prometheus reads without
    /// OpenMetrics): `# HELP` and `# TYPE` of the sample name (a counter's
    /// with `_total`), no `# UNIT` (its parser has none; the name keeps the
    /// unit suffix), help escaping only `\` and newline, no `# EOF`. The
    /// samples are the same as OpenMetrics'.
    Prometheus,
}

impl Format {
    /// The HTTP `Content-Type` of a page in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The OpenMetrics exposition of every family of `s`, ending with `# EOF`;
/// with `per_cpu`, one series per instance and CPU (label `cpu`), else one
/// per instance with its total (a peak's maximum over CPUs).
pub fn openmetrics(s: &Snapshot, per_cpu: bool) -> String {
    let mut out = String::new();
    render_into(&mut out, s, per_cpu, Format::OpenMetrics);
    out
}

/// The Prometheus text format (0.0.4) exposition of every family of `s`:
/// the same samples as [`openmetrics`], with the metadata lines Prometheus'
/// text parser reads.
pub fn prometheus(s: &Snapshot, per_cpu: bool) -> String {
    let mut out = String::new();
    render_into(&mut out, s, per_cpu, Format::Prometheus);
    out
}

/// Appends the exposition of every family of `s` in `format` to `out` (see
/// [`openmetrics`] and [`prometheus`]); a caller rendering every scrape can
/// keep `out`'s allocation.
pub fn render_into(out: &mut String, s: &Snapshot, per_cpu: bool, format: Format) {
    for f in &s.families {
        let e = exposed(f);
        match format {
            Format::OpenMetrics => {
                let _ = writeln!(out, "# TYPE {} {}", e.name, e.typ);
                if let Some(u) = &e.unit {
                    let _ = writeln!(out, "# UNIT {} {u}", e.name);
                }
                let _ = writeln!(out, "# HELP {} {}", e.name, escape_help(&help(f, &e)));
            }
            Format::Prometheus => {
                // Prometheus' text format names a counter's metadata by its
                // samples' name, `_total` included.
                let total = if e.typ == "counter" { "_total" } else { "" };
                let _ = writeln!(
                    out,
                    "# HELP {}{total} {}",
                    e.name,
                    escape_text_help(&help(f, &e))
                );
                let _ = writeln!(out, "# TYPE {}{total} {}", e.name, e.typ);
            }
        }
        for m in &f.members {
            if per_cpu {
                for cpu in 0..s.nr_cpus {
                    let labels = member_labels(f, m, Some(cpu));
                    series(out, f, &e, &labels, &s.reading_on(cpu, f, m));
                }
            } else {
                let labels = member_labels(f, m, None);
                series(out, f, &e, &labels, &s.reading(f, m));
            }
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back() {
        assert_eq!(float_text(3.0), "3");
        assert_eq!(float_text(1e-9), "1e-9");
        assert_eq!(float_text(0.25), "0.25");
        assert_eq!(float_text(2f64.powi(63)), "9.223372036854776e18");
        assert_eq!(float_text(to_base(10.0, 1e-6)), "1e-5");
        assert_eq!(float_text(to_base(1_500_000_000.0, 1e-9)), "1.5");
        assert_eq!(to_base(3.0, 1024.0), 3072.0);
    }

    #[test]
    fn text_help_keeps_quotes() {
        assert_eq!(escape_text_help("a\"b\\c\nd"), "a\"b\\\\c\\nd");
        assert_eq!(escape_help("a\"b"), "a\\\"b");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(
            label_text(&[("a", "x\"y\\z".into()), ("b", "1".into())]),
            r#"{a="x\"y\\z",b="1"}"#
        );
        assert_eq!(label_text(&[]), "");
    }
}
