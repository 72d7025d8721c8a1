//! Reading a segment that another thread or process writes.
//!
//! A [`SegmentView`] sees the segment as a slice of 8-byte atomic words and
//! reads it only through [`crate::protocol`]: `Relaxed` loads and acquire
//! fences, never a plain reference to shared data. The `reader` crate builds
//! on this with mapping, re-mapping and liveness; the userspace writer uses it
//! to read back its own segment.

use alloc::string::ToString;
use alloc::vec::Vec;

use crate::damon::{self, DamonRead};
pub use crate::entry::Instance;
use crate::error::{EntryField, Error};
use crate::family::{self, Family, FamilyDef, HistogramPlace, Member, MemberDef, Reading};
use crate::layout::*;
use crate::name;
use crate::protocol::{self, gen_read, load_words, seq_read, Sound};
use crate::sync::{AtomicU64, Ordering};
use crate::validate::{validate_header, FamilyTables, Layout};
pub use crate::values::CopyWords;
use crate::values::{Blocks, Values};

/// Header fields that describe the writer and the current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// ABI major version.
    pub abi_major: u16,
    /// ABI minor version.
    pub abi_minor: u16,
    /// Incarnation id.
    pub epoch: u64,
    /// Metadata generation (`gen2`).
    pub generation: u64,
    /// True while `gen1 != gen2` (a metadata change is in progress).
    pub metadata_busy: bool,
    /// Writer's pid (0: kernel).
    pub writer_pid: u64,
    /// Writer's start time (`CLOCK_BOOTTIME` ns).
    pub writer_start_ns: u64,
    /// Last heartbeat (`CLOCK_BOOTTIME` ns).
    pub heartbeat_ns: u64,
    /// Promised heartbeat interval (0: none).
    pub heartbeat_interval_ns: u64,
    /// `flags` word (see [`FLAG_CLOSED`], [`FLAG_KERNEL`]).
    pub flags: u64,
    /// Number of per-CPU blocks.
    pub nr_cpus: usize,
    /// Instance table capacity.
    pub max_instances: usize,
    /// DAMON ring slots per CPU.
    pub damon_capacity: usize,
    /// Total segment bytes.
    pub segment_size: usize,
}

/// A consistent copy of every counter of every CPU, taken inside one metadata
/// generation, each CPU's values between two equal even sequence loads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Generation the copy belongs to.
    pub generation: u64,
    /// Epoch of the segment the copy came from.
    pub epoch: u64,
    /// Live instances of the ABI 1.0 table, by slot.
    pub instances: Vec<Instance>,
    /// Every metric family: each live 1.0 entry as a family of one
    /// instance, then the live families of the family table (spec §5.4).
    pub families: Vec<Family>,
    /// Number of per-CPU blocks.
    pub nr_cpus: usize,
    /// Slots copied per CPU (`instances_used` at that generation).
    pub slots: usize,
    /// `values[cpu * slots + slot]`.
    pub values: Vec<u64>,
    /// The value slots `families` reach and where their histograms are,
    /// found when they were decoded (so a snapshot of an unchanged table
    /// does not walk its members again: a caller that edits `families` of
    /// a snapshot it reuses in place should clear them, which makes the
    /// next snapshot decode the table afresh).
    facts: TableFacts,
}

impl Snapshot {
    /// After a failed read: keeps the buffers for the next attempt, but
    /// never a stale cache (the next read decodes the tables afresh).
    fn forget(&mut self) {
        self.instances.clear();
        self.families.clear();
        *self = Snapshot {
            instances: core::mem::take(&mut self.instances),
            families: core::mem::take(&mut self.families),
            values: core::mem::take(&mut self.values),
            ..Snapshot::default()
        };
    }

