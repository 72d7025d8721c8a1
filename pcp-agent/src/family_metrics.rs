//! The PCP metrics and instance domains of a segment's metric families
//! (ABI 1.1; every 1.0 counter is a family of one value). Pure Rust, no
//! PCP library needed: tested on its own.
//!
//! A family `NAME` (PCP name [`perfabi::name::pcp`]: `perfabi.NAME`, dots
//! kept) is exported as:
//!
//! | family | metrics | instances |
//! |---|---|---|
//! | counter, gauge, peak | `perfabi.NAME` | one per member: the instance string, id the writer's instance number |
//! | | `perfabi.percpu.NAME` | `<instance>::cpuN` (a family without dimension: the CPU domain, `cpuN`) |
//! | histogram | `perfabi.NAME.bucket` | `<instance>::<low>-<high>` per member and bucket: observations per bucket, not cumulative (bcc and bpftrace's layout) |
//! | | `perfabi.NAME.count`, `perfabi.NAME.sum` | one per member |
//! | | `perfabi.percpu.NAME.count`, `.sum` | `<instance>::cpuN` |
//!
//! A family without dimension has no instance domain (`PM_INDOM_NULL`),
//! but for its buckets. No family can be named among the agent's own
//! metrics ([`RESERVED`]); the core's naming rules make the names of live
//! families distinct and never a node of one another (a family `a` and a
//! family `a.count` are never live together).
//!
//! Identifiers: each metric of a family is numbered by [`CounterNames`]
//! (saved, so kept across agent restarts) under the family's name, or
//! `NAME/count`, `NAME/sum` for a histogram's count and sum (`/` is in no
//! family name). Number `n` is the PMID `D.(2048 + n/1024).(n%1024)` for
//! the total and `D.(16 + n/1024).(n%1024)` per CPU — the PMIDs the 1.0
//! counters had as `perfabi.total.X` and `perfabi.counter.X` — and the
//! instance domains `D.(16 + 2n)` (total) and `D.(17 + 2n)` (per CPU).
//! Instance ids come from [`InstanceIds`]: an instance's id is the
//! writer's instance number when no other name had it, and no id is given
//! to two names while the agent runs.

use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::fmt::Write;

use perfabi::unit::{QUANTITY_PAGES, QUANTITY_PLAIN, QUANTITY_RATIO};
use perfabi::{Buckets, Family, Kind as FamilyKind, Member, Unit, ValueType};
use perfabi_reader::directory::merge::writer_label_of;

use std::borrow::Cow;

use crate::catalog::{Indom, Kind, Metric, Part, Text};
use crate::counter_names::CounterNames;
use crate::ffi::{self, pmUnits, PM_SEM_COUNTER, PM_SEM_INSTANT, PM_TYPE_64, PM_TYPE_U64};
use crate::namespace::valid_component;

/// First cluster of the per-CPU metrics, and of the totals.
pub const PER_CPU_CLUSTER: u32 = 16;
/// First cluster of the totals (`perfabi.NAME`).
pub const TOTAL_CLUSTER: u32 = 2048;
const _: () =
    assert!(crate::counter_names::MAX_COUNTERS == (TOTAL_CLUSTER - PER_CPU_CLUSTER) * 1024);
/// Serial number of the first family instance domain.
pub const FIRST_FAMILY_INDOM: u32 = 16;
const _: () = assert!(FIRST_FAMILY_INDOM + 2 * crate::counter_names::MAX_COUNTERS <= 1 << 22);

/// First name components that are the agent's own (`perfabi.segment.*`,
/// `perfabi.damon.*`, `perfabi.percpu.*`): a family named below one is
/// left out.
pub const RESERVED: [&str; 3] = ["segment", "damon", "percpu"];

/// The most instances the family instance domains hold in all: past it,
/// families (their per-CPU metrics first) are left out, and said. A
/// segment may have 65,536 members of up to 32 buckets on 8,192 CPUs.
pub const MAX_FAMILY_INSTANCES: usize = 1 << 20;

/// What the instances of a family instance domain are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// One per member.
    Members,
    /// One per member and histogram bucket.
    Buckets,
    /// One per member and CPU.
    PerCpu,
}

/// Whose series a family's members are, which says how its instances are
/// named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Series<'a> {
    /// One segment's members: an instance per member, named by its
    /// instance string.
    #[default]
    Segment,
    /// A directory's merged series (`spec/PERFABI.md` §15.4). Where the
    /// writers are kept apart ([`writer_label_of`]: the agent's writer
    /// label, or `writer` for a gauge of mode `ALL`), the writer
    /// (`<name>.<pid>`, the value of that label) is part of the instance
    /// name, `<instance>::<writer>` (just `<writer>` for a family without
    /// dimension, which then has an instance domain too).
    Merged {
        /// The agent's writer label (`--writer-label`), if any.
        writer_label: Option<&'a str>,
    },
}

impl<'a> Series<'a> {
    /// The label key `f`'s writers are kept apart under, if they are.
    fn apart(self, f: &Family) -> Option<&'a str> {
        match self {
            Series::Segment => None,
            Series::Merged { writer_label } => writer_label_of(writer_label, f),
        }
    }

    /// Whether `f` is one value, without instance domain (but for its
    /// buckets).
    pub fn singular(self, f: &Family) -> bool {
        f.dimension.is_empty() && self.apart(f).is_none()
    }

    /// The instance name of member `m` of `f` (before a bucket's or a
    /// CPU's part).
    pub fn instance(self, f: &Family, m: &Member) -> String {
        let writer = self
            .apart(f)
            .and_then(|k| m.labels.iter().rev().find(|(key, _)| key == k));
        match writer {
            Some((_, w)) if f.dimension.is_empty() => w.clone(),
            Some((_, w)) => format!("{}::{w}", m.instance),
            None => m.instance.clone(),
        }
    }
}

