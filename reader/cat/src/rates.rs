//! `--watch`: what changed between two snapshots, per second.
//!
//! A counter's rate (a counter of CPU time as a percentage of one CPU,
//! bytes per second, counts per second), a gauge's or a peak's level, and
//! for a histogram the observations per second with the mean and the p50
//! and p99 buckets of the interval's observations alone.
//!
//! Over a directory (a merged read), an instance is matched by family name,
//! instance and labels. A merged counter or histogram may fall between two
//! reads without any writer's going back: a writer's file left the merge
//! (refused, removed without a fold, past the segment limit) or its family
//! became a conflict. Such an interval has no rate ([`Change::Fell`]),
//! never a negative one nor a reset's guess; the next interval has one
//! again.

use std::collections::HashMap;

use perfabi::family::Origin;
use perfabi_reader::view::FamilyView;
use perfabi_reader::{Family, Histogram, Kind, Member, Reading};

use crate::source::Read;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::human::{self, Shape};
use crate::json::Map;

/// One instance's change over an interval.
pub enum Change {
    /// Units per second of a counter; `None` when the instance is new (no
    /// previous value to compare with).
    Rate(Option<f64>),
    /// The current value of a gauge or peak, exactly.
    Level(i128),
    /// A histogram's observations in the interval (per-bucket, not
    /// cumulative), with their count and sum; `None` when new.
    Observed(Option<Histogram>),
    /// A merged counter or histogram that fell: a writer's counts left the
    /// merge in the interval (see the module's note); no rate.
    Fell,
}

/// Where a row's instance is in the two snapshots it was made from: the
/// indices of its family and member in the current one and, if it was
/// there, in the previous one (so that its per-CPU values can be worked
/// out later, only when they are shown).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Place {
    now: (usize, usize),
    then: Option<(usize, usize)>,
}

impl Place {
    /// The index of the family in the current snapshot.
    pub fn family(&self) -> usize {
        self.now.0
    }
}

/// One row of a `--watch` sample.
pub struct Row<'a> {
    /// The family.
    pub family: &'a Family,
    /// The instance.
    pub member: &'a Member,
    /// Where the instance is in the current and the previous snapshot.
    pub place: Place,
    /// What it did.
    pub change: Change,
    /// Whether it is a directory's merged series (its labels are part of
    /// its name).
    pub merged: bool,
}

/// How an instance is matched between two reads: by its registration in
/// one segment (which table, family and member ids), or by its series in
/// a directory's merged read (family name, instance, labels).
#[derive(Hash, PartialEq, Eq)]
enum Key<'a> {
    Registration(bool, u64, u64),
    Series(&'a str, &'a str, &'a [(String, String)]),
}

fn key<'a>(merged: bool, f: &'a Family, m: &'a Member) -> Key<'a> {
    if merged {
        Key::Series(&f.name, &m.instance, &m.labels)
    } else {
        // Registration ids are distinct within each table, not across
        // them (a 1.0 entry and a family may share one): the key says
        // which table.
        Key::Registration(matches!(f.origin, Origin::Entry(_)), f.reg_id, m.reg_id)
    }
}

/// The changes from `prev` to `cur`, `dt` seconds apart, one row per
/// instance of every family of `cur`. In one segment, an instance is
/// matched with its own registration in `prev` (same family and member
/// registration ids, same segment), never with another instance of the
/// same name; in a directory, with its merged series.
pub fn rows<'a>(prev: &'a Read, cur: &'a Read, dt: f64) -> Vec<Row<'a>> {
    let merged = cur.scrape.is_some();
    let comparable = match (&prev.scrape, &cur.scrape) {
        (None, None) => prev.snap.epoch == cur.snap.epoch,
        (Some(_), Some(_)) => true,
        _ => false,
    };
    let (before_families, now_families) = (prev.families(), cur.families());
    let mut before: HashMap<Key<'a>, (usize, usize)> = HashMap::new();
    if comparable {
        for (fi, f) in before_families.iter().enumerate() {
            for (mi, m) in f.family.members.iter().enumerate() {
                before.insert(key(merged, f.family, m), (fi, mi));
            }
        }
    }
    let mut rows = Vec::new();
    for (fi, f) in now_families.iter().enumerate() {
        for (mi, m) in f.family.members.iter().enumerate() {
            let Some(now) = f.reading(mi) else {
                continue;
            };
            let place = Place {
                now: (fi, mi),
                then: before.get(&key(merged, f.family, m)).copied(),
            };
            let then = place
                .then
                .and_then(|(pfi, pmi)| before_families.get(pfi)?.reading(pmi));
            rows.push(Row {
                family: f.family,
                member: m,
                place,
                change: change(f.family.kind, &now, then, dt, merged),
                merged,
            });
        }
    }
    rows
}