    /// The value of `inst` on `cpu`.
    pub fn value(&self, cpu: usize, inst: &Instance) -> u64 {
        self.values[cpu * self.slots + inst.slot as usize]
    }
    /// Per-CPU values of `inst`.
    pub fn per_cpu<'a>(&'a self, inst: &'a Instance) -> impl Iterator<Item = u64> + 'a {
        (0..self.nr_cpus).map(move |c| self.value(c, inst))
    }
    /// Sum over all CPUs (wrapping, as the values themselves wrap).
    pub fn total(&self, inst: &Instance) -> u64 {
        self.per_cpu(inst).fold(0u64, u64::wrapping_add)
    }
    /// The live instance called `name`.
    pub fn find(&self, name: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.name == name)
    }
    /// The family called `name`.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }
    /// The value words of member `m` on `cpu` (one word, or a histogram's
    /// count, sum and buckets).
    pub fn words(&self, cpu: usize, m: &Member) -> &[u64] {
        let at = cpu * self.slots + m.value_slot as usize;
        &self.values[at..at + m.words as usize]
    }
    /// The value of member `m` of family `f` on `cpu`.
    pub fn reading_on(&self, cpu: usize, f: &Family, m: &Member) -> Reading {
        Reading::from_words(f, self.words(cpu, m))
    }
    /// The total of member `m` of family `f` over all CPUs (a sum; the
    /// maximum for a peak; bucket by bucket for a histogram).
    pub fn reading(&self, f: &Family, m: &Member) -> Reading {
        Reading::total_words(f, (0..self.nr_cpus).map(|c| self.words(c, m)))
    }
    /// Where the histogram members of `families` have their values in a
    /// CPU's row of `values` (at their value slots), in the order
    /// [`family::check_histograms`] checks them: as found when the table
    /// was decoded, or found again if `families` was replaced since. A
    /// reader that copies some of those values again (a fetch of some
    /// members' runs) checks them with these places.
    pub fn histogram_places(&mut self) -> &[HistogramPlace] {
        self.facts.refresh(&self.families);
        &self.facts.histograms
    }
}

/// Copies the header out of shared `words` (each word with one atomic load),
/// unvalidated: the one place a header is decoded from shared memory.
/// Fails if `words` cannot hold a header.
pub fn load_header(words: &[AtomicU64]) -> Result<Header, Error> {
    let Some(head) = words.get(..HEADER_WORDS) else {
        return Err(Error::Truncated {
            needed: HEADER_SIZE_V1_0 as u64,
            have: words.len() as u64 * 8,
        });
    };
    let mut hw = [0u64; HEADER_WORDS];
    load_words(head, 0, &mut hw);
    Ok(bytemuck::cast(hw))
}

/// Copies the fields ABI 1.1 appended to the header (`spec/PERFABI.md`
/// §4.1) out of shared `words`: zero (no family tables) unless `h` is of
/// minor 1 or later with a header of at least 256 bytes, and `words` holds
/// them. Unvalidated: [`validate_header`] checks them with `h`.
pub fn load_family_header(words: &[AtomicU64], h: &Header) -> FamilyHeader {
    let first = HEADER_SIZE_V1_0 / 8;
    match words.get(first..first + FAMILY_HEADER_WORDS) {
        Some(ext) if h.abi_minor >= 1 && h.header_size as usize >= HEADER_SIZE_V1_1 => {
            let mut w = [0u64; FAMILY_HEADER_WORDS];
            load_words(ext, 0, &mut w);
            bytemuck::cast(w)
        }
        _ => FamilyHeader::default(),
    }
}

/// An instance table as last decoded, with the segment epoch and the
/// metadata generation it belongs to: the one cache of a decoded table.
/// [`SegmentView::instances_into`] decodes it again only when the segment
/// or its generation changed ([`SegmentView::snapshot_into`] applies the
/// same rule to a [`Snapshot`]'s instances).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceTable {
    /// The live instances, by slot (empty until the first decoding).
    pub instances: Vec<Instance>,
    /// Every family (1.0 entries as families of one instance first).
    pub families: Vec<Family>,
    /// (epoch, generation) of `instances`; `None`: nothing cached.
    at: Option<(u64, u64)>,
    /// What `families` imply, found when they were decoded.
    facts: TableFacts,
}

