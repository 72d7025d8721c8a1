//! Metric families (`spec/PERFABI.md` §5.1–§5.4): decoding the family and
//! member tables, the rules that tie them together, the one view readers
//! present (every ABI 1.0 entry is a family of one instance), histogram
//! buckets, and a writer's checked encoding of a new family or member.
//!
//! A *family* has a name, help, kind, unit and the name of the dimension
//! its instances vary along (`device`). A *member* is one instance of a
//! family (`sda`), with up to [`MAX_LABELS`] extra labels and its values at
//! `value_slot..value_slot + words` of every per-CPU counter array: one word
//! for a counter, gauge or peak; `2 + nr_buckets` for a histogram (count,
//! sum, then one word per bucket).

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::entry::Instance;
use crate::error::{EntryField, Error, FamilyField, MemberField, Named};
use crate::layout::*;
use crate::name;
use crate::unit::Unit;

/// A histogram's buckets: `count()` buckets, the last one `+Inf`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Buckets {
    /// Bound `k` is `2^(first + k)` for `k < n - 1`; `n` buckets in all.
    Log2 {
        /// Exponent of the first bound.
        first: u32,
        /// Buckets, `+Inf` included.
        n: u32,
    },
    /// The finite upper bounds, strictly increasing; one more bucket
    /// (`+Inf`) follows them.
    Explicit(Vec<u64>),
}

impl Buckets {
    /// Buckets, `+Inf` included.
    pub fn count(&self) -> usize {
        match self {
            Self::Log2 { n, .. } => *n as usize,
            Self::Explicit(b) => b.len() + 1,
        }
    }

    /// The inclusive upper bound of bucket `k`; `None` for the last
    /// (`+Inf`) bucket and past it.
    pub fn bound(&self, k: usize) -> Option<u64> {
        if k + 1 >= self.count() {
            return None;
        }
        match self {
            Self::Log2 { first, .. } => Some(1u64 << (*first as usize + k)),
            Self::Explicit(b) => b.get(k).copied(),
        }
    }

    /// The bucket an observation `v` falls in: the first whose bound is at
    /// least `v`, else the last.
    pub fn index(&self, v: u64) -> usize {
        let last = self.count() - 1;
        match self {
            Self::Log2 { first, .. } => {
                // ceil(log2(v)) for v >= 1; v <= 2^first lands in bucket 0.
                let ceil_log2 = if v <= 1 {
                    0
                } else {
                    64 - (v - 1).leading_zeros()
                };
                (ceil_log2.saturating_sub(*first) as usize).min(last)
            }
            Self::Explicit(b) => b.partition_point(|&bound| bound < v),
        }
    }

    /// Words of one member's values: count, sum and one per bucket.
    pub fn words(&self) -> usize {
        2 + self.count()
    }

    fn check(&self) -> Result<(), Error> {
        let n = self.count() as u32;
        if !(MIN_BUCKETS..=MAX_BUCKETS).contains(&n) {
            return Err(Error::BadBuckets);
        }
        match self {
            Self::Log2 { first, n } => {
                if u64::from(*first) + u64::from(*n) - 2 > 63 {
                    return Err(Error::BadBuckets);
                }
            }
            Self::Explicit(b) => {
                if b.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Error::BadBuckets);
                }
            }
        }
        Ok(())
    }
}

/// A family as a writer asks for it ([`FamilySpec::entry`] checks it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilySpec {
    /// Name (the naming rule of §5).
    pub name: String,
    /// One line of help.
    pub help: String,
    /// The instance dimension (`device`); empty for a single instance.
    pub dimension: String,
    /// Kind.
    pub kind: Kind,
    /// Unit.
    pub unit: Unit,
    /// Value type (histograms: [`ValueType::U64`]).
    pub value_type: ValueType,
    /// A histogram's buckets; `None` for the other kinds.
    pub buckets: Option<Buckets>,
    /// How a gauge merges across the writers of a directory (§15.4);
    /// [`GaugeMode::Sum`] for the other kinds.
    pub gauge_mode: GaugeMode,
}

impl FamilySpec {
    /// A family of `kind` with unsigned values and no buckets.
    pub fn new(name: &str, help: &str, dimension: &str, kind: Kind, unit: Unit) -> Self {
        Self {
            name: name.to_string(),
            help: help.to_string(),
            dimension: dimension.to_string(),
            kind,
            unit,
            value_type: ValueType::U64,
            buckets: None,
            gauge_mode: GaugeMode::Sum,
        }
    }

    /// A gauge family that merges across writers by `mode`.
    pub fn gauge(name: &str, help: &str, dimension: &str, unit: Unit, mode: GaugeMode) -> Self {
        Self {
            gauge_mode: mode,
            ..Self::new(name, help, dimension, Kind::Gauge, unit)
        }
    }

