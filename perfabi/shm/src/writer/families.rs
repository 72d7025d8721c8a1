//! Metric families (ABI 1.1, `spec/PERFABI.md` §5.1–§5.4, §7.3): adding
//! and deleting families and their instances, and the hot-path updates of
//! a member — adjust, histogram observation, peak.
//!
//! ```no_run
//! use perfabi::{Buckets, FamilySpec, Kind, Unit};
//! use perfabi_shm::writer::{Config, Writer};
//!
//! let w = Writer::create("/dev/shm/app.perfabi", &Config::default())?;
//! let bytes = w.add_family(&FamilySpec::new(
//!     "disk.dev.read_bytes", "Bytes read from the device", "device",
//!     Kind::Counter, Unit::BYTES))?;
//! let sda = w.add_member(bytes, "sda", &[("model", "virtio")])?;
//! w.member_add(&sda, 4096)?;
//! let lat = w.add_family(&FamilySpec::histogram(
//!     "disk.dev.latency", "Request latency", "device", Unit::NS,
//!     Buckets::Log2 { first: 10, n: 24 }))?;
//! let sda_lat = w.add_member(lat, "sda", &[])?;
//! w.observe(&sda_lat, 183_000)?; // count, sum and bucket: one update
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use perfabi::family::{self, Buckets, FamilySpec};
use perfabi::layout::*;
use perfabi::name;
use perfabi::protocol::{gen_write_begin, gen_write_end, Sound};
use perfabi::Error;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{percpu, InstanceId, Meta, Writer};

/// A registered family: its slot and registration id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FamilyId {
    slot: u32,
    reg_id: u64,
}

impl FamilyId {
    /// The family's slot in the family table.
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

/// A registered instance of a family: a cheap handle for the hot path
/// (its value slot, registration id, kind and buckets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberId {
    value: InstanceId,
    slot: u32,
    kind: Kind,
    buckets: Option<Arc<Buckets>>,
}

impl MemberId {
    /// The member's slot in the member table.
    pub fn slot(&self) -> u32 {
        self.slot
    }
    /// The first of its value slots in the counter arrays.
    pub fn value_slot(&self) -> u32 {
        self.value.slot()
    }
    /// Its registration id.
    pub fn reg_id(&self) -> u64 {
        self.value.reg_id()
    }
    /// Its family's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }
    /// The id of its (first) value slot: of a counter or gauge member, the
    /// id [`Writer::counter`] makes a [`Counter`](super::Counter) handle
    /// of, so a hot member is adjusted without a lookup.
    pub fn instance(&self) -> InstanceId {
        self.value
    }
}

/// The writer's record of one live family.
pub(crate) struct FamilyRec {
    pub(crate) entry: FamilyEntry,
    buckets: Option<Arc<Buckets>>,
    members: BTreeSet<u32>,
    /// Instance numbers by instance string, kept after a member is deleted
    /// so a returning instance gets its number back (bounded, see
    /// [`Writer::add_member`]).
    numbers: HashMap<String, u32>,
    next_number: u32,
}

/// The families' part of the writer's metadata.
#[derive(Default)]
pub(crate) struct FamilyMeta {
    pub(crate) families: BTreeMap<u32, FamilyRec>,
    free_families: VecDeque<u32>,
    pub(crate) families_used: u32,
    pub(crate) members: BTreeMap<u32, MemberEntry>,
    free_members: VecDeque<u32>,
    pub(crate) members_used: u32,
}

impl Meta {
    /// `n` contiguous free value slots: a freed range of that length, the
    /// next unused slots, or part of a longer freed range.
    pub(crate) fn alloc_values(&mut self, n: u32, max: usize) -> Result<u32, Error> {
        if n == 1 {
            if let Some(s) = self.free.pop_front() {
                return Ok(s);
            }
        }
        if let Some(k) = self.runs.iter().position(|&(_, len)| len == n) {
            return Ok(self.runs.swap_remove(k).0);
        }
        if self.used as usize + n as usize <= max {
            return Ok(self.used);
        }
        if let Some(k) = self.runs.iter().position(|&(_, len)| len > n) {
            let (start, len) = self.runs[k];
            self.runs[k] = (start + n, len - n);
            return Ok(start);
        }
        Err(Error::TableFull)
    }