/// What a decoded family table implies, found once: the value slots its
/// members reach ([`slots_needed`]) and where its histograms' values are
/// in a CPU's row of a snapshot ([`HistogramPlace`]s at their value
/// slots). Kept with the identity of the very table it was found for
/// (where its buffer is, and its length): moving a `Vec` keeps its buffer;
/// swapping or assigning another one (as an agent that shares decoded
/// tables between two snapshots does) changes it, and that table is
/// walked again. Not part of a snapshot's or table's value: any two
/// compare equal (a clone has equal contents, in another buffer).
#[derive(Clone, Debug, Default)]
struct TableFacts {
    slots: usize,
    histograms: Vec<HistogramPlace>,
    table: (usize, usize),
}

impl PartialEq for TableFacts {
    fn eq(&self, _: &TableFacts) -> bool {
        true
    }
}

impl Eq for TableFacts {}

impl TableFacts {
    /// The facts of `families`, walked.
    fn of(families: &[Family]) -> Self {
        let mut facts = Self::default();
        facts.find(families);
        facts
    }

    /// Makes these the facts of `families`: the kept ones if they were
    /// found for them, else walked again.
    fn refresh(&mut self, families: &[Family]) {
        if Self::identity(families) != self.table {
            self.find(families);
        }
    }

    fn find(&mut self, families: &[Family]) {
        self.slots = slots_needed(families);
        self.histograms.clear();
        self.histograms.extend(
            family::histogram_members(families)
                .map(|(_, m)| HistogramPlace::of(m, m.value_slot as usize)),
        );
        self.table = Self::identity(families);
    }

    fn identity(families: &[Family]) -> (usize, usize) {
        (families.as_ptr() as usize, families.len())
    }
}

impl InstanceTable {
    /// The generation the table belongs to, if it holds one.
    pub fn generation(&self) -> Option<u64> {
        self.at.map(|(_, g)| g)
    }

    /// Forgets the table: the next read decodes it afresh.
    pub fn clear(&mut self) {
        self.instances.clear();
        self.families.clear();
        self.at = None;
        self.facts = TableFacts::default();
    }
}

/// A validated view of a segment held in shared atomic words.
#[derive(Clone, Copy, Debug)]
pub struct SegmentView<'a> {
    words: &'a [AtomicU64],
    layout: Layout,
    copy: CopyWords,
}

impl<'a> SegmentView<'a> {
    /// Copies the header out of `words` and validates it against
    /// `words.len() * 8` bytes. Nothing else is read before this succeeds.
    pub fn new(words: &'a [AtomicU64]) -> Result<Self, Error> {
        let h = load_header(words)?;
        let fh = load_family_header(words, &h);
        let layout = validate_header(&h, &fh, words.len() as u64 * 8)?;
        Ok(Self {
            words,
            layout,
            copy: load_words,
        })
    }

    /// A view with a layout validated earlier for a mapping of the same
    /// length (saves re-validating the header on every read). Refuses a
    /// layout that does not fit in `words`.
    #[inline]
    pub fn from_validated(words: &'a [AtomicU64], layout: Layout) -> Result<Self, Error> {
        if layout.segment_size > words.len() * 8 {
            return Err(Error::Truncated {
                needed: layout.segment_size as u64,
                have: words.len() as u64 * 8,
            });
        }
        Ok(Self {
            words,
            layout,
            copy: load_words,
        })
    }

    /// The same view copying value words (counters, histogram buckets,
    /// DAMON records) with `copy` instead of [`protocol::load_words`]; see
    /// [`CopyWords`] for what it must do. Metadata is always read with
    /// `load_words`.
    #[inline]
    pub fn with_copy(self, copy: CopyWords) -> Self {
        Self { copy, ..self }
    }

