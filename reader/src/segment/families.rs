//! Metric families through a [`Segment`] (ABI 1.1, `spec/PERFABI.md` §5):
//! listing them with their instances, and the hot path that reads the
//! instances of one family again and again ([`FamilyHandle`]).
//!
//! Every ABI 1.0 entry is a family of one instance (with an empty instance
//! string), so a handle works the same on a 1.0 segment.

use perfabi::{Family, HistogramPlace, InstanceTable, Reading};
use perfabi_shm::SegmentMap;

use super::Segment;
use crate::error::Error;

/// One family looked up once (by [`Segment::family_handle`]) and read many
/// times with [`Segment::read_family`].
///
/// It holds what a read needs, resolved from the family and member tables
/// at one metadata generation: the value slots of every instance and the
/// copies that gather them. A read at the same generation uses them as they
/// are; when the generation moved (an instance came or went, a peak was
/// reset), the read resolves them again from the tables of the new
/// generation, so the handle follows its family's instances. It is bound
/// to the family's registration: once the family is deleted, or the
/// segment created again, reads fail with
/// [`Error::Abi`]`(`[`perfabi::Error::UnknownInstance`]`)`; look it up again
/// then.
#[derive(Clone, Debug)]
pub struct FamilyHandle {
    family: Family,
    epoch: u64,
    /// The generation `family` and the runs were resolved at; `None` after
    /// a failed read (the next read resolves them again).
    generation: Option<u64>,
    /// Runs of value slots `(first, len)` copied, in order, into a CPU's
    /// row of [`FamilyValues`] (adjacent members merged).
    ranges: Vec<(usize, usize)>,
    /// (offset in a row, words) of every member, in `family.members` order.
    places: Vec<(u32, u32)>,
    /// Words of one CPU's row: the members' words, all together.
    stride: usize,
    /// Where a row holds the histogram members' values, checked at every
    /// read ([`perfabi::family::check_histograms`]).
    histograms: Vec<HistogramPlace>,
    /// Which plan `places` are ([`Plan::next`]): a [`FamilyValues`]
    /// that holds this plan's places already is not given them again.
    plan: Plan,
}

/// The identity of one [`FamilyHandle::plan`]'s places (a clone of the
/// handle shares it while its places are the same; every new plan gets a
/// new one). Not part of a handle's or values' value: any two compare
/// equal, as the places they name are compared themselves.
#[derive(Clone, Copy, Debug, Default)]
struct Plan(u64);