/// The family view and member index at `(family, member)` of `read`.
fn at_place(read: &Read, (fi, mi): (usize, usize)) -> Option<(FamilyView<'_>, usize)> {
    let f = read.families().get(fi)?;
    f.family.members.get(mi)?;
    Some((f, mi))
}

/// What the instance at `place` did on CPU `cpu` alone, for people, in the
/// live view's short form (`prev` and `cur` are the reads `place` was
/// found in, `dt` seconds apart); empty if `place` is not in them or they
/// have no per-CPU values (a directory's).
pub fn text_on(prev: &Read, cur: &Read, place: Place, cpu: usize, dt: f64) -> String {
    let Some((f, mi)) = at_place(cur, place.now) else {
        return String::new();
    };
    let Some(now) = f.reading_on(cpu, mi) else {
        return String::new();
    };
    let then = place
        .then
        .and_then(|at| at_place(prev, at))
        .and_then(|(pf, pmi)| pf.reading_on(cpu, pmi));
    describe(
        f.family,
        &change(f.family.kind, &now, then, dt, false),
        dt,
        false,
    )
}

/// `change` of an instance of `family`, `dt` seconds apart, for people; a
/// histogram's observations per second, with their mean and the p50 and
/// p99 buckets when `full` (else alone: the live view's short form).
fn describe(family: &Family, change: &Change, dt: f64, full: bool) -> String {
    let shape = Shape::of(family);
    match change {
        Change::Rate(Some(r)) => shape.rate(*r),
        Change::Rate(None) | Change::Observed(None) => "(new)".to_string(),
        Change::Fell => "(fell)".to_string(),
        Change::Level(v) => shape.show_whole(*v),
        Change::Observed(Some(h)) => {
            let mut s = format!("{:.1} obs/s", h.count as f64 / dt);
            if full && h.count > 0 {
                s.push_str(&format!("  mean {}", human::mean(&shape, h.sum, h.count)));
                if let Some(b) = &family.buckets {
                    for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
                        if let Some(t) = human::quantile(h, b, &shape, q) {
                            s.push_str(&format!("  {name} {t}"));
                        }
                    }
                }
            }
            s
        }
    }
}

/// What a family of kind `kind` did from `then` (none: the instance is
/// new) to `now`, `dt` seconds later; `merged`: the readings are a
/// directory's merged values, where a counter or histogram that fell is
/// [`Change::Fell`] (in one segment, a counter's difference wraps).
fn change(kind: Kind, now: &Reading, then: Option<Reading>, dt: f64, merged: bool) -> Change {
    match (kind, now) {
        (Kind::Histogram, Reading::Histogram(h)) => match then {
            Some(Reading::Histogram(p)) if merged && fell(h, &p) => Change::Fell,
            then => Change::Observed(then.and_then(|t| match t {
                Reading::Histogram(p) => Some(delta(h, &p)),
                _ => None,
            })),
        },
        (Kind::Counter, Reading::Unsigned(a)) if merged => match then {
            Some(Reading::Unsigned(b)) if *a < b => Change::Fell,
            then => Change::Rate(then.map(|t| match t {
                Reading::Unsigned(b) => (a - b) as f64 / dt,
                _ => f64::NAN,
            })),
        },
        (Kind::Counter, now) => Change::Rate(then.map(|t| match (now, t) {
            (Reading::Signed(a), Reading::Signed(b)) => a.wrapping_sub(b) as f64 / dt,
            (Reading::Unsigned(a), Reading::Unsigned(b)) => a.wrapping_sub(b) as i64 as f64 / dt,
            _ => f64::NAN,
        })),
        (_, now) => Change::Level(human::whole(now)),
    }
}

/// Whether a merged histogram fell from `then` to `now`: fewer
/// observations, in all or in a bucket.
fn fell(now: &Histogram, then: &Histogram) -> bool {
    now.count < then.count || now.buckets.iter().zip(&then.buckets).any(|(a, b)| a < b)
}

/// The observations between two readings of one histogram.
fn delta(now: &Histogram, then: &Histogram) -> Histogram {
    Histogram {
        count: now.count.wrapping_sub(then.count),
        sum: now.sum.wrapping_sub(then.sum),
        buckets: now
            .buckets
            .iter()
            .zip(then.buckets.iter().chain(std::iter::repeat(&0)))
            .map(|(a, b)| a.wrapping_sub(*b))
            .collect(),
    }
}