/// One instance of a family instance domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inst {
    /// Instance id.
    pub id: c_int,
    /// Instance name.
    pub name: String,
    /// Index of the member in the family's `members`.
    pub member: u32,
    /// The bucket (`Role::Buckets`) or CPU (`Role::PerCpu`); else 0.
    pub sub: u32,
}

/// A family instance domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyIndom {
    /// Serial number.
    pub serial: u32,
    /// Index of the family in the snapshot's families.
    pub family: usize,
    /// What its instances are.
    pub role: Role,
    /// Its instances.
    pub instances: Vec<Inst>,
}

/// Instance ids of one instance domain, for the agent's life: a name keeps
/// its id, and an id is never given to another name.
#[derive(Debug, Default)]
struct IdMap {
    by_name: HashMap<String, c_int>,
    taken: HashSet<c_int>,
    /// The next id to try when a name cannot have the one it prefers.
    next: c_int,
    /// Ids below this were given out to names since forgotten: never
    /// given again.
    floor: c_int,
    /// One more than the largest id given out.
    top: c_int,
}

impl IdMap {
    /// The id of `name`: its own if it has one, else `preferred` if that is
    /// free (and never given out), else the next free one. `None` once ids
    /// run out.
    fn id(&mut self, name: &str, preferred: Option<u64>) -> Option<c_int> {
        if let Some(&id) = self.by_name.get(name) {
            return Some(id);
        }
        let want = preferred
            .and_then(|p| c_int::try_from(p).ok())
            .filter(|&p| p >= self.floor && !self.taken.contains(&p));
        let id = match want {
            Some(p) => p,
            None => loop {
                let c = self.next.max(self.floor);
                self.next = c.checked_add(1)?;
                if !self.taken.contains(&c) {
                    break c;
                }
            },
        };
        self.taken.insert(id);
        self.by_name.insert(name.to_string(), id);
        self.top = self.top.max(id.saturating_add(1));
        Some(id)
    }

    /// Forgets the names not in `live` if the map has grown well past
    /// them (a writer that churns instance strings): their ids are never
    /// given again, and a name that comes back gets a new one.
    fn trim(&mut self, live: &HashSet<&str>) {
        if self.by_name.len() <= 2 * live.len() + 4096 {
            return;
        }
        self.by_name.retain(|n, _| live.contains(n.as_str()));
        self.taken = self.by_name.values().copied().collect();
        self.floor = self.top;
        self.next = self.next.max(self.floor);
    }

    fn len(&self) -> usize {
        self.by_name.len()
    }
}

/// The instance ids of every family instance domain, by serial number.
#[derive(Debug, Default)]
pub struct InstanceIds {
    maps: HashMap<u32, IdMap>,
}

impl InstanceIds {
    /// Names remembered in all (a measure of the memory held).
    pub fn len(&self) -> usize {
        self.maps.values().map(IdMap::len).sum()
    }

    /// Whether no name is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name id `id` of instance domain `serial` was given, if it is
    /// remembered (a search: for the rare lookup of a gone instance).
    pub fn name_of(&self, serial: u32, id: c_int) -> Option<&str> {
        let m = self.maps.get(&serial)?;
        if !m.taken.contains(&id) {
            return None;
        }
        m.by_name
            .iter()
            .find(|(_, &i)| i == id)
            .map(|(n, _)| n.as_str())
    }
}

/// The metrics and instance domains of a segment's families.
#[derive(Debug, Default)]
pub struct Built {
    /// Metrics, totals first.
    pub metrics: Vec<Metric>,
    /// Family instance domains.
    pub indoms: Vec<FamilyIndom>,
    /// Why families (or parts of them) were left out, one line each.
    pub left_out: Vec<String>,
}

/// PCP units of a family's unit: dimensions and scales map one to one
/// (PCP's space scale is in powers of 1024 from bytes, its time scale
/// from nanoseconds to hours, its count scale in powers of ten, as the
/// ABI's); pages are a count, a ratio has no dimension (the label `unit`
/// says which, see [`unit_label`]).
pub fn pm_units(u: &Unit) -> pmUnits {
    pmUnits::new(
        i32::from(u.dim_space),
        i32::from(u.dim_time),
        i32::from(u.dim_count),
        u32::from(u.scale_space),
        u32::from(u.scale_time),
        i32::from(u.scale_count),
    )
}

/// A unit PCP's units do not say all of: pages, a ratio, or a 1.0 unit
/// string that names no unit (`widgets`). Given as the metric's label
/// `unit`.
pub fn unit_label(f: &Family) -> Option<String> {
    match f.unit.quantity {
        QUANTITY_PAGES => Some("pages".into()),
        QUANTITY_RATIO => Some("ratio".into()),
        QUANTITY_PLAIN if f.unit == Unit::NONE && !f.unit_text.is_empty() => {
            (Unit::from_legacy(&f.unit_text).is_none()).then(|| f.unit_text.clone())
        }
        _ => None,
    }
}

const COUNT_UNITS: pmUnits = pmUnits::new(0, 0, 1, 0, 0, 0);