    /// A histogram family.
    pub fn histogram(name: &str, help: &str, dimension: &str, unit: Unit, b: Buckets) -> Self {
        Self {
            buckets: Some(b),
            ..Self::new(name, help, dimension, Kind::Histogram, unit)
        }
    }

    /// The entry a writer stores, or the typed error that refuses it.
    pub fn entry(&self, reg_id: u64) -> Result<FamilyEntry, Error> {
        name::check_family_name(&self.name)?;
        name::check_help(&self.help)?;
        name::check_dimension(&self.dimension)?;
        if !self.unit.check() {
            return Err(Error::BadUnit);
        }
        let hist = self.kind == Kind::Histogram;
        let unsigned_only = hist || self.kind == Kind::Peak;
        if hist != self.buckets.is_some()
            || (unsigned_only && self.value_type != ValueType::U64)
            || (self.kind != Kind::Gauge && self.gauge_mode != GaugeMode::Sum)
        {
            return Err(Error::WrongKind);
        }
        let mut e = FamilyEntry::zeroed_entry();
        e.name = name::encode(&self.name);
        e.help = name::encode(&self.help);
        e.dimension = name::encode(&self.dimension);
        e.reg_id = reg_id;
        e.state = SlotState::Live as u32;
        e.kind = self.kind as u32;
        e.unit = self.unit;
        e.value_type = self.value_type as u32;
        if self.kind == Kind::Gauge {
            e.bucket_layout = self.gauge_mode as u32;
        }
        if let Some(b) = &self.buckets {
            b.check()?;
            e.nr_buckets = b.count() as u32;
            match b {
                Buckets::Log2 { first, .. } => {
                    e.bucket_layout = BucketLayout::Log2 as u32;
                    e.log2_first = *first;
                }
                Buckets::Explicit(bounds) => {
                    e.bucket_layout = BucketLayout::Explicit as u32;
                    e.bounds[..bounds.len()].copy_from_slice(bounds);
                }
            }
        }
        Ok(e)
    }
}

impl FamilyEntry {
    fn zeroed_entry() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

/// Words of one member's values for a family of `kind` with `buckets`.
pub fn value_words(buckets: Option<&Buckets>) -> usize {
    buckets.map_or(1, Buckets::words)
}

/// The entry of a new member: checked instance and labels (whether the
/// instance may be empty is the family's rule, checked by the writer).
pub fn member_entry(
    family: u32,
    reg_id: u64,
    instance: &str,
    instance_id: u32,
    value_slot: u32,
    labels: &[(&str, &str)],
    dimension: &str,
) -> Result<MemberEntry, Error> {
    name::check_instance(instance)?;
    if labels.len() > MAX_LABELS {
        return Err(Error::BadLabels);
    }
    let mut e: MemberEntry = bytemuck::Zeroable::zeroed();
    for (k, (key, value)) in labels.iter().enumerate() {
        name::check_label_key(key)?;
        name::check_label_value(value)?;
        if *key == dimension || labels[..k].iter().any(|(other, _)| other == key) {
            return Err(Error::BadLabels);
        }
        e.labels[k] = Label {
            key: name::encode(key),
            value: name::encode(value),
        };
    }
    e.instance = name::encode(instance);
    e.reg_id = reg_id;
    e.state = SlotState::Live as u32;
    e.family = family;
    e.value_slot = value_slot;
    e.instance_id = instance_id;
    Ok(e)
}

/// One live family table entry, decoded and checked on its own (§5.1):
/// where it is, its registration, and the family as a writer gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyDef {
    /// Family table slot.
    pub slot: u32,
    /// Registration id.
    pub reg_id: u64,
    /// Name, help, dimension, kind, unit, value type and buckets.
    pub spec: FamilySpec,
}