impl Plan {
    /// A plan no other has been (0, [`Default`], is none).
    fn next() -> Self {
        static PLANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self(PLANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl PartialEq for Plan {
    fn eq(&self, _: &Plan) -> bool {
        true
    }
}

impl Eq for Plan {}

impl FamilyHandle {
    fn new(family: Family, epoch: u64, generation: u64) -> Self {
        let mut h = Self {
            family,
            epoch,
            generation: Some(generation),
            ranges: Vec::new(),
            places: Vec::new(),
            stride: 0,
            histograms: Vec::new(),
            plan: Plan::default(),
        };
        h.plan();
        h
    }

    /// The family as of the last read (or the look-up): name, help, kind,
    /// unit, buckets, and its instances in the order
    /// [`FamilyValues`] holds their values.
    pub fn family(&self) -> &Family {
        &self.family
    }

    /// The metadata generation the handle was last resolved at.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// Works out the copies for `self.family`: members in order, adjacent
    /// value slots merged into one run.
    fn plan(&mut self) {
        self.ranges.clear();
        self.places.clear();
        self.plan = Plan::next();
        let mut dst = 0usize;
        for m in &self.family.members {
            let (src, len) = (m.value_slot as usize, m.words as usize);
            self.places.push((dst as u32, m.words));
            match self.ranges.last_mut() {
                Some(r) if r.0 + r.1 == src => r.1 += len,
                _ => self.ranges.push((src, len)),
            }
            dst += len;
        }
        self.stride = dst;
        self.histograms.clear();
        let places = &self.places;
        self.histograms.extend(
            perfabi::family::histogram_members(core::slice::from_ref(&self.family))
                .map(|(k, m)| HistogramPlace::of(m, places[k].0 as usize)),
        );
    }

    /// Decodes the tables of the current generation into `names` and
    /// resolves the handle again from them: a read's slow path, kept out
    /// of its loop.
    #[cold]
    #[inline(never)]
    fn reresolve(
        &mut self,
        map: &SegmentMap,
        names: &mut InstanceTable,
        retries: u32,
    ) -> Result<(), perfabi::Error> {
        let g = map.view().instances_into(names, retries)?;
        self.resolve(&names.families, g)
    }

    /// Resolves the handle again from `families`, decoded at generation
    /// `g`: the same registration of the family, with its instances now.
    fn resolve(&mut self, families: &[Family], g: u64) -> Result<(), perfabi::Error> {
        let now = families
            .iter()
            .find(|f| f.origin == self.family.origin && f.reg_id == self.family.reg_id)
            .ok_or(perfabi::Error::UnknownInstance)?;
        self.family.clone_from(now);
        self.plan();
        self.generation = Some(g);
        Ok(())
    }

    /// One attempt at a read: the values of every instance on every CPU,
    /// inside one metadata generation (`spec/PERFABI.md` §7.4), by the
    /// core's [`perfabi::Values::read_ranges`] of the handle's runs (each CPU's
    /// runs one consistent copy, so a histogram observation is seen whole;
    /// a copy where a histogram's count is not its buckets' sum is refused,
    /// [`perfabi::family::check_histograms`]).
    /// If the generation is not the one the runs were resolved at, they are
    /// resolved again from the tables of the current generation
    /// ([`perfabi::SegmentView::instances_into`]) and the read is made again.
    fn attempt(
        &mut self,
        map: &SegmentMap,
        names: &mut InstanceTable,
        out: &mut FamilyValues,
        retries: u32,
    ) -> Result<u64, perfabi::Error> {
        if self.epoch != map.layout().epoch {
            return Err(perfabi::Error::UnknownInstance);
        }
        let values = map.values();
        let n = values.blocks().nr_cpus();
        for _ in 0..2 {
            out.words.resize(n * self.stride, 0);
            let g = values.read_ranges(&self.ranges, &mut out.words, retries)?;
            if self.generation == Some(g) {
                // Served only as consistent copies (spec §5.1).
                if !self.histograms.is_empty() {
                    perfabi::family::check_histograms(&self.histograms, &out.words, self.stride)?;
                }
                if out.plan.0 != self.plan.0 {
                    out.places.clone_from(&self.places);
                    out.plan = self.plan;
                }
                out.stride = self.stride;
                out.nr_cpus = n;
                out.generation = g;
                return Ok(g);
            }
            self.reresolve(map, names, retries)?;
        }
        // The generation moved twice during two reads: busy, try later.
        Err(perfabi::Error::BusyMetadata)
    }
}

/// The values of one family's instances on every CPU, as one
/// [`Segment::read_family`] read them: consistent (one metadata generation;
/// each CPU's values one consistent copy). Member `k` is
/// `handle.family().members[k]`.
///
/// A read that fails leaves it empty (no instance, no CPU, as
/// [`Default`]): neither what the failed read copied (which may be another
/// family's values, from the slots of a deleted one) nor the values of an
/// earlier read are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FamilyValues {
    generation: u64,
    nr_cpus: usize,
    stride: usize,
    places: Vec<(u32, u32)>,
    /// The plan `places` came from (none: [`Plan::default`]).
    plan: Plan,
    /// `words[cpu * stride + offset(member) ..][..words(member)]`.
    words: Vec<u64>,
}

impl FamilyValues {
    /// Forgets the values, keeping the memory: what a failed read leaves.
    fn clear(&mut self) {
        self.generation = 0;
        self.nr_cpus = 0;
        self.stride = 0;
        self.places.clear();
        self.plan = Plan::default();
        self.words.clear();
    }

    /// The metadata generation the values were read at.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of per-CPU blocks read.
    pub fn nr_cpus(&self) -> usize {
        self.nr_cpus
    }

    /// Number of instances read.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// Whether the family had no live instance.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The value words of member `member` on `cpu`: one word, or a
    /// histogram's count, sum and buckets. Panics if either is out of
    /// range.
    pub fn words(&self, member: usize, cpu: usize) -> &[u64] {
        assert!(cpu < self.nr_cpus, "cpu {cpu} of {}", self.nr_cpus);
        let (at, n) = self.places[member];
        let at = cpu * self.stride + at as usize;
        &self.words[at..at + n as usize]
    }

    /// The value of member `member` of `family` (the handle's
    /// [`FamilyHandle::family`]) on `cpu`.
    pub fn reading_on(&self, family: &Family, member: usize, cpu: usize) -> Reading {
        Reading::from_words(family, self.words(member, cpu))
    }

    /// The total of member `member` of `family` over all CPUs: a sum, the
    /// maximum for a peak, bucket by bucket for a histogram.
    pub fn reading(&self, family: &Family, member: usize) -> Reading {
        Reading::total_words(family, (0..self.nr_cpus).map(|c| self.words(member, c)))
    }
}

impl Segment {
    /// Every metric family with its live instances, help, unit, labels and
    /// buckets: each live ABI 1.0 entry as a family of one instance, then
    /// the family table's (decoded again only when the generation moved).
    pub fn families(&mut self) -> Result<Vec<Family>, Error> {
        self.refresh_names()?;
        Ok(self.names.families.clone())
    }

    /// The family called `name`, with its live instances.
    pub fn family(&mut self, name: &str) -> Result<Family, Error> {
        self.refresh_names()?;
        self.names
            .families
            .iter()
            .find(|f| f.name == name)
            .cloned()
            .ok_or_else(|| Error::NoSuchFamily(name.to_string()))
    }

    /// Looks a family up by name, for repeated
    /// [`read_family`](Self::read_family)s.
    pub fn family_handle(&mut self, name: &str) -> Result<FamilyHandle, Error> {
        self.refresh_names()?;
        let g = self
            .names
            .generation()
            .expect("refresh_names decoded the table");
        let f = self
            .names
            .families
            .iter()
            .find(|f| f.name == name)
            .cloned()
            .ok_or_else(|| Error::NoSuchFamily(name.to_string()))?;
        Ok(FamilyHandle::new(f, self.map.layout().epoch, g))
    }

    /// The hot path for a family: reads the values of every instance of
    /// `h`'s family on every CPU into `out`, inside one metadata
    /// generation, copying only the counters up to the family's last value
    /// slot. No system call; no allocation once `out` and `h` have held as
    /// many instances. If the generation moved since the last read, `h` is
    /// first resolved again (its instances may have changed: see
    /// [`FamilyHandle::family`]). Returns the generation. If it fails,
    /// `out` is left empty (see [`FamilyValues`]): read again.
    ///
    /// Like [`read`](Self::read), it does not re-check the path or the
    /// writer: call [`refresh`](Self::refresh) (or any other method) from
    /// time to time to follow a restarted writer.
    pub fn read_family(
        &mut self,
        h: &mut FamilyHandle,
        out: &mut FamilyValues,
    ) -> Result<u64, Error> {
        let (map, retries) = (&self.map, self.opts.retries);
        let names = &mut self.names;
        match patiently!(&self.opts, h.attempt(map, names, out, retries)) {
            // Served as the other hot paths are (see `unserved`).
            Ok(g) if self.map.sound() => Ok(g),
            r => self.read_family_failed(r, h, out),
        }
    }

    /// [`read_family`](Self::read_family) of an attempt that failed, or
    /// of a mapping that a truncation or a changed header made void.
    #[cold]
    #[inline(never)]
    fn read_family_failed(
        &mut self,
        r: Result<u64, perfabi::Error>,
        h: &mut FamilyHandle,
        out: &mut FamilyValues,
    ) -> Result<u64, Error> {
        let r = self.unserved(r);
        if r.is_err() {
            // What was decoded from a truncated or replaced mapping is void.
            self.names.clear();
            h.generation = None;
            // So is what the attempts copied: words read with runs of a
            // family that is gone (another's values now), or half a read.
            out.clear();
        }
        r
    }
}
