//! OpenMetrics text exposition of a snapshot's families (also read by
//! Prometheus), shared by `perfabi-cat --openmetrics` and
//! `perfabi-prometheus`: one segment's snapshot ([`render_into`]) or a
//! directory's merged read ([`render_directory_into`]), both rendered from
//! one shape ([`Families`]) by one renderer.
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
//!   bounds, and sums) are then converted to the base unit, each the exact
//!   decimal of the stored integer times the unit's factor
//!   (`18446744073709551615` ms is `18446744073709551.615`), never an `f64`
//!   approximation. Otherwise there
//!   is no `UNIT` line, values are as stored, and the help text ends with
//!   `(unit: <unit>)`.
//! * Labels: `cpu` for per-CPU samples (`--cpu`), the family's dimension with
//!   the instance string, the instance's extra labels; `le` last.
//! * [`Format::Prometheus`] is the same samples in the Prometheus text
//!   format 0.0.4, for scrapers that do not ask for OpenMetrics: metadata
//!   named as the samples (`# TYPE x_total counter`), no `# UNIT`, no
//!   `# EOF`.
//! * Every format is a [`Sink`] that [`walk`] (or [`walk_directory`]) hands
//!   the families to, each exposed as [`Exposed::of`] says: the text
//!   formats here ([`Text`]), the protobuf exposition in
//!   `perfabi-prometheus`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use crate::directory::{MergedFamily, Problem, Scrape};
use crate::view::{Families, FamilyView};
use crate::{decimal, Family, Histogram, Kind, Member, Reading, Snapshot, ValueType};
use perfabi::family::Origin;
use perfabi::unit::Powers;

/// A family's metric type on a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// An unsigned counter (samples `_total`).
    Counter,
    /// A signed counter, a gauge or a peak.
    Gauge,
    /// A histogram.
    Histogram,
}

impl Type {
    /// The name of the type in the text formats (`# TYPE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// How one family is exposed, in every format: its name, type, unit and
/// help, and how its stored integers read in the exposed unit.
#[derive(Clone, Debug)]
pub struct Exposed {
    /// The family name (`# TYPE`, `# HELP`, `# UNIT`); a counter's samples
    /// add `_total`.
    pub name: String,
    /// Its metric type.
    pub typ: Type,
    /// The base unit of a `# UNIT` line, if the family has one.
    pub unit: Option<String>,
    /// The help text, unescaped (see [`Exposed::of`]).
    pub help: String,
    /// What one stored unit is worth in the base unit (1 without `UNIT`).
    factor: f64,
    /// `factor` exactly ([`Powers::ONE`] without `UNIT`).
    powers: Powers,
}

impl Exposed {
    /// How `f` is exposed: named [`perfabi::name::openmetrics`] (a
    /// counter's without a `_total` of its own), converted to the base unit
    /// only when the name already ends with `_<base unit>`, with the
    /// family's help (or `perfabi <kind> <name>`), which says the unit
    /// when no `UNIT` does.
    pub fn of(f: &Family) -> Exposed {
        let mut e = exposed(f);
        e.help = help(f, &e);
        e
    }

    /// What one stored unit is worth in the exposed unit, exactly:
    /// [`Powers::ONE`] when values are exposed as stored.
    pub fn powers(&self) -> Powers {
        self.powers
    }

    /// A stored integer in the exposed unit as a scraper reads it from the
    /// text page: the `f64` nearest the exact decimal the page shows.
    pub fn value(&self, v: i128) -> f64 {
        if self.powers == Powers::ONE {
            return v as f64;
        }
        number(v, self).parse().unwrap_or(f64::NAN)
    }

