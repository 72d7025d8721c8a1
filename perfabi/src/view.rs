//! Reading a segment that another thread or process writes.
//!
//! A [`SegmentView`] sees the segment as a slice of 8-byte atomic words and
//! reads it only through [`crate::protocol`]: `Relaxed` loads and acquire
//! fences, never a plain reference to shared data. The `reader` crate builds
//! on this with mapping, re-mapping and liveness; the userspace writer uses it
//! to read back its own segment.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::damon::{self, DamonRead};
use crate::error::{EntryField, Error};
use crate::layout::*;
use crate::name;
use crate::protocol::{self, gen_read, load_words, seq_read, Sound};
use crate::sync::{AtomicU64, Ordering};
use crate::validate::{validate_header, Layout};

/// A live instance as read from the instance table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Slot index: the index of its value in every per-CPU counter array.
    pub slot: u32,
    /// Registration id (changes when the slot is reused).
    pub reg_id: u64,
    /// Name.
    pub name: String,
    /// Unit (may be empty).
    pub unit: String,
    /// Counter or instant.
    pub semantics: Semantics,
    /// Unsigned or signed.
    pub value_type: ValueType,
}

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
    /// Live instances, by slot.
    pub instances: Vec<Instance>,
    /// Number of per-CPU blocks.
    pub nr_cpus: usize,
    /// Slots copied per CPU (`instances_used` at that generation).
    pub slots: usize,
    /// `values[cpu * slots + slot]`.
    pub values: Vec<u64>,
}

impl Snapshot {
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

/// An instance table as last decoded, with the segment epoch and the
/// metadata generation it belongs to: the one cache of a decoded table.
/// [`SegmentView::instances_into`] decodes it again only when the segment
/// or its generation changed ([`SegmentView::snapshot_into`] applies the
/// same rule to a [`Snapshot`]'s instances).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceTable {
    /// The live instances, by slot (empty until the first decoding).
    pub instances: Vec<Instance>,
    /// (epoch, generation) of `instances`; `None`: nothing cached.
    at: Option<(u64, u64)>,
}

impl InstanceTable {
    /// The generation the table belongs to, if it holds one.
    pub fn generation(&self) -> Option<u64> {
        self.at.map(|(_, g)| g)
    }

    /// Forgets the table: the next read decodes it afresh.
    pub fn clear(&mut self) {
        self.instances.clear();
        self.at = None;
    }
}

/// A validated view of a segment held in shared atomic words.
#[derive(Clone, Copy, Debug)]
pub struct SegmentView<'a> {
    words: &'a [AtomicU64],
    layout: Layout,
}

impl<'a> SegmentView<'a> {
    /// Copies the header out of `words` and validates it against
    /// `words.len() * 8` bytes. Nothing else is read before this succeeds.
    pub fn new(words: &'a [AtomicU64]) -> Result<Self, Error> {
        let h = load_header(words)?;
        let layout = validate_header(&h, words.len() as u64 * 8)?;
        Ok(Self { words, layout })
    }

    /// A view with a layout validated earlier for a mapping of the same
    /// length (saves re-validating the header on every read). Refuses a
    /// layout that does not fit in `words`.
    pub fn from_validated(words: &'a [AtomicU64], layout: Layout) -> Result<Self, Error> {
        if layout.segment_size > words.len() * 8 {
            return Err(Error::Truncated {
                needed: layout.segment_size as u64,
                have: words.len() as u64 * 8,
            });
        }
        Ok(Self { words, layout })
    }