/// Decodes family slot `slot`: `Ok(None)` if it is free. Fields are
/// checked in table order; the first that breaks its rule is the error.
pub fn decode_family(slot: u32, e: &FamilyEntry) -> Result<Option<FamilyDef>, Error> {
    let bad = |field| Error::BadFamily { slot, field };
    match e.state {
        s if s == SlotState::Free as u32 => return Ok(None),
        s if s == SlotState::Live as u32 => {}
        _ => return Err(bad(FamilyField::State)),
    }
    let text = |field: &[u8], check: fn(&str) -> Result<(), Error>, f| {
        name::decode(field)
            .filter(|s| check(s).is_ok())
            .map(str::to_string)
            .ok_or(bad(f))
    };
    let name = text(&e.name, name::check_family_name, FamilyField::Name)?;
    let help = text(&e.help, name::check_help, FamilyField::Help)?;
    let dimension = text(&e.dimension, name::check_dimension, FamilyField::Dimension)?;
    if e.reg_id == 0 {
        return Err(bad(FamilyField::RegId));
    }
    let kind = Kind::from_raw(e.kind).ok_or(bad(FamilyField::Kind))?;
    if !e.unit.check() {
        return Err(bad(FamilyField::Unit));
    }
    let value_type = ValueType::from_raw(e.value_type)
        .filter(|&t| !matches!(kind, Kind::Histogram | Kind::Peak) || t == ValueType::U64)
        .ok_or(bad(FamilyField::ValueType))?;
    if kind == Kind::Histogram && !(MIN_BUCKETS..=MAX_BUCKETS).contains(&e.nr_buckets) {
        return Err(bad(FamilyField::Buckets));
    }
    let finite = (e.nr_buckets as usize)
        .saturating_sub(1)
        .min(e.bounds.len());
    let buckets = match (kind, e.bucket_layout) {
        (Kind::Histogram, l) if l == BucketLayout::Log2 as u32 => Some(Buckets::Log2 {
            first: e.log2_first,
            n: e.nr_buckets,
        }),
        (Kind::Histogram, l) if l == BucketLayout::Explicit as u32 && e.log2_first == 0 => {
            Some(Buckets::Explicit(e.bounds[..finite].to_vec()))
        }
        (Kind::Histogram, _) => return Err(bad(FamilyField::Buckets)),
        // A gauge's word at 256 is its `gauge_mode`, checked in table
        // order: after `nr_buckets`, before `log2_first`.
        (Kind::Gauge, _) if e.nr_buckets != 0 => return Err(bad(FamilyField::Buckets)),
        (Kind::Gauge, l) if GaugeMode::from_raw(l).is_none() => {
            return Err(bad(FamilyField::GaugeMode))
        }
        (Kind::Gauge, _) if e.log2_first == 0 => None,
        (_, l) if l == 0 && e.nr_buckets == 0 && e.log2_first == 0 => None,
        _ => return Err(bad(FamilyField::Buckets)),
    };
    if let Some(b) = &buckets {
        if b.check().is_err() {
            let count_ok = (MIN_BUCKETS..=MAX_BUCKETS).contains(&e.nr_buckets);
            return Err(bad(if count_ok && matches!(b, Buckets::Explicit(_)) {
                FamilyField::Bounds
            } else {
                FamilyField::Buckets
            }));
        }
    }
    let listed = if matches!(buckets, Some(Buckets::Explicit(_))) {
        finite
    } else {
        0
    };
    if e.bounds[listed..].iter().any(|&b| b != 0) {
        return Err(bad(FamilyField::Bounds));
    }
    Ok(Some(FamilyDef {
        slot,
        reg_id: e.reg_id,
        spec: FamilySpec {
            name,
            help,
            dimension,
            kind,
            unit: e.unit,
            value_type,
            buckets,
            gauge_mode: match kind {
                Kind::Gauge => GaugeMode::from_raw(e.bucket_layout).unwrap_or_default(),
                _ => GaugeMode::Sum,
            },
        },
    }))
}

/// One live member table entry, decoded and checked on its own (§5.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDef {
    /// Member table slot.
    pub slot: u32,
    /// Registration id.
    pub reg_id: u64,
    /// Family table slot.
    pub family: u32,
    /// Instance string.
    pub instance: String,
    /// Instance number.
    pub instance_id: u32,
    /// First value slot.
    pub value_slot: u32,
    /// Extra labels.
    pub labels: Vec<(String, String)>,
}

/// Decodes member slot `slot`: `Ok(None)` if it is free.
pub fn decode_member(slot: u32, e: &MemberEntry) -> Result<Option<MemberDef>, Error> {
    let bad = |field| Error::BadMember { slot, field };
    match e.state {
        s if s == SlotState::Free as u32 => return Ok(None),
        s if s == SlotState::Live as u32 => {}
        _ => return Err(bad(MemberField::State)),
    }
    let instance = name::decode(&e.instance)
        .filter(|s| name::check_instance(s).is_ok())
        .ok_or(bad(MemberField::Instance))?
        .to_string();
    if e.reg_id == 0 {
        return Err(bad(MemberField::RegId));
    }
    // `family`, `value_slot` and `instance_id` are checked against the
    // other entries (§5.4); the rest in table order.
    if e.reserved0 != 0 {
        return Err(bad(MemberField::Reserved));
    }
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut ended = false;
    for l in &e.labels {
        if l.key == [0; LABEL_KEY_LEN] && l.value == [0; LABEL_VALUE_LEN] {
            ended = true;
            continue;
        }
        let key = name::decode(&l.key).filter(|k| name::check_label_key(k).is_ok());
        let value = name::decode(&l.value).filter(|v| name::check_label_value(v).is_ok());
        match (key, value) {
            (Some(k), Some(v)) if !ended && labels.iter().all(|(o, _)| o != k) => {
                labels.push((k.to_string(), v.to_string()))
            }
            _ => return Err(bad(MemberField::Labels)),
        }
    }
    if e.reserved != [0; 4] {
        return Err(bad(MemberField::Reserved));
    }
    Ok(Some(MemberDef {
        slot,
        reg_id: e.reg_id,
        family: e.family,
        instance,
        instance_id: e.instance_id,
        value_slot: e.value_slot,
        labels,
    }))
}