/// Why a family cannot be served under its name, if it cannot.
fn unservable(name: &str) -> Option<String> {
    let first = name.split('.').next().unwrap_or_default();
    if RESERVED.contains(&first) {
        return Some(format!(
            "perfabi.{name} would be among the agent's own metrics (perfabi.segment, \
             perfabi.damon, perfabi.percpu)"
        ));
    }
    if !name.split('.').all(valid_component) {
        return Some(format!(
            "perfabi.{name} is no valid PCP name (each part must start with a letter)"
        ));
    }
    None
}

/// A bucket's bounds: the least and the greatest value it holds (`None`:
/// no greatest, the last bucket).
pub fn bucket_bounds(b: &Buckets, k: usize) -> (u64, Option<u64>) {
    let low = match k {
        0 => 0,
        _ => b.bound(k - 1).map_or(0, |x| x.saturating_add(1)),
    };
    (low, b.bound(k))
}

/// A bucket's instance name part: `low-high`, `low-inf` for the last.
pub fn bucket_name(b: &Buckets, k: usize) -> String {
    match bucket_bounds(b, k) {
        (low, Some(high)) => format!("{low}-{high}"),
        (low, None) => format!("{low}-inf"),
    }
}

/// The metrics and instance domains of `families` (a snapshot's, on
/// `nr_cpus` CPUs; no per-CPU metrics without CPUs, as for a directory's
/// merged values) for `domain`: numbers from `names`, instance ids from
/// `ids`, at most `budget` instances in the family instance domains,
/// instances named as `series` says.
pub fn build(
    domain: u32,
    families: &[Family],
    nr_cpus: usize,
    names: &mut CounterNames,
    ids: &mut InstanceIds,
    budget: usize,
    series: Series<'_>,
) -> Built {
    let mut out = Built::default();
    let mut left = budget;
    // (family, numbers of value or bucket, count, sum)
    let mut served: Vec<(usize, u32, u32, u32)> = Vec::new();
    for (fi, f) in families.iter().enumerate() {
        if let Some(why) = unservable(&f.name) {
            out.left_out
                .push(format!("family {} left out: {why}", f.name));
            continue;
        }
        let hist = f
            .buckets
            .as_ref()
            .filter(|_| f.kind == FamilyKind::Histogram);
        let mut number = |key: &str| names.get(key).map(|(n, _)| n);
        let numbers = match hist {
            None => number(&f.name).map(|n| (n, n, n)),
            Some(_) => (|| {
                Some((
                    number(&f.name)?,
                    number(&format!("{}/count", f.name))?,
                    number(&format!("{}/sum", f.name))?,
                ))
            })(),
        };
        let Some((n0, nc, ns)) = numbers else {
            out.left_out.push(format!(
                "family {} left out: the agent has numbered {} names, the most it can",
                f.name,
                crate::counter_names::MAX_COUNTERS
            ));
            continue;
        };
        let singular = series.singular(f);
        let need = match hist {
            Some(b) => f.members.len() * b.count() + if singular { 0 } else { f.members.len() },
            None if singular => 0,
            None => f.members.len(),
        };
        if need > left {
            out.left_out.push(format!(
                "family {} left out: its {need} instances would pass the agent's bound of \
                 {budget} family instances",
                f.name
            ));
            continue;
        }
        left -= need;
        let total = |n: u32| ffi::pmid(domain, TOTAL_CLUSTER + n / 1024, n % 1024);
        let metric = |name: String, pmid, indom, part, units, sem, type_| Metric {
            name,
            pmid,
            type_,
            indom,
            sem,
            units,
            text: Text::Family,
            kind: Kind::Family {
                family: fi,
                part,
                per_cpu: false,
            },
        };
        let base = perfabi::name::pcp(&f.name);
        match hist {
            Some(b) => {
                let bucket_indom = FIRST_FAMILY_INDOM + 2 * n0;
                let list = f
                    .members
                    .iter()
                    .enumerate()
                    .flat_map(|(mi, m)| {
                        (0..b.count()).map(move |k| {
                            let range = bucket_name(b, k);
                            let name = if singular {
                                range
                            } else {
                                format!("{}::{range}", series.instance(f, m))
                            };
                            let preferred = u64::from(m.instance_id) * b.count() as u64 + k as u64;
                            (name, preferred, mi as u32, k as u32)
                        })
                    })
                    .collect();
                out.indoms
                    .push(indom(ids, bucket_indom, fi, Role::Buckets, list));
                let members_indom = (!singular).then(|| {
                    let serial = FIRST_FAMILY_INDOM + 2 * nc;
                    out.indoms
                        .push(indom(ids, serial, fi, Role::Members, members(f, series)));
                    serial
                });
                out.metrics.extend([
                    metric(
                        format!("{base}.bucket"),
                        total(n0),
                        Some(bucket_indom),
                        Part::Bucket,
                        COUNT_UNITS,
                        PM_SEM_COUNTER,
                        PM_TYPE_U64,
                    ),
                    metric(
                        format!("{base}.count"),
                        total(nc),
                        members_indom,
                        Part::Count,
                        COUNT_UNITS,
                        PM_SEM_COUNTER,
                        PM_TYPE_U64,
                    ),
                    metric(
                        format!("{base}.sum"),
                        total(ns),
                        members_indom,
                        Part::Sum,
                        pm_units(&f.unit),
                        PM_SEM_COUNTER,
                        PM_TYPE_U64,
                    ),
                ]);
            }
            None => {
                let members_indom = (!singular).then(|| {
                    let serial = FIRST_FAMILY_INDOM + 2 * n0;
                    out.indoms
                        .push(indom(ids, serial, fi, Role::Members, members(f, series)));
                    serial
                });
                out.metrics.push(metric(
                    base,
                    total(n0),
                    members_indom,
                    Part::Value,
                    pm_units(&f.unit),
                    semantics(f.kind),
                    value_type(f),
                ));
            }
        }
        served.push((fi, n0, nc, ns));
    }
    // Per-CPU metrics, within what the totals left of the budget.
    if nr_cpus == 0 {
        return out;
    }
    for (fi, n0, nc, ns) in served {
        let f = &families[fi];
        let singular = series.singular(f);
        let need = if singular {
            0
        } else {
            f.members.len().saturating_mul(nr_cpus)
        };
        if need > left {
            out.left_out.push(format!(
                "per-CPU metrics of family {} left out: their {need} instances would pass \
                 the agent's bound of {budget} family instances",
                f.name
            ));
            continue;
        }
        left -= need;
        let per_cpu = |n: u32| ffi::pmid(domain, PER_CPU_CLUSTER + n / 1024, n % 1024);
        let hist = f.kind == FamilyKind::Histogram && f.buckets.is_some();
        let n = if hist { nc } else { n0 };
        let cpu_indom = if singular {
            Indom::Cpu as u32
        } else {
            let serial = FIRST_FAMILY_INDOM + 2 * n + 1;
            let list = f
                .members
                .iter()
                .enumerate()
                .flat_map(|(mi, m)| {
                    (0..nr_cpus).map(move |c| {
                        let preferred = u64::from(m.instance_id) * nr_cpus as u64 + c as u64;
                        (
                            format!("{}::cpu{c}", series.instance(f, m)),
                            preferred,
                            mi as u32,
                            c as u32,
                        )
                    })
                })
                .collect();
            out.indoms.push(indom(ids, serial, fi, Role::PerCpu, list));
            serial
        };
        let base = format!("perfabi.percpu.{}", f.name);
        let metric = |name, pmid, part, units, sem, type_| Metric {
            name,
            pmid,
            type_,
            indom: Some(cpu_indom),
            sem,
            units,
            text: Text::Family,
            kind: Kind::Family {
                family: fi,
                part,
                per_cpu: true,
            },
        };
        if hist {
            out.metrics.push(metric(
                format!("{base}.count"),
                per_cpu(nc),
                Part::Count,
                COUNT_UNITS,
                PM_SEM_COUNTER,
                PM_TYPE_U64,
            ));
            out.metrics.push(metric(
                format!("{base}.sum"),
                per_cpu(ns),
                Part::Sum,
                pm_units(&f.unit),
                PM_SEM_COUNTER,
                PM_TYPE_U64,
            ));
        } else {
            out.metrics.push(metric(
                base,
                per_cpu(n0),
                Part::Value,
                pm_units(&f.unit),
                semantics(f.kind),
                value_type(f),
            ));
        }
    }
    out
}