    /// Gives back `n` value slots from `start`.
    pub(crate) fn free_values(&mut self, start: u32, n: u32) {
        if n == 1 {
            self.free.push_back(start);
        } else {
            self.runs.push((start, n));
        }
    }

    /// Whether a 1.0 entry called `n` would be a dotted prefix of a live
    /// family's name, or have one as its prefix (§5).
    pub(crate) fn prefix_of_family(&self, n: &str) -> bool {
        self.fams.families.values().any(|f| {
            let other = name::decode(&f.entry.name).unwrap_or_default();
            name::dotted_prefix(other, n) || name::dotted_prefix(n, other)
        })
    }

    /// Whether `name` would clash with a live entry's or family's name
    /// (§5: the same clash key, or a dotted prefix for a family).
    fn family_name_taken(&self, n: &str) -> bool {
        if self.names.contains_key(&name::clash_key(n)) {
            return true;
        }
        let live = self
            .entries
            .values()
            .map(|e| e.name)
            .chain(self.fams.families.values().map(|f| f.entry.name));
        for other in live {
            let other = name::decode(&other).unwrap_or_default();
            if name::dotted_prefix(other, n) || name::dotted_prefix(n, other) {
                return true;
            }
        }
        false
    }
}

impl Writer {
    fn tables(&self) -> Result<perfabi::FamilyTables, Error> {
        self.state.layout.families.ok_or(Error::NoFamilyRoom)
    }

    /// Registers a family (spec §5.1). Refuses, with a typed error and the
    /// segment unchanged: a bad name, help, dimension, unit or buckets; a
    /// name that clashes with a live one (`DuplicateName`); a segment with
    /// no room (`NoFamilyRoom`).
    pub fn add_family(&self, spec: &FamilySpec) -> Result<FamilyId, Error> {
        let t = self.tables()?;
        let mut m = self.state.meta.lock().unwrap_or_else(|p| p.into_inner());
        let entry = spec.entry(m.next_reg)?;
        // In a directory the name is the kept file's list of folded
        // writers (spec §15.5): a family of that name would vanish when
        // its file is folded.
        if spec.name == crate::directory::FOLDED_FAMILY && self.state.fold_dir.get().is_some() {
            return Err(Error::BadName);
        }
        if m.family_name_taken(&spec.name) {
            return Err(Error::DuplicateName);
        }
        let slot = match m.fams.free_families.pop_front() {
            Some(s) => s,
            None if (m.fams.families_used as usize) < t.max_families => m.fams.families_used,
            None => return Err(Error::NoFamilyRoom),
        };
        let reg_id = m.next_reg;
        m.next_reg += 1;
        let words = self.state.words();
        let g = gen_write_begin::<Sound>(&words[HEADER_GEN1_WORD]);
        self.state.store_family(slot, &entry);
        if slot == m.fams.families_used {
            m.fams.families_used += 1;
            words[HEADER_FAMILIES_USED_WORD]
                .store(u64::from(m.fams.families_used), Ordering::Relaxed);
        }
        gen_write_end::<Sound>(&words[HEADER_GEN2_WORD], g);
        m.names
            .insert(name::clash_key(&spec.name), perfabi::Named::Family(slot));
        m.fams.families.insert(
            slot,
            FamilyRec {
                entry,
                buckets: spec.buckets.clone().map(Arc::new),
                members: BTreeSet::new(),
                numbers: HashMap::new(),
                next_number: 0,
            },
        );
        Ok(FamilyId { slot, reg_id })
    }

    /// Unregisters a family and, in the same generation change, every
    /// instance of it.
    pub fn del_family(&self, f: FamilyId) -> Result<(), Error> {
        let mut m = self.state.meta.lock().unwrap_or_else(|p| p.into_inner());
        let rec = match m.fams.families.get(&f.slot) {
            Some(r) if r.entry.reg_id == f.reg_id => r,
            _ => return Err(Error::UnknownInstance),
        };
        let members: Vec<u32> = rec.members.iter().copied().collect();
        let name = name::decode(&rec.entry.name)
            .unwrap_or_default()
            .to_string();
        let words = self.state.words();
        let g = gen_write_begin::<Sound>(&words[HEADER_GEN1_WORD]);
        for &s in &members {
            self.state.free_member_entry(s);
        }
        self.state.free_family_entry(f.slot);
        gen_write_end::<Sound>(&words[HEADER_GEN2_WORD], g);
        for s in members {
            self.forget_member(&mut m, s);
        }
        m.fams.families.remove(&f.slot);
        m.fams.free_families.push_back(f.slot);
        m.names.remove(&name::clash_key(&name));
        Ok(())
    }