/// Where a family comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// An ABI 1.0 instance table entry (a family of one instance).
    Entry(u32),
    /// A family table slot.
    Family(u32),
}

/// One instance of a [`Family`], as readers present it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Member table slot; `None` for the one instance of a 1.0 entry.
    pub slot: Option<u32>,
    /// Registration id (the entry's for a 1.0 entry).
    pub reg_id: u64,
    /// The instance's value of the family's dimension (empty: the only one).
    pub instance: String,
    /// Instance number, stable for an instance string within the family.
    pub instance_id: u32,
    /// Extra labels.
    pub labels: Vec<(String, String)>,
    /// First value slot in every per-CPU counter array.
    pub value_slot: u32,
    /// Value words (1, or `2 + buckets` for a histogram).
    pub words: u32,
}

/// A metric family with its live instances, as readers present it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Family {
    /// Where it comes from.
    pub origin: Origin,
    /// Registration id.
    pub reg_id: u64,
    /// Name.
    pub name: String,
    /// One line of help (empty for a 1.0 entry).
    pub help: String,
    /// Instance dimension (empty: one instance).
    pub dimension: String,
    /// Kind.
    pub kind: Kind,
    /// Unit (a 1.0 entry's unit string mapped by [`Unit::from_legacy`];
    /// [`Unit::NONE`] when it names none).
    pub unit: Unit,
    /// The unit as text: a 1.0 entry's string, else the unit's name.
    pub unit_text: String,
    /// Value type.
    pub value_type: ValueType,
    /// A histogram's buckets.
    pub buckets: Option<Buckets>,
    /// How a gauge merges across the writers of a directory (§15.4);
    /// [`GaugeMode::Sum`] for a 1.0 entry and the other kinds.
    pub gauge_mode: GaugeMode,
    /// Live instances, by member slot.
    pub members: Vec<Member>,
}

impl Family {
    /// Whether `other` is this family as far as merging goes
    /// (`spec/PERFABI.md` §15.4: what must agree for two files' families of
    /// one name to merge, their values then meaning the same): kind, unit,
    /// value type, dimension, buckets and gauge mode. Not the help (a new
    /// version of a program may reword it: the merged family shows the
    /// newest writer's), the members, the registration id or where each
    /// sits.
    pub fn same_identity(&self, other: &Family) -> bool {
        self.kind == other.kind
            && self.unit == other.unit
            && self.unit_text == other.unit_text
            && self.value_type == other.value_type
            && self.dimension == other.dimension
            && self.buckets == other.buckets
            && self.gauge_mode == other.gauge_mode
    }

    /// The ABI 1.0 entry `i`, presented as a family of one instance.
    pub fn from_entry(i: &Instance) -> Self {
        Family {
            origin: Origin::Entry(i.slot),
            reg_id: i.reg_id,
            name: i.name.clone(),
            help: String::new(),
            dimension: String::new(),
            kind: i.semantics.into(),
            unit: Unit::from_legacy(&i.unit).unwrap_or(Unit::NONE),
            unit_text: i.unit.clone(),
            value_type: i.value_type,
            buckets: None,
            gauge_mode: GaugeMode::Sum,
            members: alloc::vec![Member {
                slot: None,
                reg_id: i.reg_id,
                instance: String::new(),
                instance_id: 0,
                labels: Vec::new(),
                value_slot: i.slot,
                words: 1,
            }],
        }
    }

    /// The member whose instance string is `instance`.
    pub fn member(&self, instance: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.instance == instance)
    }
}