    /// Reads the per-CPU values of the instances in `slots` (with their
    /// registration ids) into `out` (`slots.len() * nr_cpus` values, slot
    /// major), inside one generation, each CPU's values between two equal
    /// even loads of its sequence word (so a group update is seen whole).
    /// Fails with [`Error::UnknownInstance`] if a slot no longer holds that
    /// registration. Returns the generation.
    #[inline]
    pub fn read_slots(
        &self,
        slots: &[(u32, u64)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<u64, Error> {
        self.read_slots_at(slots, None, out, retries)
    }

    /// [`read_slots`](Self::read_slots) of `slots` whose registrations a
    /// read of this segment found live at generation `verified`: see
    /// [`Values::read_slots_at`], which this is.
    #[inline]
    pub fn read_slots_at(
        &self,
        slots: &[(u32, u64)],
        verified: Option<u64>,
        out: &mut [u64],
        retries: u32,
    ) -> Result<u64, Error> {
        self.values()?.read_slots_at(slots, verified, out, retries)
    }

    /// Copies runs of value slots of every CPU inside one metadata
    /// generation: see [`Values::read_ranges`], which this is.
    #[inline]
    pub fn read_ranges(
        &self,
        runs: &[(usize, usize)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<u64, Error> {
        self.values()?.read_ranges(runs, out, retries)
    }

    /// The value blocks of this view, for the hot read paths (a validated
    /// layout's blocks always fit its words).
    #[inline]
    pub fn values(&self) -> Result<Values<'a>, Error> {
        Values::new(self.words, Blocks::of(&self.layout), self.copy)
    }

    /// The validated geometry.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    #[inline]
    fn word(&self, i: usize) -> &AtomicU64 {
        &self.words[i]
    }

    /// Current header state (each dynamic field one relaxed load).
    pub fn info(&self) -> Info {
        let l = &self.layout;
        let gen2 = self.word(HEADER_GEN2_WORD).load(Ordering::Relaxed);
        let gen1 = self.word(HEADER_GEN1_WORD).load(Ordering::Relaxed);
        Info {
            abi_major: l.abi_major,
            abi_minor: l.abi_minor,
            epoch: l.epoch,
            generation: gen2,
            metadata_busy: gen1 != gen2,
            writer_pid: l.writer_pid,
            writer_start_ns: l.writer_start_ns,
            heartbeat_ns: self.word(HEADER_HEARTBEAT_WORD).load(Ordering::Relaxed),
            heartbeat_interval_ns: l.heartbeat_interval_ns,
            flags: self.word(HEADER_FLAGS_WORD).load(Ordering::Relaxed),
            nr_cpus: l.nr_cpus,
            max_instances: l.max_instances,
            damon_capacity: l.damon_capacity,
            segment_size: l.segment_size,
        }
    }

    /// `instances_used`, clamped to the table capacity (a hostile writer may
    /// store anything there).
    #[inline]
    fn used(&self) -> usize {
        let u = self.word(HEADER_USED_WORD).load(Ordering::Relaxed);
        usize::try_from(u)
            .unwrap_or(usize::MAX)
            .min(self.layout.max_instances)
    }

    /// Decodes instance slots `0..used`. Called inside a generation window:
    /// a decoding error is only reported if the window turns out consistent.
    fn read_instances(&self, used: usize, out: &mut Vec<Instance>) -> Result<(), Error> {
        out.clear();
        let mut ew = [0u64; INSTANCE_ENTRY_WORDS];
        for slot in 0..used {
            load_words(self.words, self.layout.instance_word(slot), &mut ew);
            let e: InstanceEntry = bytemuck::cast(ew);
            let bad = |field| Error::BadEntry {
                slot: slot as u32,
                field,
            };
            match e.state {
                s if s == SlotState::Free as u32 => continue,
                s if s == SlotState::Live as u32 => {}
                _ => return Err(bad(EntryField::State)),
            }
            let name = name::decode(&e.name)
                .filter(|n| name::check_name(n).is_ok())
                .ok_or(bad(EntryField::Name))?;
            let unit = name::decode(&e.unit)
                .filter(|u| name::check_unit(u).is_ok())
                .ok_or(bad(EntryField::Unit))?;
            if e.reg_id == 0 {
                return Err(bad(EntryField::RegId));
            }
            out.push(Instance {
                slot: slot as u32,
                reg_id: e.reg_id,
                name: name.to_string(),
                unit: unit.to_string(),
                semantics: Semantics::from_raw(e.semantics).ok_or(bad(EntryField::Semantics))?,
                value_type: ValueType::from_raw(e.value_type).ok_or(bad(EntryField::ValueType))?,
            });
        }
        Ok(())
    }

    /// Decodes the live family and member entries (none without family
    /// tables). Called inside a generation window, like
    /// [`Self::read_instances`]; the rules spanning entries are checked by
    /// [`family::assemble`] once the window closed.
    fn read_families(&self, raw: &mut RawFamilies) -> Result<(), Error> {
        raw.defs.clear();
        raw.members.clear();
        let Some(t) = self.layout.families else {
            return Ok(());
        };
        let clamp = |w: usize, max: usize| {
            usize::try_from(self.word(w).load(Ordering::Relaxed))
                .unwrap_or(usize::MAX)
                .min(max)
        };
        let mut fw = [0u64; FAMILY_ENTRY_WORDS];
        for slot in 0..clamp(HEADER_FAMILIES_USED_WORD, t.max_families) {
            load_words(self.words, t.family_word(slot), &mut fw);
            let e: FamilyEntry = bytemuck::cast(fw);
            raw.defs.extend(family::decode_family(slot as u32, &e)?);
        }
        let mut mw = [0u64; MEMBER_ENTRY_WORDS];
        for slot in 0..clamp(HEADER_MEMBERS_USED_WORD, t.max_members) {
            load_words(self.words, t.member_word(slot), &mut mw);
            let e: MemberEntry = bytemuck::cast(mw);
            raw.members.extend(family::decode_member(slot as u32, &e)?);
        }
        Ok(())
    }

    /// The family tables, if the segment has them.
    pub fn family_tables(&self) -> Option<FamilyTables> {
        self.layout.families
    }

    /// The live instances, read inside one generation.
    pub fn instances(&self, retries: u32) -> Result<(Vec<Instance>, u64), Error> {
        let mut t = InstanceTable::default();
        let g = self.instances_into(&mut t, retries)?;
        Ok((t.instances, g))
    }

    /// Every family with its instances (1.0 entries as families of one
    /// instance), read inside one generation.
    pub fn families(&self, retries: u32) -> Result<(Vec<Family>, u64), Error> {
        let mut t = InstanceTable::default();
        let g = self.instances_into(&mut t, retries)?;
        Ok((t.families, g))
    }

    /// Brings `table` up to date inside one generation: decoded afresh
    /// only if it belongs to another segment or generation (one generation
    /// check otherwise). Returns the generation.
    pub fn instances_into(&self, table: &mut InstanceTable, retries: u32) -> Result<u64, Error> {
        let cached = table
            .at
            .filter(|&(epoch, _)| epoch == self.layout.epoch)
            .map(|(_, g)| g);
        table.at = None;
        let mut raw = RawFamilies::default();
        table.facts.refresh(&table.families);
        let needs = table.facts.slots;
        let r = gen_read::<Sound, _, Error>(self.gen1(), self.gen2(), retries, |g| {
            let used = self.used();
            Ok((
                self.table_at(g, used, cached, needs, &mut table.instances, &mut raw),
                used,
            ))
        })?;
        let ((fresh, used), g) = r.ok_or(Error::BusyMetadata)?;
        // Outside the generation window: the sorts do not widen it.
        if fresh? {
            table.families = raw.assemble(&table.instances, used)?;
            table.facts = TableFacts::of(&table.families);
        }
        table.at = Some((self.layout.epoch, g));
        Ok(g)
    }

    /// Inside a generation window at generation `g` with `used` slots:
    /// keeps the decoded tables if they were decoded at `cached == Some(g)`
    /// and their values fit in `used` slots (`needs`), else decodes them
    /// again. `Ok(true)`: decoded afresh, still to be checked by
    /// [`RawFamilies::assemble`] (outside the window).
    fn table_at(
        &self,
        g: u64,
        used: usize,
        cached: Option<u64>,
        needs: usize,
        instances: &mut Vec<Instance>,
        raw: &mut RawFamilies,
    ) -> Result<bool, Error> {
        if cached == Some(g) && needs <= used {
            Ok(false)
        } else {
            self.read_instances(used, instances)?;
            self.read_families(raw).map(|()| true)
        }
    }

    fn gen1(&self) -> &AtomicU64 {
        self.word(HEADER_GEN1_WORD)
    }
    fn gen2(&self) -> &AtomicU64 {
        self.word(HEADER_GEN2_WORD)
    }
    fn seq(&self, cpu: usize) -> &AtomicU64 {
        self.word(self.layout.cpu_block_word(cpu) + CPU_SEQ_WORD)
    }

    /// Copies counters `0..out.len()` of `cpu` between two equal even loads of
    /// its sequence word. `cpu < nr_cpus` and `out.len() <= max_instances`.
    /// Raw words: a caller serving histogram values from them checks them
    /// with [`family::check_histograms`].
    #[inline]
    pub fn read_cpu_counters(
        &self,
        cpu: usize,
        out: &mut [u64],
        retries: u32,
    ) -> Result<(), Error> {
        if cpu >= self.layout.nr_cpus || out.len() > self.layout.max_instances {
            return Err(Error::OutOfBounds(crate::error::Section::Counters));
        }
        let start = self.layout.counter_word(cpu, 0);
        seq_read::<Sound, _>(self.seq(cpu), retries, || {
            (self.copy)(self.words, start, out)
        })
        .ok_or(Error::BusyCpu(cpu as u32))
    }

    /// Fills `snap` with a consistent snapshot. Instance metadata is decoded
    /// again only when the generation differs from the one `snap` holds, so
    /// repeated snapshots of an unchanged table copy values only. A copy in
    /// which a histogram's count is not its buckets' sum is refused
    /// ([`Error::BadHistogram`], by [`family::check_histograms`]).
    #[inline]
    pub fn snapshot_into(&self, snap: &mut Snapshot, retries: u32) -> Result<(), Error> {
        match self.snapshot_kept(snap, retries) {
            Some(r) => r,
            None => self.snapshot_decoded(snap, retries),
        }
    }

    /// [`snapshot_into`](Self::snapshot_into) when the table `snap` holds
    /// cannot be kept: decoded (again) inside the generation window, with
    /// the values. Out of line: what a snapshot of an unchanged table
    /// inlines is [`snapshot_kept`](Self::snapshot_kept) alone.
    #[inline(never)]
    fn snapshot_decoded(&self, snap: &mut Snapshot, retries: u32) -> Result<(), Error> {
        let nr_cpus = self.layout.nr_cpus;
        let same_table = snap.epoch == self.layout.epoch && !snap.families.is_empty();
        let cached_gen = if same_table {
            Some(snap.generation)
        } else {
            None
        };
        let mut facts = core::mem::take(&mut snap.facts);
        facts.refresh(&snap.families);
        let needs = facts.slots;
        let mut instances = core::mem::take(&mut snap.instances);
        let mut families = core::mem::take(&mut snap.families);
        let mut values = core::mem::take(&mut snap.values);
        let mut raw = RawFamilies::default();
        let r = gen_read::<Sound, _, Error>(self.gen1(), self.gen2(), retries, |g| {
            let used = self.used();
            let decoded = self.table_at(g, used, cached_gen, needs, &mut instances, &mut raw);
            values.resize(nr_cpus * used, 0);
            // The values served are consistent copies: a histogram's count
            // is its buckets' sum on every CPU (spec §5.1). With the tables
            // kept, each CPU's row is checked while it is fresh in the
            // cache (a failure counts only if the window proves
            // consistent); tables decoded afresh, after the window.
            let kept = matches!(decoded, Ok(false)).then_some(&facts.histograms[..]);
            let mut histograms = Ok(());
            for cpu in 0..nr_cpus {
                let row = &mut values[cpu * used..(cpu + 1) * used];
                self.read_cpu_counters(cpu, row, retries)?;
                if let (Some(places), Ok(())) = (kept, &histograms) {
                    histograms = family::check_histogram_row(places, cpu, row);
                }
            }
            Ok((decoded, used, histograms))
        });
        let ok = match r {
            // The rules spanning entries are checked outside the generation
            // window: the sorts do not widen it.
            Ok(Some(((Ok(fresh), used, histograms), g))) => {
                let checked = if fresh {
                    raw.assemble(&instances, used).and_then(|f| {
                        facts = TableFacts::of(&f);
                        families = f;
                        family::check_histograms(&facts.histograms, &values, used)
                    })
                } else {
                    histograms
                };
                checked.map(|()| (used, g))
            }
            Ok(Some(((Err(e), _, _), _))) | Err(e) => Err(e),
            Ok(None) => Err(Error::BusyMetadata),
        };
        match ok {
            Ok((used, g)) => {
                *snap = Snapshot {
                    generation: g,
                    epoch: self.layout.epoch,
                    instances,
                    families,
                    nr_cpus,
                    slots: used,
                    values,
                    facts,
                };
                Ok(())
            }
            Err(e) => {
                *snap = Snapshot {
                    instances,
                    families,
                    values,
                    ..Snapshot::default()
                };
                snap.forget();
                Err(e)
            }
        }
    }

    /// [`snapshot_into`](Self::snapshot_into) of a table `snap` holds
    /// decoded at the generation the segment is still at: the values only,
    /// copied in place, with the same checks (inside one generation
    /// window, each CPU's row between two equal even sequence loads, every
    /// histogram's count its buckets' sum) and no buffer moved, taken or
    /// dropped, which is most of a small snapshot's cost. `None` when the
    /// table must be decoded (another epoch, generation or geometry, or
    /// families edited since): the caller then takes the full path.
    #[inline]
    fn snapshot_kept(&self, snap: &mut Snapshot, retries: u32) -> Option<Result<(), Error>> {
        let nr_cpus = self.layout.nr_cpus;
        if snap.epoch != self.layout.epoch
            || snap.families.is_empty()
            || snap.nr_cpus != nr_cpus
            || TableFacts::identity(&snap.families) != snap.facts.table
        {
            return None;
        }
        let (cached, needs) = (snap.generation, snap.facts.slots);
        let Snapshot { values, facts, .. } = &mut *snap;
        // As in the full path: each row checked while fresh in the cache;
        // a failure counts only if the window proves consistent. Kept
        // outside the window's result, which stays two words.
        let mut histograms = Ok(());
        let r = gen_read::<Sound, _, Error>(self.gen1(), self.gen2(), retries, |g| {
            let used = self.used();
            if g != cached || needs > used {
                return Ok(None);
            }
            values.resize(nr_cpus * used, 0);
            histograms = Ok(());
            // Row `cpu` by multiplication, not `chunks_exact_mut(used)`,
            // which divides by `used` (a division is a tenth of a small
            // snapshot). No slot used: no row, no block read, as before.
            let rows = if used == 0 { 0 } else { nr_cpus };
            for cpu in 0..rows {
                let row = &mut values[cpu * used..][..used];
                self.read_cpu_counters(cpu, row, retries)?;
                // (A table without histograms has nothing to check: no call.)
                if histograms.is_ok() && !facts.histograms.is_empty() {
                    histograms = family::check_histogram_row(&facts.histograms, cpu, row);
                }
            }
            Ok(Some(used))
        });
        let e = match r {
            Ok(Some((None, _))) => return None,
            Ok(Some((Some(used), _))) => match histograms {
                Ok(()) => {
                    snap.slots = used;
                    return Some(Ok(()));
                }
                Err(e) => e,
            },
            Err(e) => e,
            Ok(None) => Error::BusyMetadata,
        };
        snap.forget();
        Some(Err(e))
    }

    /// A fresh consistent snapshot.
    pub fn snapshot(&self, retries: u32) -> Result<Snapshot, Error> {
        let mut s = Snapshot::default();
        self.snapshot_into(&mut s, retries)?;
        Ok(s)
    }

    /// Appends to `out` the non-empty DAMON records of `cpu`'s ring from
    /// slot `from` on, each copied between two equal even loads of the CPU's
    /// sequence word. If a slot stays busy for the retry bound, returns
    /// `Err(slot)`: the records before it are in `out`, and a later call
    /// may go on from that slot.
    pub fn damon_cpu_records(
        &self,
        cpu: usize,
        from: usize,
        retries: u32,
        out: &mut Vec<DamonRecord>,
    ) -> Result<(), usize> {
        if cpu >= self.layout.nr_cpus {
            return Ok(());
        }
        let mut rw = [0u64; DAMON_RECORD_WORDS];
        for slot in from..self.layout.damon_capacity {
            let at = self.layout.damon_word(cpu, slot);
            seq_read::<Sound, _>(self.seq(cpu), retries, || {
                (self.copy)(self.words, at, &mut rw)
            })
            .ok_or(slot)?;
            let r: DamonRecord = bytemuck::cast(rw);
            if r.aggregation != 0 {
                out.push(r);
            }
        }
        Ok(())
    }

    /// The most recent complete aggregation of every (monitor, target),
    /// rebuilt from the rings of every CPU whose records could be read
    /// (`spec/PERFABI.md` §6.4): a CPU whose block stays busy for the retry
    /// bound is left out and named in [`DamonRead::busy_cpus`], so one block
    /// mid-publication never hides the others' regions.
    pub fn damon(&self, retries: u32) -> DamonRead {
        let mut records = Vec::new();
        let mut busy_cpus = Vec::new();
        for cpu in 0..self.layout.nr_cpus {
            if self
                .damon_cpu_records(cpu, 0, retries, &mut records)
                .is_err()
            {
                busy_cpus.push(cpu as u32);
            }
        }
        DamonRead {
            aggregations: damon::rebuild(records),
            busy_cpus,
        }
    }

    /// `damon_dropped` of `cpu` (records its writer could not store).
    pub fn damon_dropped(&self, cpu: usize) -> u64 {
        if cpu >= self.layout.nr_cpus {
            return 0;
        }
        self.word(self.layout.cpu_block_word(cpu) + CPU_DAMON_DROPPED_WORD)
            .load(Ordering::Relaxed)
    }
}

/// Family and member entries decoded inside a generation window.
#[derive(Default)]
struct RawFamilies {
    defs: Vec<FamilyDef>,
    members: Vec<MemberDef>,
}

impl RawFamilies {
    /// The families of a consistent copy of the tables (the 1.0 entries
    /// `instances`, these entries, `used` value slots), every rule spanning
    /// entries checked ([`family::assemble`]: spec §5, §5.4).
    fn assemble(&self, instances: &[Instance], used: usize) -> Result<Vec<Family>, Error> {
        family::assemble(instances, &self.defs, &self.members, used)
    }
}

/// Value slots the families' members reach (a cached table is reused only
/// while `instances_used` still covers them).
fn slots_needed(families: &[Family]) -> usize {
    families
        .iter()
        .flat_map(|f| &f.members)
        .map(|m| m.value_slot as usize + m.words as usize)
        .max()
        .unwrap_or(0)
}

/// Re-exported so users of [`SegmentView`] need not import the protocol.
pub use protocol::DEFAULT_RETRIES;