impl Row<'_> {
    /// The row's name: the family, and `{dimension=instance}` for a family
    /// with a dimension, with a merged series' labels (escaped, see
    /// [`human::shown`]).
    pub fn name(&self) -> String {
        let shown = human::shown;
        let mut parts = Vec::new();
        if !self.member.instance.is_empty() {
            parts.push(format!(
                "{}={}",
                shown(&self.family.dimension),
                shown(&self.member.instance)
            ));
        }
        if self.merged {
            // A writer label keeps one instance's series apart.
            parts.extend(
                self.member
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{}={}", shown(k), shown(v))),
            );
        }
        if parts.is_empty() {
            shown(&self.family.name)
        } else {
            format!("{}{{{}}}", shown(&self.family.name), parts.join(","))
        }
    }

    /// The change for people (a histogram with its mean, p50 and p99).
    pub fn text(&self, dt: f64) -> String {
        describe(self.family, &self.change, dt, true)
    }

    /// The change for people, short: a histogram as its observations per
    /// second alone (the live view, where a value column must fit).
    pub fn short_text(&self, dt: f64) -> String {
        describe(self.family, &self.change, dt, false)
    }

    /// The row's value as one number in base units, to sort rows by (a
    /// histogram: its observations per second; a new instance: none).
    pub fn magnitude(&self, dt: f64) -> Option<f64> {
        let factor = match Shape::of(self.family) {
            Shape::Plain { factor, .. }
            | Shape::Bytes { factor }
            | Shape::Time { factor, .. }
            | Shape::BytesPerSecond { factor } => factor,
            _ => 1.0,
        };
        match &self.change {
            Change::Rate(r) => r.map(|r| r * factor),
            Change::Level(v) => Some(*v as f64 * factor),
            Change::Observed(h) => h.as_ref().map(|h| h.count as f64 / dt),
            Change::Fell => None,
        }
        .filter(|v| !v.is_nan())
    }

    /// The change in JSON, in stored units: a counter's rate per second, a
    /// level (exactly: it is a stored integer), or a histogram's
    /// observations per second, sum per second and mean (`null` where there
    /// is none yet).
    pub fn json(&self, dt: f64) -> serde_json::Value {
        let num =
            |v: f64| serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into);
        match &self.change {
            Change::Rate(r) => r.map_or(serde_json::Value::Null, num),
            Change::Level(v) => u64::try_from(*v).map_or_else(
                |_| i64::try_from(*v).map_or(serde_json::Value::Null, Into::into),
                Into::into,
            ),
            Change::Observed(None) | Change::Fell => serde_json::Value::Null,
            Change::Observed(Some(h)) => serde_json::json!({
                "per_s": num(h.count as f64 / dt),
                "sum_per_s": num(h.sum as f64 / dt),
                "mean": if h.count > 0 { num(h.sum as f64 / h.count as f64) } else { serde_json::Value::Null },
                "buckets": h.buckets,
            }),
        }
    }
}

/// Writes one `--watch --json` line for `rows` (an interval of `dt`
/// seconds, ending with the read `cur`) to `out`: a family without
/// dimension has its value under its name (as a 1.0 counter always had);
/// one with a dimension, its instances' values by instance string (in a
/// directory's read, a series with labels by `instance{key=value,…}`: a
/// writer label keeps one instance's series apart). The line says the
/// segment's `generation`, or the directory's `segments` merged. Streamed,
/// a row at a time: the rows come family by family.
pub fn write_json(
    out: &mut impl std::io::Write,
    rows: &[Row<'_>],
    dt: f64,
    cur: &Read,
) -> std::io::Result<()> {
    crate::json::line(out, &Line { rows, dt, cur })
}

/// One `--watch --json` line (see [`write_json`]).
struct Line<'a> {
    rows: &'a [Row<'a>],
    dt: f64,
    cur: &'a Read,
}

impl Serialize for Line<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("interval_s", &self.dt)?;
        match &self.cur.scrape {
            Some(d) => m.serialize_entry("segments", &d.segments)?,
            None => m.serialize_entry("generation", &self.cur.snap.generation)?,
        }
        let merged = self.cur.scrape.is_some();
        m.serialize_entry(
            "rates",
            &Map(|| {
                self.rows
                    .chunk_by(|a, b| a.place.family() == b.place.family())
                    .map(|family| {
                        (
                            &family[0].family.name,
                            FamilyRates {
                                rows: family,
                                dt: self.dt,
                                merged,
                            },
                        )
                    })
            }),
        )?;
        m.end()
    }
}

/// The rates of one family's rows in a `--watch --json` line.
struct FamilyRates<'a> {
    rows: &'a [Row<'a>],
    dt: f64,
    merged: bool,
}

impl Serialize for FamilyRates<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.rows {
            [one] if one.member.instance.is_empty() && one.member.labels.is_empty() => {
                one.json(self.dt).serialize(s)
            }
            rows => s.collect_map(
                rows.iter()
                    .map(|r| (series_key(r.member, self.merged), r.json(self.dt))),
            ),
        }
    }
}

/// A row's key in its family's JSON: its instance string; in a merged
/// read, with its labels if it has any (`instance{key=value,…}`).
fn series_key(m: &Member, merged: bool) -> String {
    if !merged || m.labels.is_empty() {
        return m.instance.clone();
    }
    let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}{{{}}}", m.instance, labels.join(","))
}