/// Builds the families readers present from a consistent copy of the
/// tables, checking the rules that span entries (§5.4, in its order): the
/// 1.0 entries' rules of §5 (rule 1), then distinct registration ids,
/// names distinct to consumers, members of live families with distinct
/// instances and disjoint value slots inside `used`. `O(n log n)` in the
/// live entries; run outside the generation window.
pub fn assemble(
    entries: &[Instance],
    defs: &[FamilyDef],
    members: &[MemberDef],
    used: usize,
) -> Result<Vec<Family>, Error> {
    entries_unique(entries)?;
    // Family registration ids, then names against families and entries.
    let mut ids: Vec<(u64, u32)> = defs.iter().map(|d| (d.reg_id, d.slot)).collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::BadFamily {
            slot: w[0].1.max(w[1].1),
            field: FamilyField::RegId,
        });
    }
    let mut names: Vec<(String, Named)> = entries
        .iter()
        .map(|i| (name::clash_key(&i.name), Named::Entry(i.slot)))
        .chain(
            defs.iter()
                .map(|d| (name::clash_key(&d.spec.name), Named::Family(d.slot))),
        )
        .collect();
    names.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(order(a.1).cmp(&order(b.1))));
    for w in names.windows(2) {
        if w[0].0 == w[1].0 {
            if let Some(e) = family_clash(w[0].1, w[1].1) {
                return Err(e);
            }
        }
    }
    // Dotted prefixes: sorted, a prefix comes right before a name it
    // prefixes or before names between them that it also prefixes.
    let mut dotted: Vec<(&str, Named)> = entries
        .iter()
        .map(|i| (i.name.as_str(), Named::Entry(i.slot)))
        .chain(
            defs.iter()
                .map(|d| (d.spec.name.as_str(), Named::Family(d.slot))),
        )
        .collect();
    dotted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut stack: Vec<(&str, Named)> = Vec::new();
    for &(n, at) in &dotted {
        while stack
            .last()
            .is_some_and(|(p, _)| !name::dotted_prefix(p, n))
        {
            stack.pop();
        }
        if let Some(e) = stack
            .iter()
            .rev()
            .find_map(|&(_, above)| family_clash(above, at))
        {
            return Err(e);
        }
        stack.push((n, at));
    }

    // Members: registration ids, families, value ranges.
    let mut mids: Vec<(u64, u32)> = members.iter().map(|m| (m.reg_id, m.slot)).collect();
    mids.sort_unstable();
    if let Some(w) = mids.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::BadMember {
            slot: w[0].1.max(w[1].1),
            field: MemberField::RegId,
        });
    }
    let mut by_slot: Vec<Option<usize>> = Vec::new();
    for (k, d) in defs.iter().enumerate() {
        let s = d.slot as usize;
        if by_slot.len() <= s {
            by_slot.resize(s + 1, None);
        }
        by_slot[s] = Some(k);
    }
    let mut families: Vec<Family> = entries.iter().map(Family::from_entry).collect();
    let first_family = families.len();
    families.extend(defs.iter().map(|d| Family {
        origin: Origin::Family(d.slot),
        reg_id: d.reg_id,
        name: d.spec.name.clone(),
        help: d.spec.help.clone(),
        dimension: d.spec.dimension.clone(),
        kind: d.spec.kind,
        unit: d.spec.unit,
        unit_text: d.spec.unit.to_string(),
        value_type: d.spec.value_type,
        buckets: d.spec.buckets.clone(),
        gauge_mode: d.spec.gauge_mode,
        members: Vec::new(),
    }));
    let mut ranges: Vec<(usize, usize, Option<u32>)> =
        entries.iter().map(|i| (i.slot as usize, 1, None)).collect();
    for m in members {
        let bad = |field| Error::BadMember {
            slot: m.slot,
            field,
        };
        let k = by_slot
            .get(m.family as usize)
            .copied()
            .flatten()
            .ok_or(bad(MemberField::Family))?;
        let d = &defs[k].spec;
        if d.dimension.is_empty() != m.instance.is_empty() {
            return Err(bad(MemberField::Instance));
        }
        if m.labels.iter().any(|(key, _)| *key == d.dimension) {
            return Err(bad(MemberField::Labels));
        }
        let words = value_words(d.buckets.as_ref());
        let start = m.value_slot as usize;
        if start.checked_add(words).is_none_or(|end| end > used) {
            return Err(bad(MemberField::ValueSlot));
        }
        ranges.push((start, words, Some(m.slot)));
        families[first_family + k].members.push(Member {
            slot: Some(m.slot),
            reg_id: m.reg_id,
            instance: m.instance.clone(),
            instance_id: m.instance_id,
            labels: m.labels.clone(),
            value_slot: m.value_slot,
            words: words as u32,
        });
    }
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            let slot = match (w[0].2, w[1].2) {
                (Some(a), Some(b)) => a.max(b),
                (Some(a), None) | (None, Some(a)) => a,
                // Two 1.0 entries never share a slot.
                (None, None) => continue,
            };
            return Err(Error::BadMember {
                slot,
                field: MemberField::ValueSlot,
            });
        }
    }
    // Within a family: one instance string, one instance number, and a
    // family without dimension has at most one member.
    for f in &mut families[first_family..] {
        if f.dimension.is_empty() && f.members.len() > 1 {
            let slot = f.members.iter().filter_map(|m| m.slot).max().unwrap_or(0);
            return Err(Error::BadMember {
                slot,
                field: MemberField::Instance,
            });
        }
        for (field, key) in [
            (MemberField::Instance, 0usize),
            (MemberField::InstanceId, 1usize),
        ] {
            let mut seen: Vec<(&str, u32, u32)> = f
                .members
                .iter()
                .map(|m| (m.instance.as_str(), m.instance_id, m.slot.unwrap_or(0)))
                .collect();
            if key == 0 {
                seen.sort_unstable_by(|a, b| a.0.cmp(b.0).then(a.2.cmp(&b.2)));
            } else {
                seen.sort_unstable_by(|a, b| a.1.cmp(&b.1).then(a.2.cmp(&b.2)));
            }
            if let Some(w) = seen.windows(2).find(|w| {
                if key == 0 {
                    w[0].0 == w[1].0
                } else {
                    w[0].1 == w[1].1
                }
            }) {
                return Err(Error::BadMember {
                    slot: w[1].2,
                    field,
                });
            }
        }
    }
    Ok(families)
}