/// A family's members as instance list entries (name, preferred id,
/// member, sub).
fn members(f: &Family, series: Series<'_>) -> Vec<(String, u64, u32, u32)> {
    f.members
        .iter()
        .enumerate()
        .map(|(mi, m)| {
            (
                series.instance(f, m),
                u64::from(m.instance_id),
                mi as u32,
                0,
            )
        })
        .collect()
}

/// The instance domain `serial` of family `fi` with the instances `list`,
/// ids from `ids`. An instance that can get no id (ids ran out) is left
/// out.
fn indom(
    ids: &mut InstanceIds,
    serial: u32,
    family: usize,
    role: Role,
    list: Vec<(String, u64, u32, u32)>,
) -> FamilyIndom {
    let map = ids.maps.entry(serial).or_default();
    let instances: Vec<Inst> = list
        .into_iter()
        .filter_map(|(name, preferred, member, sub)| {
            Some(Inst {
                id: map.id(&name, Some(preferred))?,
                name,
                member,
                sub,
            })
        })
        .collect();
    let live: HashSet<&str> = instances.iter().map(|i| i.name.as_str()).collect();
    map.trim(&live);
    FamilyIndom {
        serial,
        family,
        role,
        instances,
    }
}

fn semantics(k: FamilyKind) -> c_int {
    match k {
        FamilyKind::Counter | FamilyKind::Histogram => PM_SEM_COUNTER,
        FamilyKind::Gauge | FamilyKind::Peak => PM_SEM_INSTANT,
    }
}

fn value_type(f: &Family) -> c_int {
    match f.value_type {
        ValueType::U64 => PM_TYPE_U64,
        ValueType::I64 => PM_TYPE_64,
    }
}