    /// Reads the per-CPU values of the instances in `slots` (with their
    /// registration ids) into `out` (`slots.len() * nr_cpus` values, slot
    /// major), inside one generation, each CPU's values between two equal
    /// even loads of its sequence word (so a group update is seen whole).
    /// Fails with [`Error::UnknownInstance`] if a slot no longer holds that
    /// registration. Returns the generation.
    pub fn read_slots(
        &self,
        slots: &[(u32, u64)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<u64, Error> {
        let n = self.layout.nr_cpus;
        if out.len() != slots.len() * n
            || slots
                .iter()
                .any(|&(s, _)| s as usize >= self.layout.max_instances)
        {
            return Err(Error::OutOfBounds(crate::error::Section::Counters));
        }
        let reg_word = core::mem::offset_of!(InstanceEntry, reg_id) / 8;
        let state_word = core::mem::offset_of!(InstanceEntry, state) / 8;
        const _: () = assert!(core::mem::offset_of!(InstanceEntry, state) % 8 == 0);
        let r = gen_read::<Sound, _, Error>(self.gen1(), self.gen2(), retries, |_| {
            let mut live = true;
            for &(slot, reg) in slots {
                let e = self.layout.instance_word(slot as usize);
                // `state` is the first 4 bytes of its word, in native order.
                let w = self
                    .word(e + state_word)
                    .load(Ordering::Relaxed)
                    .to_ne_bytes();
                let state = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
                live &= self.word(e + reg_word).load(Ordering::Relaxed) == reg
                    && state == SlotState::Live as u32;
            }
            for cpu in 0..n {
                seq_read::<Sound, _>(self.seq(cpu), retries, || {
                    for (k, &(slot, _)) in slots.iter().enumerate() {
                        out[k * n + cpu] = self
                            .word(self.layout.counter_word(cpu, slot as usize))
                            .load(Ordering::Relaxed);
                    }
                })
                .ok_or(Error::BusyCpu(cpu as u32))?;
            }
            Ok(live)
        })?;
        match r {
            Some((true, g)) => Ok(g),
            Some((false, _)) => Err(Error::UnknownInstance),
            None => Err(Error::BusyMetadata),
        }
    }

    /// The validated geometry.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

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

    /// The live instances, read inside one generation.
    pub fn instances(&self, retries: u32) -> Result<(Vec<Instance>, u64), Error> {
        let mut v = Vec::new();
        let r = gen_read::<Sound, _, Error>(self.gen1(), self.gen2(), retries, |_| {
            Ok(self.read_instances(self.used(), &mut v))
        })?;
        let (decoded, g) = r.ok_or(Error::BusyMetadata)?;
        decoded?;
        // Outside the generation window: the sort does not widen it.
        unique(&v)?;
        Ok((v, g))
    }

    /// Brings `table` up to date inside one generation: decoded afresh
    /// only if it belongs to another segment or generation (one generation
    /// check otherwise). Returns the generation.
    pub fn instances_into(&self, table: &mut InstanceTable, retries: u32) -> Result<u64, Error> {
        let cached = table
            .at
            .filter(|&(epoch, _)| epoch == self.layout.epoch)
            .map(|(_, g)| g);
        let instances = &mut table.instances;
        table.at = None;
        let r = gen_read::<Sound, _, Error>(self.gen1(), self.gen2(), retries, |g| {
            Ok(self.table_at(g, self.used(), cached, instances))
        })?;
        let (fresh, g) = r.ok_or(Error::BusyMetadata)?;
        // Outside the generation window: the sort does not widen it.
        if fresh? {
            unique(instances)?;
        }
        table.at = Some((self.layout.epoch, g));
        Ok(g)
    }

    /// Inside a generation window at generation `g` with `used` slots:
    /// keeps `instances` if they were decoded at `cached == Some(g)` and
    /// fit, else decodes them again. `Ok(true)`: decoded afresh, still to be
    /// checked for uniqueness (outside the window).
    fn table_at(
        &self,
        g: u64,
        used: usize,
        cached: Option<u64>,
        instances: &mut Vec<Instance>,
    ) -> Result<bool, Error> {
        if cached == Some(g) && instances_fit(instances, used) {
            Ok(false)
        } else {
            self.read_instances(used, instances).map(|()| true)
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
            load_words(self.words, start, out)
        })
        .ok_or(Error::BusyCpu(cpu as u32))
    }

    /// Fills `snap` with a consistent snapshot. Instance metadata is decoded
    /// again only when the generation differs from the one `snap` holds, so
    /// repeated snapshots of an unchanged table copy values only.
    pub fn snapshot_into(&self, snap: &mut Snapshot, retries: u32) -> Result<(), Error> {
        let nr_cpus = self.layout.nr_cpus;
        let same_table = snap.epoch == self.layout.epoch && !snap.instances.is_empty();
        let cached_gen = if same_table {
            Some(snap.generation)
        } else {
            None
        };
        let mut instances = core::mem::take(&mut snap.instances);
        let mut values = core::mem::take(&mut snap.values);
        let r = gen_read::<Sound, _, Error>(self.gen1(), self.gen2(), retries, |g| {
            let used = self.used();
            let decoded = self.table_at(g, used, cached_gen, &mut instances);
            values.resize(nr_cpus * used, 0);
            for cpu in 0..nr_cpus {
                self.read_cpu_counters(cpu, &mut values[cpu * used..(cpu + 1) * used], retries)?;
            }
            Ok((decoded, used))
        });
        let ok = match r {
            // Uniqueness is checked outside the generation window: the sort
            // does not widen it.
            Ok(Some(((Ok(fresh), used), g))) => {
                if fresh {
                    unique(&instances).map(|()| (used, g))
                } else {
                    Ok((used, g))
                }
            }
            Ok(Some(((Err(e), _), _))) | Err(e) => Err(e),
            Ok(None) => Err(Error::BusyMetadata),
        };
        match ok {
            Ok((used, g)) => {
                *snap = Snapshot {
                    generation: g,
                    epoch: self.layout.epoch,
                    instances,
                    nr_cpus,
                    slots: used,
                    values,
                };
                Ok(())
            }
            Err(e) => {
                // Keep the buffers for the next attempt, but never a stale cache.
                instances.clear();
                *snap = Snapshot {
                    instances,
                    values,
                    ..Snapshot::default()
                };
                Err(e)
            }
        }
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
                load_words(self.words, at, &mut rw)
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

fn instances_fit(instances: &[Instance], used: usize) -> bool {
    instances.last().is_none_or(|i| (i.slot as usize) < used)
}

/// Re-exported so users of [`SegmentView`] need not import the protocol.
pub use protocol::DEFAULT_RETRIES;

/// Live entries must have distinct registration ids and names that are
/// distinct to consumers (spec §5): `O(n log n)` in the live entries, run
/// on a consistent copy once the generation window closed.
fn unique(live: &[Instance]) -> Result<(), Error> {
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