fn order(n: Named) -> (u8, u32) {
    match n {
        Named::Entry(s) => (0, s),
        Named::Family(s) => (1, s),
    }
}

/// The error for two clashing names (one clash key, or one a dotted
/// prefix of the other) of which at least one is a family's (§5.4 rule
/// 3): the family (the later of two) and the other name. `None` for two
/// entries: their names are rule 1's ([`entries_unique`]), and one may be a
/// dotted prefix of the other.
fn family_clash(a: Named, b: Named) -> Option<Error> {
    let (a, b) = if order(a) <= order(b) { (a, b) } else { (b, a) };
    match (a, b) {
        (other, Named::Family(family)) => Some(Error::FamilyClash { family, other }),
        (Named::Family(_), Named::Entry(_)) | (Named::Entry(_), Named::Entry(_)) => None,
    }
}

/// The 1.0 rules of spec §5 across live entries (§5.4 rule 1), the one
/// place two entries are compared: distinct registration ids (`bad-entry`,
/// `reg_id`, naming the later slot of the two with the smallest shared id),
/// then distinct clash keys (`name-clash`, naming the two with the smallest
/// shared key). `O(n log n)` in the live entries.
fn entries_unique(live: &[Instance]) -> Result<(), Error> {
    let mut ids: Vec<(u64, u32)> = live.iter().map(|i| (i.reg_id, i.slot)).collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::BadEntry {
            slot: w[0].1.max(w[1].1),
            field: EntryField::RegId,
        });
    }
    let mut keys: Vec<(String, u32)> = live
        .iter()
        .map(|i| (name::clash_key(&i.name), i.slot))
        .collect();
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::NameClash {
            slot: w[1].1,
            other: w[0].1,
        });
    }
    Ok(())
}

/// The value of one member: its total over CPUs, or one CPU's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// A counter, gauge or peak of type `u64`.
    Unsigned(u64),
    /// A counter, gauge or peak of type `i64`.
    Signed(i64),
    /// A histogram.
    Histogram(Histogram),
}

/// A histogram's values: observations, their sum, and the observations
/// per bucket (not cumulative).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Observations.
    pub count: u64,
    /// Sum of the observations (wrapping).
    pub sum: u64,
    /// Observations per bucket, the last one `+Inf`.
    pub buckets: Vec<u64>,
}

impl Histogram {
    /// Whether `count` equals the wrapping sum of the buckets, as in every
    /// consistent copy of one CPU's values (§5.1: one observation is one
    /// multi-word update); [`check_histograms`] refuses a copy where not.
    pub fn consistent(&self) -> bool {
        count_is_bucket_sum(self.count, &self.buckets)
    }

    /// From a member's words on one CPU: count, sum, buckets.
    pub fn from_words(w: &[u64]) -> Self {
        Histogram {
            count: w.first().copied().unwrap_or(0),
            sum: w.get(1).copied().unwrap_or(0),
            buckets: w.get(2..).map(<[u64]>::to_vec).unwrap_or_default(),
        }
    }
}

/// Spec §5.1's rule for one copy of a histogram's values: `count` is the
/// sum of the buckets modulo 2^64 (each word wraps, so their sum does).
fn count_is_bucket_sum(count: u64, buckets: &[u64]) -> bool {
    buckets.iter().fold(0u64, |a, &b| a.wrapping_add(b)) == count
}

/// Where one histogram member's values are in a CPU's row of copied
/// values: its count, sum and buckets at `at..at + words`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistogramPlace {
    /// Index of the member's first word (its count) in a row.
    pub at: usize,
    /// Its words: count, sum and one per bucket.
    pub words: usize,
    /// The member's slot in the member table, named by
    /// [`Error::BadHistogram`].
    pub slot: u32,
}

impl HistogramPlace {
    /// The place of member `m`'s values in a row where they start at `at`.
    pub fn of(m: &Member, at: usize) -> Self {
        Self {
            at,
            words: m.words as usize,
            // A histogram is always a family table member (a 1.0 entry is
            // a counter or a gauge).
            slot: m.slot.unwrap_or_default(),
        }
    }
}