    /// Adds an instance to family `f` (spec §5.3): `instance` is its value
    /// of the family's dimension (`sda`; empty in a family without one),
    /// `labels` at most four extra `key=value` pairs. An instance string
    /// seen before in the family gets its instance number back under a new
    /// registration id. Refuses a bad instance or label, an instance that
    /// is live already (`DuplicateInstance`), a full table.
    pub fn add_member(
        &self,
        f: FamilyId,
        instance: &str,
        labels: &[(&str, &str)],
    ) -> Result<MemberId, Error> {
        self.add_member_as(f, instance, labels, false)
    }

    /// Like [`add_member`](Self::add_member), for a counter or gauge whose
    /// per-CPU values come from outside and are stored whole with
    /// [`publish_member_per_cpu`](Self::publish_member_per_cpu).
    pub fn add_external_member(
        &self,
        f: FamilyId,
        instance: &str,
        labels: &[(&str, &str)],
    ) -> Result<MemberId, Error> {
        self.add_member_as(f, instance, labels, true)
    }

    fn add_member_as(
        &self,
        f: FamilyId,
        instance: &str,
        labels: &[(&str, &str)],
        external: bool,
    ) -> Result<MemberId, Error> {
        let t = self.tables()?;
        let mut m = self.state.meta.lock().unwrap_or_else(|p| p.into_inner());
        let max_values = self.state.layout.max_instances;
        let next_reg = m.next_reg;
        let rec = match m.fams.families.get(&f.slot) {
            Some(r) if r.entry.reg_id == f.reg_id => r,
            _ => return Err(Error::UnknownInstance),
        };
        let kind = Kind::from_raw(rec.entry.kind).unwrap_or(Kind::Counter);
        if external && !matches!(kind, Kind::Counter | Kind::Gauge) {
            return Err(Error::WrongKind);
        }
        let dimension = name::decode(&rec.entry.dimension)
            .unwrap_or_default()
            .to_string();
        if dimension.is_empty() != instance.is_empty() {
            return Err(Error::BadInstance);
        }
        let live_same = rec.members.iter().any(|s| {
            m.fams
                .members
                .get(s)
                .is_some_and(|e| name::decode(&e.instance) == Some(instance))
        });
        if live_same {
            return Err(Error::DuplicateInstance);
        }
        let number = rec
            .numbers
            .get(instance)
            .copied()
            .unwrap_or(rec.next_number);
        let words_per = family::value_words(rec.buckets.as_deref()) as u32;
        let buckets = rec.buckets.clone();
        // Checks the instance and labels before anything is taken.
        let mut entry =
            family::member_entry(f.slot, next_reg, instance, number, 0, labels, &dimension)?;
        let slot = match m.fams.free_members.front() {
            Some(&s) => s,
            None if (m.fams.members_used as usize) < t.max_members => m.fams.members_used,
            None => return Err(Error::NoFamilyRoom),
        };
        let value_slot = m.alloc_values(words_per, max_values)?;
        if m.fams.free_members.front() == Some(&slot) {
            m.fams.free_members.pop_front();
        }
        entry.value_slot = value_slot;
        m.next_reg += 1;
        let words = self.state.words();
        let layout = &self.state.layout;
        let g = gen_write_begin::<Sound>(&words[HEADER_GEN1_WORD]);
        // The slots are free: nothing adjusts them, so zeroing them on every
        // CPU cannot race a per-CPU update (§6.2).
        for cpu in 0..layout.nr_cpus {
            for k in 0..words_per as usize {
                words[layout.counter_word(cpu, value_slot as usize + k)]
                    .store(0, Ordering::Relaxed);
            }
        }
        self.state.store_member(slot, &entry);
        if value_slot == m.used {
            m.used += words_per;
            words[HEADER_USED_WORD].store(u64::from(m.used), Ordering::Relaxed);
        }
        if slot == m.fams.members_used {
            m.fams.members_used += 1;
            words[HEADER_MEMBERS_USED_WORD]
                .store(u64::from(m.fams.members_used), Ordering::Relaxed);
        }
        gen_write_end::<Sound>(&words[HEADER_GEN2_WORD], g);
        m.fams.members.insert(slot, entry);
        let bound = 2 * t.max_members.max(1);
        let fams = &mut m.fams;
        let rec = fams.families.get_mut(&f.slot).expect("checked above");
        rec.members.insert(slot);
        if !rec.numbers.contains_key(instance) {
            if rec.numbers.len() >= bound {
                // Forget the numbers of instances that are not live, so a
                // churn of new instance strings cannot grow the map without
                // bound (a returning instance then gets a new number).
                let live: BTreeSet<&str> = rec
                    .members
                    .iter()
                    .filter_map(|s| fams.members.get(s))
                    .filter_map(|e| name::decode(&e.instance))
                    .collect();
                rec.numbers.retain(|k, _| live.contains(k.as_str()));
            }
            rec.numbers.insert(instance.to_string(), number);
            rec.next_number = rec.next_number.max(number + 1);
        }
        let reg_id = entry.reg_id;
        let value = InstanceId {
            slot: value_slot,
            reg_id,
        };
        self.state.shape[value_slot as usize].store(
            super::state::shape(kind, words_per as usize),
            Ordering::Relaxed,
        );
        if external {
            self.state.external[value_slot as usize].store(reg_id, Ordering::Relaxed);
        } else {
            self.state.live[value_slot as usize].store(reg_id, Ordering::Release);
        }
        Ok(MemberId {
            value,
            slot,
            kind,
            buckets,
        })
    }