/// `"` and `\` escaped, control characters as `\u00XX`: a JSON string's
/// inside (the ABI's instance strings and label values have none of
/// these, but a label is no place to trust that).
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON object of `pairs` (keys are label keys, values JSON already).
fn json_object(pairs: &[(String, String)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}:{v}", json_str(k)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// The labels of a family's metric: its kind, a histogram's statistic,
/// and the unit where PCP's units do not say it all.
pub fn metric_labels(f: &Family, part: Part) -> String {
    let mut pairs = vec![("kind".to_string(), json_str(f.kind.as_str()))];
    let statistic = match part {
        Part::Value => None,
        Part::Bucket => Some("bucket"),
        Part::Count => Some("count"),
        Part::Sum => Some("sum"),
    };
    if let Some(s) = statistic {
        pairs.push(("statistic".into(), json_str(s)));
    }
    if let Some(u) = unit_label(f) {
        if !matches!(part, Part::Bucket | Part::Count) {
            pairs.push(("unit".into(), json_str(&u)));
        }
    }
    json_object(&pairs)
}

/// The labels of an instance of a family instance domain: the family's
/// dimension and the member's instance string, the member's labels, and
/// a bucket's bounds or the CPU.
pub fn instance_labels(f: &Family, role: Role, member: u32, sub: u32) -> Option<String> {
    let m = f.members.get(member as usize)?;
    let mut pairs = Vec::new();
    if !f.dimension.is_empty() {
        pairs.push((f.dimension.clone(), json_str(&m.instance)));
    }
    for (k, v) in &m.labels {
        pairs.push((k.clone(), json_str(v)));
    }
    match role {
        Role::Members => {}
        Role::Buckets => {
            let b = f.buckets.as_ref()?;
            let (low, high) = bucket_bounds(b, sub as usize);
            pairs.push(("lower_bound".into(), low.to_string()));
            if let Some(h) = high {
                pairs.push(("upper_bound".into(), h.to_string()));
            }
        }
        Role::PerCpu => pairs.push(("cpu".into(), sub.to_string())),
    }
    Some(json_object(&pairs))
}

/// The labels of CPU `cpu` of the CPU instance domain.
pub fn cpu_labels(cpu: u32) -> String {
    format!("{{\"cpu\":{cpu}}}")
}

fn kind_phrase(f: &Family) -> String {
    match f.kind {
        FamilyKind::Counter => "a counter (it only grows; its total is the sum over CPUs)".into(),
        FamilyKind::Gauge => {
            "a gauge (a level; its total is the sum of the per-CPU contributions)".into()
        }
        FamilyKind::Peak => "a peak (a high-water mark; its total is the maximum over CPUs, \
                             and the writer may reset it to 0)"
            .into(),
        FamilyKind::Histogram => match &f.buckets {
            Some(b @ Buckets::Log2 { first, .. }) => format!(
                "a histogram of {} buckets with bounds 2^{first}, 2^{}, ... and +inf",
                b.count(),
                first + 1
            ),
            Some(b) => format!(
                "a histogram of {} buckets with bounds {} and +inf",
                b.count(),
                (0..b.count() - 1)
                    .filter_map(|k| b.bound(k))
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "a histogram".into(),
        },
    }
}

/// One-line and long help of the metric serving `part` of family `f` (per
/// CPU or not).
pub fn help(f: &Family, part: Part, per_cpu: bool) -> (String, String) {
    let what = if f.help.is_empty() {
        f.name.clone()
    } else {
        f.help.clone()
    };
    let total = match f.kind {
        FamilyKind::Peak => "the maximum over CPUs",
        _ => "summed over CPUs",
    };
    let mut one = match part {
        Part::Value if f.help.is_empty() => format!("{what}, {total}"),
        Part::Value => what,
        Part::Bucket => format!("{what}: observations per bucket"),
        Part::Count => format!("{what}: number of observations"),
        Part::Sum => format!("{what}: sum of the observations"),
    };
    if per_cpu {
        one += ", on each CPU";
    }
    let signed = match f.value_type {
        ValueType::U64 => "unsigned",
        ValueType::I64 => "signed",
    };
    let unit = if f.unit_text.is_empty() {
        "none".to_string()
    } else {
        f.unit_text.clone()
    };
    let pcp_unit = match unit_label(f) {
        Some(u) => format!(" (PCP's units cannot say \"{u}\": the label unit does)"),
        None => String::new(),
    };
    let origin = match f.origin {
        perfabi::family::Origin::Entry(_) => " (an ABI 1.0 counter: a family of one value)",
        perfabi::family::Origin::Family(_) => "",
    };
    let mut long = format!(
        "{one}.\nperfabi family \"{}\"{origin}: {}; unit {unit}{pcp_unit}; {signed} 64-bit values.\n",
        f.name,
        kind_phrase(f)
    );
    let dim = &f.dimension;
    let pcp = perfabi::name::pcp(&f.name);
    let inst = match (part, per_cpu, dim.is_empty()) {
        (Part::Bucket, _, true) => {
            "One instance per bucket, named LOW-HIGH (the least and greatest value it \
             holds; HIGH is \"inf\" for the last), with labels lower_bound and upper_bound."
                .to_string()
        }
        (Part::Bucket, _, false) => format!(
            "One instance per {dim} and bucket, named <{dim}>::LOW-HIGH (the least and \
             greatest value the bucket holds; HIGH is \"inf\" for the last), with labels \
             {dim}, lower_bound and upper_bound."
        ),
        (_, true, true) => "One instance per CPU, named cpuN (label cpu).".to_string(),
        (_, true, false) => {
            format!("One instance per {dim} and CPU, named <{dim}>::cpuN (labels {dim} and cpu).")
        }
        (_, false, true) => "A single value.".to_string(),
        (_, false, false) => format!(
            "One instance per {dim}, named by it (label {dim}); its id is the writer's \
             instance number, and no id is given to another {dim} while the agent runs."
        ),
    };
    long += &inst;
    let mut keys: Vec<&str> = f
        .members
        .iter()
        .flat_map(|m| m.labels.iter().map(|(k, _)| k.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    if !keys.is_empty() {
        let _ = write!(
            long,
            "\nInstances also carry the writer's labels: {}.",
            keys.join(", ")
        );
    }
    let _ = write!(long, "\nMetric label kind: {}.", f.kind.as_str());
    match part {
        Part::Value => {}
        Part::Bucket => {
            let _ = write!(
                long,
                "\nEach value counts the observations that fell in its bucket (not \
                 cumulative, as bcc's and bpftrace's histograms); their number and sum \
                 are {pcp}.count and {pcp}.sum."
            );
        }
        Part::Count | Part::Sum => {
            let _ = write!(
                long,
                "\nThe mean observation is {pcp}.sum / {pcp}.count; the buckets are \
                 {pcp}.bucket."
            );
        }
    }
    if per_cpu {
        long += "\nEach CPU's own contribution; the total is the metric without percpu.";
    }
    (one, long)
}

/// One-line and long help of a family instance domain.
pub fn indom_help(f: &Family, role: Role) -> (String, String) {
    let pcp = perfabi::name::pcp(&f.name);
    let dim = if f.dimension.is_empty() {
        "value"
    } else {
        f.dimension.as_str()
    };
    match role {
        Role::Members => (
            format!("instances of {pcp}: one per {dim}"),
            format!(
                "One instance per {dim} of the perfabi family \"{}\", named by it; the id is \
                 the writer's instance number where no other name had it, and no id is given \
                 to another name while the agent runs.",
                f.name
            ),
        ),
        Role::Buckets => (
            format!("buckets of {pcp}.bucket"),
            format!(
                "One instance per {dim} and histogram bucket of the perfabi family \"{}\", \
                 named <{dim}>::LOW-HIGH (LOW-HIGH alone without dimension), LOW and HIGH \
                 the least and greatest value the bucket holds, HIGH \"inf\" for the last.",
                f.name
            ),
        ),
        Role::PerCpu => (
            format!(
                "instances of perfabi.percpu.{}: one per {dim} and CPU",
                f.name
            ),
            format!(
                "One instance per {dim} of the perfabi family \"{}\" and CPU, named \
                 <{dim}>::cpuN.",
                f.name
            ),
        ),
    }
}

/// One-line and long help of metric `m`; `families` are those the metric
/// was made from. `None` if its family is not there.
pub fn metric_help(
    m: &Metric,
    families: &[Family],
) -> Option<(Cow<'static, str>, Cow<'static, str>)> {
    match (m.text, m.kind) {
        (Text::Fixed(one, long), _) => Some((Cow::Borrowed(one), Cow::Borrowed(long))),
        (
            Text::Family,
            Kind::Family {
                family,
                part,
                per_cpu,
            },
        ) => {
            let (one, long) = help(families.get(family)?, part, per_cpu);
            Some((Cow::Owned(one), Cow::Owned(long)))
        }
        (Text::Family, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::family::{Member, Origin};
    use perfabi::{Instance, Semantics};

    fn family(name: &str, dim: &str, kind: FamilyKind, members: &[(&str, u32)]) -> Family {
        Family {
            origin: Origin::Family(0),
            reg_id: 1,
            name: name.into(),
            help: format!("help of {name}"),
            dimension: dim.into(),
            kind,
            unit: Unit::KIB,
            unit_text: Unit::KIB.to_string(),
            value_type: ValueType::U64,
            buckets: (kind == FamilyKind::Histogram).then_some(Buckets::Log2 { first: 10, n: 3 }),
            gauge_mode: perfabi::GaugeMode::Sum,
            members: members
                .iter()
                .enumerate()
                .map(|(i, (inst, id))| Member {
                    slot: Some(i as u32),
                    reg_id: 10 + i as u64,
                    instance: inst.to_string(),
                    instance_id: *id,
                    labels: vec![("model".into(), "virtio disk".into())],
                    value_slot: 5 * i as u32,
                    words: 5,
                })
                .collect(),
        }
    }

    fn names(b: &Built) -> Vec<(&str, Option<u32>)> {
        b.metrics
            .iter()
            .map(|m| (m.name.as_str(), m.indom))
            .collect()
    }

    /// A directory's merged series (spec §15.7): where writers are kept
    /// apart (a writer label, or a gauge of mode ALL), the writer is part of
    /// the instance name, and a family without dimension gets an instance
    /// domain; merged values (no CPUs) have no per-CPU metrics.
    #[test]
    fn merged_series_apart_by_writer_are_named_by_instance_and_writer() {
        let apart = |mut f: Family, key: &str| {
            for (m, w) in f.members.iter_mut().zip(["w.1", "w.2"]) {
                m.labels.push((key.into(), w.into()));
            }
            f
        };
        let mut all = family("pool", "", FamilyKind::Gauge, &[("", 0), ("", 0)]);
        all.gauge_mode = perfabi::GaugeMode::All;
        let fams = [
            apart(all, "writer"),
            family("hits", "", FamilyKind::Counter, &[("", 0)]),
            apart(
                family(
                    "reads",
                    "device",
                    FamilyKind::Histogram,
                    &[("sda", 0), ("sda", 0)],
                ),
                "worker",
            ),
        ];
        let instances = |b: &Built, serial: u32| -> Vec<String> {
            let d = b.indoms.iter().find(|d| d.serial == serial).unwrap();
            d.instances.iter().map(|i| i.name.clone()).collect()
        };
        // No writer label: only the gauge of mode ALL is apart, by `writer`.
        let mut n = CounterNames::default();
        let mut ids = InstanceIds::default();
        let series = Series::Merged { writer_label: None };
        let b = build(
            502,
            &fams,
            0,
            &mut n,
            &mut ids,
            MAX_FAMILY_INSTANCES,
            series,
        );
        assert_eq!(
            names(&b),
            [
                ("perfabi.pool", Some(16)),
                ("perfabi.hits", None),
                ("perfabi.reads.bucket", Some(16 + 4)),
                ("perfabi.reads.count", Some(16 + 6)),
                ("perfabi.reads.sum", Some(16 + 6)),
            ],
            "no per-CPU metrics"
        );
        assert_eq!(instances(&b, 16), ["w.1", "w.2"]);
        // `worker` is no writer label here: the instance is the device.
        assert_eq!(instances(&b, 16 + 6), ["sda", "sda"]);
        // With the writer label `worker`, every family is apart by it.
        let mut ids = InstanceIds::default();
        let series = Series::Merged {
            writer_label: Some("worker"),
        };
        let b = build(
            502,
            &fams,
            0,
            &mut n,
            &mut ids,
            MAX_FAMILY_INSTANCES,
            series,
        );
        assert_eq!(instances(&b, 16 + 6), ["sda::w.1", "sda::w.2"]);
        assert_eq!(
            instances(&b, 16 + 4)[..4],
            [
                "sda::w.1::0-1024",
                "sda::w.1::1025-2048",
                "sda::w.1::2049-inf",
                "sda::w.2::0-1024"
            ]
        );
        assert!(
            names(&b).contains(&("perfabi.hits", Some(16 + 2))),
            "{:?}",
            names(&b)
        );
        let labelled = Series::Merged {
            writer_label: Some("worker"),
        };
        assert!(!labelled.singular(&fams[1]));
        assert!(Series::Segment.singular(&fams[1]));
    }

    #[test]
    fn each_family_is_one_metric_with_its_members_as_instances() {
        let legacy = Family::from_entry(&Instance {
            slot: 0,
            reg_id: 1,
            name: "app.requests".into(),
            unit: "count".into(),
            semantics: Semantics::Counter,
            value_type: ValueType::U64,
        });
        let fams = [
            legacy,
            family(
                "disk.read",
                "device",
                FamilyKind::Counter,
                &[("sda", 0), ("sdb", 3)],
            ),
            family("disk.lat", "device", FamilyKind::Histogram, &[("sda", 1)]),
            family("segment.mine", "", FamilyKind::Gauge, &[("", 0)]),
            family("x._y", "", FamilyKind::Gauge, &[("", 0)]),
        ];
        let mut n = CounterNames::default();
        let mut ids = InstanceIds::default();
        let b = build(
            502,
            &fams,
            2,
            &mut n,
            &mut ids,
            MAX_FAMILY_INSTANCES,
            Series::Segment,
        );
        assert_eq!(
            names(&b),
            [
                ("perfabi.app.requests", None),
                ("perfabi.disk.read", Some(16 + 2)),
                ("perfabi.disk.lat.bucket", Some(16 + 4)),
                ("perfabi.disk.lat.count", Some(16 + 6)),
                ("perfabi.disk.lat.sum", Some(16 + 6)),
                ("perfabi.percpu.app.requests", Some(0)),
                ("perfabi.percpu.disk.read", Some(16 + 3)),
                ("perfabi.percpu.disk.lat.count", Some(16 + 7)),
                ("perfabi.percpu.disk.lat.sum", Some(16 + 7)),
            ]
        );
        assert_eq!(b.left_out.len(), 2, "{:?}", b.left_out);
        assert!(b.left_out[0].contains("among the agent's own metrics"));
        assert!(b.left_out[1].contains("no valid PCP name"));
        // The 1.0 counter keeps the PMIDs perfabi.total.X / perfabi.counter.X had.
        assert_eq!(b.metrics[0].pmid, ffi::pmid(502, 2048, 0));
        assert_eq!(b.metrics[5].pmid, ffi::pmid(502, 16, 0));
        assert_eq!(b.metrics[0].units, COUNT_UNITS);
        // Units with scale: KiB is PCP's Kbyte.
        assert_eq!(b.metrics[1].units, pmUnits::new(1, 0, 0, 1, 0, 0));
        assert_eq!(
            b.metrics[2].units, COUNT_UNITS,
            "buckets count observations"
        );
        assert_eq!(b.metrics[4].units, pmUnits::new(1, 0, 0, 1, 0, 0));
        let insts = |serial: u32| -> Vec<(c_int, &str)> {
            b.indoms
                .iter()
                .find(|d| d.serial == serial)
                .unwrap()
                .instances
                .iter()
                .map(|i| (i.id, i.name.as_str()))
                .collect()
        };
        assert_eq!(insts(18), [(0, "sda"), (3, "sdb")], "ids are the writer's");
        assert_eq!(
            insts(20),
            [
                (3, "sda::0-1024"),
                (4, "sda::1025-2048"),
                (5, "sda::2049-inf")
            ]
        );
        assert_eq!(
            insts(19),
            [
                (0, "sda::cpu0"),
                (1, "sda::cpu1"),
                (6, "sdb::cpu0"),
                (7, "sdb::cpu1")
            ]
        );
        let mut pmids: Vec<_> = b.metrics.iter().map(|m| m.pmid).collect();
        pmids.sort_unstable();
        pmids.dedup();
        assert_eq!(pmids.len(), b.metrics.len());
    }

    #[test]
    fn an_id_is_never_given_to_another_name_and_a_name_keeps_its_id() {
        let mut n = CounterNames::default();
        let mut ids = InstanceIds::default();
        let f = family("d", "device", FamilyKind::Gauge, &[("sda", 0), ("sdb", 1)]);
        build(
            502,
            &[f],
            1,
            &mut n,
            &mut ids,
            MAX_FAMILY_INSTANCES,
            Series::Segment,
        );
        // A new writer numbers sdc 0 and sda 1: sda keeps 0, sdc cannot
        // have it, nor sdb's 1.
        let f = family(
            "d",
            "device",
            FamilyKind::Gauge,
            &[("sdc", 0), ("sda", 1), ("sdb", 2)],
        );
        let b = build(
            502,
            &[f],
            1,
            &mut n,
            &mut ids,
            MAX_FAMILY_INSTANCES,
            Series::Segment,
        );
        let got: Vec<_> = b.indoms[0]
            .instances
            .iter()
            .map(|i| (i.name.as_str(), i.id))
            .collect();
        assert_eq!(got, [("sdc", 2), ("sda", 0), ("sdb", 1)]);
        assert_eq!(ids.name_of(16, 2), Some("sdc"));
        assert_eq!(ids.name_of(16, 9), None);
        assert_eq!(ids.name_of(99, 0), None);
    }

    #[test]
    fn forgotten_names_never_give_their_ids_again() {
        let mut m = IdMap::default();
        for i in 0..5000u64 {
            m.id(&format!("n{i}"), Some(i)).unwrap();
        }
        let live: HashSet<&str> = ["n7"].into_iter().collect();
        m.trim(&live);
        assert_eq!(m.len(), 1);
        assert_eq!(m.id("n7", Some(99)), Some(7));
        assert_eq!(m.id("other", Some(3)), Some(5000), "3 was given out once");
        assert_eq!(
            m.id("n3", Some(3)),
            Some(5001),
            "a name forgotten comes back anew"
        );
    }

    #[test]
    fn the_instance_budget_leaves_out_per_cpu_metrics_first() {
        let mut n = CounterNames::default();
        let mut ids = InstanceIds::default();
        let f = family("d", "device", FamilyKind::Gauge, &[("sda", 0), ("sdb", 1)]);
        let b = build(502, &[f], 4, &mut n, &mut ids, 5, Series::Segment);
        assert_eq!(names(&b), [("perfabi.d", Some(16))]);
        assert!(b.left_out[0].starts_with("per-CPU metrics of family d left out"));
        let f = family("e", "device", FamilyKind::Gauge, &[("sda", 0), ("sdb", 1)]);
        let b = build(502, &[f], 4, &mut n, &mut ids, 1, Series::Segment);
        assert!(b.metrics.is_empty());
        assert!(b.left_out[0].starts_with("family e left out"));
    }

    #[test]
    fn labels_and_help_say_kind_unit_dimension_and_bounds() {
        let f = family("disk.lat", "device", FamilyKind::Histogram, &[("sda", 1)]);
        assert_eq!(
            metric_labels(&f, Part::Bucket),
            r#"{"kind":"histogram","statistic":"bucket"}"#
        );
        assert_eq!(
            instance_labels(&f, Role::Buckets, 0, 2).unwrap(),
            r#"{"device":"sda","model":"virtio disk","lower_bound":2049}"#
        );
        assert_eq!(
            instance_labels(&f, Role::Buckets, 0, 0).unwrap(),
            r#"{"device":"sda","model":"virtio disk","lower_bound":0,"upper_bound":1024}"#
        );
        assert_eq!(
            instance_labels(&f, Role::PerCpu, 0, 1).unwrap(),
            r#"{"device":"sda","model":"virtio disk","cpu":1}"#
        );
        assert_eq!(instance_labels(&f, Role::Members, 1, 0), None);
        let (one, long) = help(&f, Part::Bucket, false);
        assert_eq!(one, "help of disk.lat: observations per bucket");
        assert!(
            long.contains("a histogram of 3 buckets with bounds 2^10, 2^11"),
            "{long}"
        );
        assert!(long.contains("unit KiB"), "{long}");
        assert!(long.contains("<device>::LOW-HIGH"), "{long}");
        assert!(long.contains("labels: model."), "{long}");
        let mut p = family("mem.peak", "", FamilyKind::Peak, &[("", 0)]);
        p.unit = Unit::PAGES;
        p.unit_text = p.unit.to_string();
        assert_eq!(
            metric_labels(&p, Part::Value),
            r#"{"kind":"peak","unit":"pages"}"#
        );
        assert_eq!(pm_units(&p.unit), COUNT_UNITS);
        assert_eq!(pm_units(&Unit::RATIO), pmUnits::new(0, 0, 0, 0, 0, 0));
        let (one, long) = help(&p, Part::Value, true);
        assert_eq!(one, "help of mem.peak, on each CPU");
        assert!(
            long.contains("maximum over CPUs") && long.contains("cpuN"),
            "{long}"
        );
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
    }

    #[test]
    fn units_match_pcp_s_own_encoding() {
        // PMDA_PMUNITS(0,1,0,0,PM_TIME_USEC,0) and (1,0,0,PM_SPACE_BYTE,0,0)
        // as the C compiler lays them out (see tests/ffi_layout.rs).
        assert_eq!(pm_units(&Unit::US), pmUnits(0x0100_1000));
        assert_eq!(pm_units(&Unit::BYTES), pmUnits(0x1000_0000));
        assert_eq!(pm_units(&Unit::COUNT), pmUnits(0x0010_0000));
        // Mbyte / sec (research notes: 0x1f023000).
        assert_eq!(
            pm_units(&Unit::new(1, -1, 0, 2, 3, 0, 0)),
            pmUnits(0x1f02_3000)
        );
        // count x 10^-3.
        assert_eq!(
            pm_units(&Unit::new(0, 0, 1, 0, 0, -3, 0)),
            pmUnits(0x0010_0d00)
        );
    }

    #[test]
    fn fixed_metrics_sit_below_reserved_names() {
        for m in crate::catalog::fixed(129) {
            assert!(
                RESERVED
                    .iter()
                    .any(|r| m.name.starts_with(&format!("perfabi.{r}."))),
                "{} is below a name families may not take",
                m.name
            );
        }
    }
}