/// Every histogram member of `families`, with its index among its
/// family's members, in the order readers present them.
pub fn histogram_members(families: &[Family]) -> impl Iterator<Item = (usize, &Member)> {
    families
        .iter()
        .filter(|f| f.kind == Kind::Histogram)
        .flat_map(|f| f.members.iter().enumerate())
}

/// Spec §5.1, the one check of the histogram values a reader serves: in a
/// consistent copy of a CPU's values every histogram member's `count`
/// equals the sum of its buckets, modulo 2^64. `row` is CPU `cpu`'s copy;
/// `places` say where the histograms are in it (a snapshot's are its
/// [`crate::Snapshot::histogram_places`]; a reader of some members' runs
/// places those it read), in the order readers present the members. The
/// first place that breaks the rule is the error ([`Error::BadHistogram`],
/// naming the member slot and the CPU). Reads the histograms' words only.
/// Totals add consistent copies element by element, so they are
/// consistent too.
pub fn check_histogram_row(
    places: &[HistogramPlace],
    cpu: usize,
    row: &[u64],
) -> Result<(), Error> {
    for p in places {
        if let Some([count, _sum, buckets @ ..]) = row.get(p.at..p.at + p.words) {
            if !count_is_bucket_sum(*count, buckets) {
                return Err(Error::BadHistogram {
                    slot: p.slot,
                    cpu: cpu as u32,
                });
            }
        }
    }
    Ok(())
}

/// [`check_histogram_row`] for every CPU's row of `rows` (`stride` words
/// each, CPU 0 first), CPU by CPU: the first copy that breaks the rule is
/// the error.
pub fn check_histograms(
    places: &[HistogramPlace],
    rows: &[u64],
    stride: usize,
) -> Result<(), Error> {
    if places.is_empty() || stride == 0 {
        return Ok(());
    }
    rows.chunks_exact(stride)
        .enumerate()
        .try_for_each(|(cpu, row)| check_histogram_row(places, cpu, row))
}

impl Reading {
    /// Appends the value's words as a member's words on one CPU hold them
    /// (the inverse of [`Reading::from_words`]): the value, or a
    /// histogram's count, sum and buckets.
    pub fn push_words(&self, out: &mut Vec<u64>) {
        match self {
            Self::Unsigned(v) => out.push(*v),
            Self::Signed(v) => out.push(*v as u64),
            Self::Histogram(h) => {
                out.push(h.count);
                out.push(h.sum);
                out.extend_from_slice(&h.buckets);
            }
        }
    }

    /// One CPU's value of a member of `family` from its words on that CPU.
    pub fn from_words(family: &Family, w: &[u64]) -> Self {
        match (family.kind, family.value_type) {
            (Kind::Histogram, _) => Self::Histogram(Histogram::from_words(w)),
            (_, ValueType::U64) => Self::Unsigned(w.first().copied().unwrap_or(0)),
            (_, ValueType::I64) => Self::Signed(w.first().copied().unwrap_or(0) as i64),
        }
    }