    /// Calls `each(text, bound, cumulative)` for each finite bucket bound
    /// of histogram `h` of family `f` as the pages show it: its exact text
    /// in the exposed unit, that text read as an `f64` (bounds that read
    /// as one `f64` are one bucket, named by the largest of them, which
    /// has their count), and the cumulative count up to it; returns the
    /// count of every bucket, `+Inf` included.
    pub fn each_bucket(
        &self,
        f: &Family,
        h: &Histogram,
        mut each: impl FnMut(&str, f64, u128),
    ) -> u128 {
        let mut cumulative = 0u128;
        let Some(b) = &f.buckets else {
            return cumulative;
        };
        // (bound as the scraper reads it; its exact text; cumulative
        // count): bounds one f64 apart are one bucket, named by the largest.
        let mut pending: Option<(f64, String, u128)> = None;
        for (k, &c) in h.buckets.iter().enumerate() {
            cumulative += u128::from(c);
            let Some(bound) = b.bound(k) else {
                continue;
            };
            let text = number(i128::from(bound), self);
            let key = if self.powers == Powers::ONE {
                bound as f64
            } else {
                text.parse().unwrap_or(f64::NAN)
            };
            if let Some((prev, text, n)) = pending.take() {
                if prev != key {
                    each(&text, prev, n);
                }
            }
            pending = Some((key, text, cumulative));
        }
        if let Some((key, text, n)) = pending {
            each(&text, key, n);
        }
        cumulative
    }
}

fn exposed(f: &Family) -> Exposed {
    let base = perfabi::name::openmetrics(&f.name);
    let (typ, name) = match (f.kind, f.value_type) {
        (Kind::Counter, ValueType::U64) => (
            Type::Counter,
            // A counter family's samples get `_total`; the family name must
            // not have it.
            base.strip_suffix("_total")
                .map_or(base.clone(), str::to_string),
        ),
        (Kind::Histogram, _) => (Type::Histogram, base),
        _ => (Type::Gauge, base),
    };
    let (unit, factor) = f.unit.base();
    if !unit.is_empty() && name.ends_with(&format!("_{unit}")) {
        Exposed {
            name,
            typ,
            unit: Some(unit),
            help: String::new(),
            factor,
            powers: f.unit.base_powers(),
        }
    } else {
        Exposed {
            name,
            typ,
            unit: None,
            help: String::new(),
            factor: 1.0,
            powers: Powers::ONE,
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
    let mut out = String::with_capacity(s.len());
    write_escaped(&mut out, s);
    out
}

/// Escapes help text for the Prometheus text format: backslash and newline
/// only (a double quote stays as it is there).
fn escape_text_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A number in base units that has no exact decimal (see [`number`]):
/// whole numbers below 2^53 as such, else the shortest text that reads back
/// as the same `f64` (`1e-9`, `0.25`).
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

/// A stored integer in the exposed unit, exactly: the integer itself, or
/// the exact decimal of it times the unit's factor
/// (`18446744073709551615` ms is `18446744073709551.615` s), never an
/// `f64`'s approximation. Only a value of a unit per minute or per hour
/// whose seconds have no finite decimal is the shortest `f64` text.
fn number(v: i128, e: &Exposed) -> String {
    if e.powers == Powers::ONE {
        return v.to_string();
    }
    decimal::scaled(v, e.powers).unwrap_or_else(|| float_text(to_base(v as f64, e.factor)))
}

/// Writes a stored value in the exposed unit (see [`number`]); a
/// histogram's count.
fn write_value(out: &mut String, r: &Reading, e: &Exposed) {
    match r {
        Reading::Unsigned(v) => out.push_str(&number(i128::from(*v), e)),
        Reading::Signed(v) => out.push_str(&number(i128::from(*v), e)),
        Reading::Histogram(h) => {
            let _ = write!(out, "{}", h.count);
        }
    }
}

/// Writes `v` escaped as a label value: backslash, double quote and
/// newline.
fn write_escaped(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Writes `{k="v",…}` of `labels` and then `le` if given (nothing if there
/// are neither).
fn write_labels(out: &mut String, labels: &[(&str, &str)], le: Option<&str>) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    for (k, (name, v)) in labels
        .iter()
        .chain(le.map(|v| ("le", v)).iter())
        .enumerate()
    {
        if k > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        write_escaped(out, v);
        out.push('"');
    }
    out.push('}');
}

/// `{k="v",…}` of `labels` (no braces if there are none).
#[cfg(test)]
fn label_text(labels: &[(&str, &str)]) -> String {
    let mut out = String::new();
    write_labels(&mut out, labels, None);
    out
}

/// Writes one sample line: `name` `suffix` `{labels}` and, after a space,
/// what `value` writes.
fn sample(
    out: &mut String,
    e: &Exposed,
    suffix: &str,
    labels: &[(&str, &str)],
    le: Option<&str>,
    value: impl FnOnce(&mut String),
) {
    out.push_str(&e.name);
    out.push_str(suffix);
    write_labels(out, labels, le);
    out.push(' ');
    value(out);
    out.push('\n');
}

/// Writes one series of `f` (one instance, one CPU or the total).
fn series(out: &mut String, f: &Family, e: &Exposed, labels: &[(&str, &str)], r: &Reading) {
    match (r, e.typ) {
        (Reading::Histogram(h), _) => histogram(out, f, e, labels, h),
        (_, Type::Counter) => sample(out, e, "_total", labels, None, |o| write_value(o, r, e)),
        _ => sample(out, e, "", labels, None, |o| write_value(o, r, e)),
    }
}

/// A histogram's samples: cumulative buckets ([`Exposed::each_bucket`]),
/// `+Inf` last, then `_count` (the `+Inf` bucket's count: one consistent
/// copy's count equals it) and `_sum`.
fn histogram(out: &mut String, f: &Family, e: &Exposed, labels: &[(&str, &str)], h: &Histogram) {
    if f.buckets.is_none() {
        return;
    }
    let count = |o: &mut String, n: u128| {
        let _ = write!(o, "{n}");
    };
    let cumulative = e.each_bucket(f, h, |text, _, n| {
        sample(out, e, "_bucket", labels, Some(text), |o| count(o, n));
    });
    sample(out, e, "_bucket", labels, Some("+Inf"), |o| {
        count(o, cumulative)
    });
    sample(out, e, "_count", labels, None, |o| count(o, cumulative));
    sample(out, e, "_sum", labels, None, |o| {
        o.push_str(&number(i128::from(h.sum), e))
    });
}

/// The labels of member `m` of `f` on a page: `cpu` (if given), the
/// dimension with the instance string, the extra labels.
pub fn member_labels<'a>(
    f: &'a Family,
    m: &'a Member,
    cpu: Option<&'a str>,
) -> Vec<(&'a str, &'a str)> {
    let mut l: Vec<(&str, &str)> = Vec::with_capacity(2 + m.labels.len());
    if let Some(c) = cpu {
        l.push(("cpu", c));
    }
    if !f.dimension.is_empty() {
        l.push((f.dimension.as_str(), m.instance.as_str()));
    }
    l.extend(m.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
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
    render_families_into(out, &Families::snapshot(s), per_cpu, format);
}

/// Appends the exposition of `families` in `format` to `out`: one
/// snapshot's or a directory's merged families, rendered alike. `per_cpu`
/// asks for one series per CPU where there are per-CPU values (a merged
/// read has none: its totals are rendered).
pub fn render_families_into(
    out: &mut String,
    families: &Families<'_>,
    per_cpu: bool,
    format: Format,
) {
    walk(&mut Text { out, format }, families, per_cpu);
}

/// A page's format as the walk of its families ([`walk`],
/// [`walk_directory`]) hands them over: each family, then each of its
/// series, then the end. The text formats ([`Text`]) and the protobuf
/// exposition of `perfabi-prometheus` are such sinks, so that every
/// format shows the same families, names, labels and values.
pub trait Sink {
    /// Family `f` begins, exposed as `e`.
    fn family(&mut self, f: &Family, e: &Exposed);
    /// One series of `f` (begun last): one member's total, or its value on
    /// one CPU (a `cpu` label first).
    fn series(&mut self, f: &Family, e: &Exposed, labels: &[(&str, &str)], r: &Reading);
    /// The page ends.
    fn end(&mut self);
}

/// A text page in `format`, appended to `out`.
pub struct Text<'a> {
    /// Where the page is appended.
    pub out: &'a mut String,
    /// Its format.
    pub format: Format,
}

impl Sink for Text<'_> {
    fn family(&mut self, _: &Family, e: &Exposed) {
        let out = &mut *self.out;
        match self.format {
            Format::OpenMetrics => {
                let _ = writeln!(out, "# TYPE {} {}", e.name, e.typ.as_str());
                if let Some(u) = &e.unit {
                    let _ = writeln!(out, "# UNIT {} {u}", e.name);
                }
                let _ = writeln!(out, "# HELP {} {}", e.name, escape_help(&e.help));
            }
            Format::Prometheus => {
                // Prometheus' text format names a counter's metadata by
                // its samples' name, `_total` included.
                let total = if e.typ == Type::Counter { "_total" } else { "" };
                let _ = writeln!(
                    out,
                    "# HELP {}{total} {}",
                    e.name,
                    escape_text_help(&e.help)
                );
                let _ = writeln!(out, "# TYPE {}{total} {}", e.name, e.typ.as_str());
            }
        }
    }

    fn series(&mut self, f: &Family, e: &Exposed, labels: &[(&str, &str)], r: &Reading) {
        series(self.out, f, e, labels, r);
    }

    fn end(&mut self) {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
    }
}

/// Hands `families` to `sink` (see [`Sink`]): with `per_cpu`, one series
/// per member and CPU where there are per-CPU values, else one per member
/// with its total.
pub fn walk(sink: &mut impl Sink, families: &Families<'_>, per_cpu: bool) {
    let cpus = cpu_names(families, per_cpu);
    for f in families.iter() {
        walk_family(sink, f, &cpus);
    }
    sink.end();
}

/// The first part of the names of the reader's own families on a
/// directory's page (`spec/PERFABI.md` §5.5): `perfabi_directory_segments`
/// and `perfabi_directory_problems`.
pub const DIRECTORY_PART: &str = "directory";

/// The reader's own family of a directory's page: segment files read and
/// merged.
const DIRECTORY_SEGMENTS: &str = "directory.segments";
/// The reader's own family of a directory's page: problems of the read by
/// code (dimension `code`).
const DIRECTORY_PROBLEMS: &str = "directory.problems";

/// Appends the exposition of a directory's read in `format` to `out`: the
/// merged families, rendered as [`render_families_into`] renders a
/// snapshot's, then the reader's own gauges
///
/// * `perfabi_directory_segments`: the segment files read and merged;
/// * `perfabi_directory_problems{code="…"}`: this read's problems by code
///   (`family-conflict`, `limit`, a refused file's reader code, …; no
///   series when there is none), so that an operator can alert on what
///   was left out.
///
/// A merged family whose exposed name is one of those two is left out (a
/// page has one family of a name); it is returned as a problem (code
/// `reserved-name`), counted in the gauge like the scrape's own.
pub fn render_directory_into(out: &mut String, scrape: &Scrape, format: Format) -> Vec<Problem> {
    walk_directory(&mut Text { out, format }, scrape)
}

/// Hands a directory's read to `sink` (see [`Sink`]) as
/// [`render_directory_into`] renders it: the merged families, then the
/// reader's own gauges; returns the families left out for their name.
pub fn walk_directory(sink: &mut impl Sink, scrape: &Scrape) -> Vec<Problem> {
    let own = [DIRECTORY_SEGMENTS, DIRECTORY_PROBLEMS].map(perfabi::name::openmetrics);
    let mut left_out = Vec::new();
    let merged = Families::merged(&scrape.families);
    for f in merged.iter() {
        if own.contains(&exposed(f.family).name) {
            left_out.push(Problem {
                file: PathBuf::new(),
                family: Some(f.family.name.clone()),
                message: format!(
                    "family {} left out: its name is the reader's own {} (rename it)",
                    perfabi::text::escape(f.family.name.as_bytes()),
                    exposed(f.family).name
                ),
                code: "reserved-name",
            });
        } else {
            walk_family(sink, f, &[]);
        }
    }
    let mine = own_families(scrape, &left_out);
    for f in Families::merged(&mine).iter() {
        walk_family(sink, f, &[]);
    }
    sink.end();
    left_out
}

/// The reader's own families of a directory's page (see
/// [`render_directory_into`]).
fn own_families(scrape: &Scrape, left_out: &[Problem]) -> [MergedFamily; 2] {
    let mut codes: BTreeMap<&str, u64> = BTreeMap::new();
    for p in scrape.problems.iter().chain(left_out) {
        *codes.entry(p.code).or_default() += 1;
    }
    let gauge = |name: &str, help: &str, dimension: &str, series: Vec<(String, u64)>| {
        let members = series
            .iter()
            .enumerate()
            .map(|(k, (instance, _))| Member {
                slot: None,
                reg_id: 0,
                instance: instance.clone(),
                instance_id: k as u32,
                labels: Vec::new(),
                value_slot: 0,
                words: 1,
            })
            .collect();
        MergedFamily {
            family: Family {
                origin: Origin::Family(0),
                reg_id: 0,
                name: name.to_string(),
                help: help.to_string(),
                dimension: dimension.to_string(),
                kind: Kind::Gauge,
                unit: perfabi::Unit::NONE,
                unit_text: String::new(),
                value_type: ValueType::U64,
                buckets: None,
                gauge_mode: perfabi::GaugeMode::Sum,
                members,
            },
            readings: series
                .into_iter()
                .map(|(_, v)| Reading::Unsigned(v))
                .collect(),
            writers: 0,
        }
    };
    [
        gauge(
            DIRECTORY_SEGMENTS,
            "Segment files of the directory read and merged by this read",
            "",
            vec![(String::new(), scrape.segments as u64)],
        ),
        gauge(
            DIRECTORY_PROBLEMS,
            "What this read of the directory left out, by code: refused files, \
             conflicting families, limits reached (each spoils only itself)",
            "code",
            codes.into_iter().map(|(c, n)| (c.to_string(), n)).collect(),
        ),
    ]
}

/// The `cpu` label of each CPU, if per-CPU series are asked and there are
/// per-CPU values; none otherwise (totals).
fn cpu_names(families: &Families<'_>, per_cpu: bool) -> Vec<String> {
    if per_cpu {
        (0..families.nr_cpus()).map(|c| c.to_string()).collect()
    } else {
        Vec::new()
    }
}

/// Hands one family to `sink`: the family, then its series, one per
/// member (and per CPU of `cpus`, if any; else its totals).
fn walk_family(sink: &mut impl Sink, view: FamilyView<'_>, cpus: &[String]) {
    let f = view.family;
    let e = Exposed::of(f);
    sink.family(f, &e);
    for (k, m) in f.members.iter().enumerate() {
        if cpus.is_empty() {
            if let Some(r) = view.reading(k) {
                let labels = member_labels(f, m, None);
                sink.series(f, &e, &labels, &r);
            }
        } else {
            for (cpu, name) in cpus.iter().enumerate() {
                if let Some(r) = view.reading_on(cpu, k) {
                    let labels = member_labels(f, m, Some(name));
                    sink.series(f, &e, &labels, &r);
                }
            }
        }
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
            label_text(&[("a", "x\"y\\z"), ("b", "1")]),
            r#"{a="x\"y\\z",b="1"}"#
        );
        assert_eq!(label_text(&[]), "");
    }
}
