//! Families with their values, as front ends show them: one segment's
//! [`Snapshot`], or a directory's merged read ([`Scrape`], `spec/PERFABI.md`
//! §15.4). One shape for both, so that each renderer (the exposition,
//! `perfabi-cat`'s table and JSON) is written once and cannot tell a
//! directory from a segment except where it must: a merged read has no
//! per-CPU values ([`Families::nr_cpus`] is 0).
//!
//! ```
//! use perfabi_reader::view::Families;
//!
//! fn print(families: &Families<'_>) {
//!     for f in families.iter() {
//!         for (m, r) in f.series() {
//!             println!("{} {:?} {:?}", f.family.name, m.instance, r);
//!         }
//!     }
//! }
//! print(&Families::snapshot(&perfabi_reader::Snapshot::default()));
//! ```
//!
//! [`Scrape`]: crate::directory::Scrape

use crate::directory::MergedFamily;
use crate::{Family, Member, Reading, Snapshot};

/// Where a set of families has its values.
#[derive(Clone, Copy, Debug)]
enum Source<'a> {
    Snapshot(&'a Snapshot),
    Merged(&'a [MergedFamily]),
}

/// The families of one snapshot, or of one merged read of a directory.
#[derive(Clone, Copy, Debug)]
pub struct Families<'a> {
    source: Source<'a>,
}

impl<'a> Families<'a> {
    /// The families of one segment's snapshot, with their per-CPU values.
    pub fn snapshot(s: &'a Snapshot) -> Self {
        Self {
            source: Source::Snapshot(s),
        }
    }

    /// The merged families of a directory's read
    /// ([`Scrape::families`](crate::directory::Scrape::families)): totals
    /// only.
    pub fn merged(families: &'a [MergedFamily]) -> Self {
        Self {
            source: Source::Merged(families),
        }
    }

    /// The CPUs each value is known on: the snapshot's; 0 for a merged
    /// read (its writers' CPUs are not one machine's view: only totals
    /// merge).
    pub fn nr_cpus(&self) -> usize {
        match self.source {
            Source::Snapshot(s) => s.nr_cpus,
            Source::Merged(_) => 0,
        }
    }

    /// Whether the values are a directory's merged read.
    pub fn is_merged(&self) -> bool {
        matches!(self.source, Source::Merged(_))
    }

    /// How many families there are.
    pub fn len(&self) -> usize {
        match self.source {
            Source::Snapshot(s) => s.families.len(),
            Source::Merged(m) => m.len(),
        }
    }

    /// Whether there is no family.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Family `k` (in the order of the snapshot, or by name for a merged
    /// read), if there is one.
    pub fn get(&self, k: usize) -> Option<FamilyView<'a>> {
        match self.source {
            Source::Snapshot(s) => s.families.get(k).map(|family| FamilyView {
                family,
                values: Values::Snapshot(s),
            }),
            Source::Merged(m) => m.get(k).map(|mf| FamilyView {
                family: &mf.family,
                values: Values::Merged(mf),
            }),
        }
    }

    /// Every family, in order.
    pub fn iter(&self) -> impl Iterator<Item = FamilyView<'a>> + 'a {
        let this = *self;
        (0..this.len()).filter_map(move |k| this.get(k))
    }
}

/// Where one family has its values.
#[derive(Clone, Copy, Debug)]
enum Values<'a> {
    Snapshot(&'a Snapshot),
    Merged(&'a MergedFamily),
}

/// One family and its members' values.
#[derive(Clone, Copy, Debug)]
pub struct FamilyView<'a> {
    /// The family's metadata and members (a merged family's members are
    /// its merged series).
    pub family: &'a Family,
    values: Values<'a>,
}

impl<'a> FamilyView<'a> {
    /// The total of member `k` of [`family`](Self::family) (a sum over
    /// CPUs, a peak's maximum, a histogram bucket by bucket; for a merged
    /// family, its merged value); `None` if there is no member `k`.
    pub fn reading(&self, k: usize) -> Option<Reading> {
        let m = self.family.members.get(k)?;
        match self.values {
            Values::Snapshot(s) => Some(s.reading(self.family, m)),
            Values::Merged(mf) => mf.readings.get(k).cloned(),
        }
    }

    /// Member `k`'s value on CPU `cpu` alone: `None` for a merged family
    /// (no per-CPU values), a CPU past the snapshot's, or no member `k`.
    pub fn reading_on(&self, cpu: usize, k: usize) -> Option<Reading> {
        let m = self.family.members.get(k)?;
        match self.values {
            Values::Snapshot(s) if cpu < s.nr_cpus => Some(s.reading_on(cpu, self.family, m)),
            _ => None,
        }
    }

    /// For a merged family, how many segments had it
    /// ([`MergedFamily::writers`]); `None` for a snapshot's.
    pub fn writers(&self) -> Option<usize> {
        match self.values {
            Values::Snapshot(_) => None,
            Values::Merged(mf) => Some(mf.writers),
        }
    }

    /// Each member with its total ([`reading`](Self::reading)), in order.
    pub fn series(&self) -> impl Iterator<Item = (&'a Member, Reading)> + 'a {
        let this = *self;
        this.family
            .members
            .iter()
            .enumerate()
            .filter_map(move |(k, m)| Some((m, this.reading(k)?)))
    }
}