    /// The total of a member of `family` from its words on each CPU: the
    /// wrapping sum, the maximum for a peak, bucket by bucket for a
    /// histogram (spec §5.1).
    pub fn total_words<'a>(family: &Family, per_cpu: impl IntoIterator<Item = &'a [u64]>) -> Self {
        let first = |w: &[u64]| w.first().copied().unwrap_or(0);
        let it = per_cpu.into_iter();
        match (family.kind, family.value_type) {
            (Kind::Histogram, _) => {
                let n = family.buckets.as_ref().map_or(0, Buckets::count);
                let mut acc = alloc::vec![0u64; 2 + n];
                for w in it {
                    for (a, &b) in acc.iter_mut().zip(w) {
                        *a = a.wrapping_add(b);
                    }
                }
                Self::Histogram(Histogram::from_words(&acc))
            }
            (Kind::Peak, ValueType::U64) => Self::Unsigned(it.map(first).max().unwrap_or(0)),
            (Kind::Peak, ValueType::I64) => {
                Self::Signed(it.map(|w| first(w) as i64).max().unwrap_or(0))
            }
            (_, ValueType::U64) => Self::Unsigned(it.fold(0u64, |a, w| a.wrapping_add(first(w)))),
            (_, ValueType::I64) => {
                Self::Signed(it.fold(0u64, |a, w| a.wrapping_add(first(w))) as i64)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_words_is_the_inverse_of_from_words() {
        let f = |kind, value_type| Family {
            kind,
            value_type,
            buckets: Some(Buckets::Explicit(alloc::vec![10])),
            ..Family::from_entry(&Instance {
                slot: 0,
                reg_id: 1,
                name: "f".into(),
                unit: String::new(),
                semantics: Semantics::Counter,
                value_type: ValueType::U64,
            })
        };
        for (fam, r) in [
            (
                f(Kind::Counter, ValueType::U64),
                Reading::Unsigned(u64::MAX),
            ),
            (f(Kind::Gauge, ValueType::I64), Reading::Signed(-7)),
            (
                f(Kind::Histogram, ValueType::U64),
                Reading::Histogram(Histogram {
                    count: 3,
                    sum: 70,
                    buckets: alloc::vec![1, 2],
                }),
            ),
        ] {
            let mut w = alloc::vec![9];
            r.push_words(&mut w);
            assert_eq!(Reading::from_words(&fam, &w[1..]), r);
        }
    }

    #[test]
    fn log2_buckets() {
        let b = Buckets::Log2 { first: 3, n: 4 }; // <=8, <=16, <=32, +Inf
        assert_eq!(b.bound(0), Some(8));
        assert_eq!(b.bound(2), Some(32));
        assert_eq!(b.bound(3), None);
        for (v, k) in [
            (0, 0),
            (1, 0),
            (8, 0),
            (9, 1),
            (16, 1),
            (17, 2),
            (32, 2),
            (33, 3),
        ] {
            assert_eq!(b.index(v), k, "{v}");
        }
        assert_eq!(b.index(u64::MAX), 3);
        assert_eq!(Buckets::Log2 { first: 62, n: 3 }.check(), Ok(()));
        assert_eq!(
            Buckets::Log2 { first: 63, n: 3 }.check(),
            Err(Error::BadBuckets)
        );
    }

    #[test]
    fn explicit_buckets() {
        let b = Buckets::Explicit(alloc::vec![10, 100]);
        assert_eq!(b.count(), 3);
        for (v, k) in [(0, 0), (10, 0), (11, 1), (100, 1), (101, 2)] {
            assert_eq!(b.index(v), k, "{v}");
        }
        assert_eq!(
            Buckets::Explicit(alloc::vec![5, 5]).check(),
            Err(Error::BadBuckets)
        );
        assert_eq!(
            Buckets::Explicit(alloc::vec![1; 32]).check(),
            Err(Error::BadBuckets)
        );
        assert_eq!(
            Buckets::Explicit(alloc::vec![]).check(),
            Err(Error::BadBuckets)
        );
    }

    #[test]
    fn spec_roundtrip() {
        let s = FamilySpec::histogram(
            "sched.wakeup_latency",
            "Wakeup to run latency",
            "",
            Unit::NS,
            Buckets::Explicit(alloc::vec![1000, 10_000, 100_000]),
        );
        let e = s.entry(7).unwrap();
        let d = decode_family(3, &e).unwrap().unwrap();
        assert_eq!(d.spec, s, "decoding gives back what was encoded");
        let mut bad = s.clone();
        bad.help = "x".repeat(128);
        assert_eq!(bad.entry(1), Err(Error::BadHelp));
        let mut bad = s.clone();
        bad.unit = Unit::new(0, 0, 0, 1, 0, 0, 0);
        assert_eq!(bad.entry(1), Err(Error::BadUnit));
        let mut bad = s;
        bad.value_type = ValueType::I64;
        assert_eq!(bad.entry(1), Err(Error::WrongKind));
    }

    #[test]
    fn member_roundtrip() {
        let e = member_entry(2, 9, "sda", 0, 40, &[("model", "virtio disk")], "device").unwrap();
        let m = decode_member(5, &e).unwrap().unwrap();
        assert_eq!(m.instance, "sda");
        assert_eq!(m.labels, [("model".to_string(), "virtio disk".to_string())]);
        assert_eq!(
            member_entry(2, 9, "sda", 0, 40, &[("device", "x")], "device"),
            Err(Error::BadLabels)
        );
        assert_eq!(
            member_entry(2, 9, "a b", 0, 40, &[], "device"),
            Err(Error::BadInstance)
        );
        assert_eq!(
            member_entry(2, 9, "a", 0, 40, &[("cpu", "1")], "device"),
            Err(Error::BadLabelKey)
        );
    }

    #[test]
    fn totals() {
        let mut f = Family::from_entry(&Instance {
            slot: 0,
            reg_id: 1,
            name: "p".to_string(),
            unit: String::new(),
            semantics: Semantics::Counter,
            value_type: ValueType::U64,
        });
        let per_cpu: [&[u64]; 2] = [&[3], &[4]];
        let sum = Reading::total_words(&f, per_cpu);
        assert_eq!(sum, Reading::Unsigned(7));
        f.kind = Kind::Peak;
        let max = Reading::total_words(&f, per_cpu);
        assert_eq!(max, Reading::Unsigned(4));
        f.value_type = ValueType::I64;
        f.kind = Kind::Gauge;
        let words: [&[u64]; 2] = [&[(-3i64) as u64], &[(-4i64) as u64]];
        assert_eq!(Reading::total_words(&f, words), Reading::Signed(-7));
    }
}