    /// Removes an instance. Its value slots and member slot are reused
    /// later under new registration ids.
    pub fn del_member(&self, id: &MemberId) -> Result<(), Error> {
        let mut m = self.state.meta.lock().unwrap_or_else(|p| p.into_inner());
        match m.fams.members.get(&id.slot) {
            Some(e) if e.reg_id == id.reg_id() => {}
            _ => return Err(Error::UnknownInstance),
        }
        let words = self.state.words();
        let g = gen_write_begin::<Sound>(&words[HEADER_GEN1_WORD]);
        self.state.free_member_entry(id.slot);
        gen_write_end::<Sound>(&words[HEADER_GEN2_WORD], g);
        self.forget_member(&mut m, id.slot);
        Ok(())
    }

    /// After a member's entry was freed in the segment: frees its slots in
    /// the writer's books.
    fn forget_member(&self, m: &mut Meta, slot: u32) {
        let Some(e) = m.fams.members.remove(&slot) else {
            return;
        };
        let words = m
            .fams
            .families
            .get(&e.family)
            .map_or(1, |r| family::value_words(r.buckets.as_deref())) as u32;
        if let Some(r) = m.fams.families.get_mut(&e.family) {
            r.members.remove(&slot);
        }
        self.state.live[e.value_slot as usize].store(0, Ordering::Relaxed);
        self.state.external[e.value_slot as usize].store(0, Ordering::Relaxed);
        m.free_values(e.value_slot, words);
        m.fams.free_members.push_back(slot);
    }

    /// Adds `delta` (wrapping) to a counter or gauge member on the current
    /// CPU: one update, as [`adjust`](Self::adjust).
    #[inline]
    pub fn member_add(&self, id: &MemberId, delta: i64) -> Result<(), Error> {
        self.check(id.value)?;
        if !matches!(
            self.state.kind(id.value.slot()),
            Some(Kind::Counter | Kind::Gauge)
        ) {
            return Err(Error::WrongKind);
        }
        self.adjust(id.value, delta)
    }

    /// Sets a gauge member's value (its sum over CPUs), as
    /// [`set`](Self::set).
    pub fn member_set(&self, id: &MemberId, value: i64) -> Result<(), Error> {
        self.check(id.value)?;
        if self.state.kind(id.value.slot()) != Some(Kind::Gauge) {
            return Err(Error::WrongKind);
        }
        self.set(id.value, value)
    }

    /// Records one observation `v` in a histogram member: its count, sum
    /// and bucket change in one multi-word update of the current CPU's
    /// block, so a reader never sees them disagree (§7.1).
    #[inline]
    pub fn observe(&self, id: &MemberId, v: u64) -> Result<(), Error> {
        let Some(b) = &id.buckets else {
            return Err(Error::WrongKind);
        };
        self.check(id.value)?;
        // The writer's own books decide how many words the member has: the
        // bucket never lies past them, whatever buckets the handle carries.
        let k = b.index(v);
        let slot = id.value.slot();
        if self.state.kind(slot) != Some(Kind::Histogram) || 2 + k >= self.state.words_at(slot) {
            return Err(Error::WrongKind);
        }
        let base = self.state.layout.counters_offset / 8 + slot as usize;
        let ops = [
            percpu::WordDelta {
                index: base,
                val: 1,
            },
            percpu::WordDelta {
                index: base + 1,
                val: v,
            },
            percpu::WordDelta {
                index: base + 2 + k,
                val: 1,
            },
        ];
        self.state
            .engine
            .group(self.state.words(), &self.state.layout, &ops)
    }

    /// Records `v` in a peak member: the current CPU's word becomes `v` if
    /// `v` is larger; otherwise nothing is written.
    #[inline]
    pub fn peak(&self, id: &MemberId, v: u64) -> Result<(), Error> {
        self.check(id.value)?;
        if self.state.kind(id.value.slot()) != Some(Kind::Peak) {
            return Err(Error::WrongKind);
        }
        let index = self.state.layout.counters_offset / 8 + id.value.slot() as usize;
        self.state
            .engine
            .peak(self.state.words(), &self.state.layout, index, v);
        Ok(())
    }

    /// Resets a peak member to 0 on every CPU, as one metadata change
    /// (§5.1): a reader's consistent snapshot holds either every CPU's
    /// word from before the reset or every one from after it.
    pub fn reset_peak(&self, id: &MemberId) -> Result<(), Error> {
        let _m = self.state.meta.lock().unwrap_or_else(|p| p.into_inner());
        self.check(id.value)?;
        if self.state.kind(id.value.slot()) != Some(Kind::Peak) {
            return Err(Error::WrongKind);
        }
        let words = self.state.words();
        let layout = &self.state.layout;
        let slot = id.value.slot() as usize;
        perfabi::protocol::peak_reset::<Sound>(
            &words[HEADER_GEN1_WORD],
            &words[HEADER_GEN2_WORD],
            (0..layout.nr_cpus).map(|cpu| &words[layout.counter_word(cpu, slot)]),
        );
        Ok(())
    }

    /// Stores `values[cpu]` as the value of an external member on each CPU
    /// (see [`add_external_member`](Self::add_external_member)).
    pub fn publish_member_per_cpu(&self, id: &MemberId, values: &[u64]) -> Result<(), Error> {
        self.publish_per_cpu(super::ExternalId(id.value), values)
    }
}

impl super::state::State {
    /// Stores family entry `e` in `slot`.
    pub(crate) fn store_family(&self, slot: u32, e: &FamilyEntry) {
        let t = self.layout.families.expect("the writer checked it");
        let w: [u64; FAMILY_ENTRY_WORDS] = bytemuck::cast(*e);
        store(&self.words()[t.family_word(slot as usize)..], &w);
    }

    /// Stores member entry `e` in `slot`.
    pub(crate) fn store_member(&self, slot: u32, e: &MemberEntry) {
        let t = self.layout.families.expect("the writer checked it");
        let w: [u64; MEMBER_ENTRY_WORDS] = bytemuck::cast(*e);
        store(&self.words()[t.member_word(slot as usize)..], &w);
    }

    fn free_family_entry(&self, slot: u32) {
        let e: FamilyEntry = bytemuck::Zeroable::zeroed();
        self.store_family(slot, &e);
    }

    fn free_member_entry(&self, slot: u32) {
        let e: MemberEntry = bytemuck::Zeroable::zeroed();
        self.store_member(slot, &e);
    }
}

fn store(dst: &[AtomicU64], src: &[u64]) {
    for (w, &v) in dst.iter().zip(src) {
        w.store(v, Ordering::Relaxed);
    }
}
