//! The member and value tables of instances that come and go, kept by the
//! loader and published through the `control` program ([`crate::control`]):
//! which member slots and value slots are live, the `reg_id`s given (never
//! reused within the epoch), and the instance numbers (an instance string
//! that returns gets its old number, spec §5.3).
//!
//! A change is a list of word stores into the member table and the
//! `*_used` header words, and value runs to zero on every CPU, applied
//! under one generation change (§7.3). An instance's words are one run
//! (its group's families in table order, `perfabi_families`' `Family::at`)
//! inside one page of a CPU block, so that the programs find a histogram
//! on one page. A retired run is reused only after the next scan
//! ([`Tables::release`]): a program that looked the instance up just
//! before its key was deleted has long finished by then.

use std::collections::HashMap;

use perfabi::layout::{
    HEADER_FAMILIES_USED_WORD, HEADER_MEMBERS_USED_WORD, HEADER_USED_WORD, MEMBER_ENTRY_SIZE,
};
use perfabi_families::table::Group;

use crate::error::Error;
use crate::families;
use crate::groups::Found;
use crate::image::{Image, PAGE};

/// Words of a member entry.
const MEMBER_WORDS: u32 = (MEMBER_ENTRY_SIZE / 8) as u32;

/// Stores and zeroed runs to apply under one generation change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// `(word index in the segment, value)`, applied in order.
    pub stores: Vec<(u32, u64)>,
    /// `(first value slot, words)` to zero on every CPU.
    pub zeros: Vec<(u32, u32)>,
}

impl Change {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.stores.is_empty() && self.zeros.is_empty()
    }

    /// Appends `other` (its stores after this one's).
    pub fn extend(&mut self, other: Change) {
        self.stores.extend(other.stores);
        self.zeros.extend(other.zeros);
    }
}

/// A published instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Live {
    /// Its instance string.
    pub instance: String,
    /// Its run's first value slot.
    pub slot: u32,
    /// Its member slots, one per family of its group.
    pub members: Vec<u32>,
}

/// The tables' state.
#[derive(Debug)]
pub struct Tables {
    members_word: u32,
    counters_word: u32,
    member_live: Vec<bool>,
    value_used: Vec<bool>,
    retired: Vec<(u32, u32)>,
    members_used: u32,
    instances_used: u32,
    next_reg: u64,
    ids: HashMap<(Group, String), u32>,
    next_id: HashMap<Group, u32>,
    live: HashMap<(Group, Vec<u8>), Live>,
}

impl Tables {
    /// The tables as `image` lays them out before any instance: its
    /// families and the scheduler group's members and run.
    pub fn new(image: &Image) -> Self {
        let mut member_live = vec![false; image.geometry.max_members as usize];
        for m in member_live.iter_mut().take(image.sched_members as usize) {
            *m = true;
        }
        let mut value_used = vec![false; image.geometry.max_instances as usize];
        let sched = image.sched_slot as usize..(image.sched_slot + Group::Sched.words()) as usize;
        for v in &mut value_used[sched] {
            *v = true;
        }
        Self {
            members_word: image.members_word,
            counters_word: (image.layout.counters_offset / 8) as u32,
            member_live,
            value_used,
            retired: Vec::new(),
            members_used: image.sched_members,
            instances_used: image.sched_slot + Group::Sched.words(),
            next_reg: image.next_reg,
            ids: HashMap::new(),
            next_id: HashMap::new(),
            live: HashMap::new(),
        }
    }

    /// The `*_used` counts as stores (the families' count never changes).
    pub fn counts(&self) -> Change {
        Change {
            stores: vec![
                (HEADER_USED_WORD as u32, u64::from(self.instances_used)),
                (
                    HEADER_FAMILIES_USED_WORD as u32,
                    families::FAMILIES.len() as u64,
                ),
                (
                    HEADER_MEMBERS_USED_WORD as u32,
                    u64::from(self.members_used),
                ),
            ],
            zeros: Vec::new(),
        }
    }

    /// The instance of `group` under `key`, if published.
    pub fn get(&self, group: Group, key: &[u8]) -> Option<&Live> {
        self.live.get(&(group, key.to_vec()))
    }

    /// The published instances of `group`: `(key, instance)`.
    pub fn keys(&self, group: Group) -> Vec<Vec<u8>> {
        let mut k: Vec<Vec<u8>> = self
            .live
            .keys()
            .filter(|(g, _)| *g == group)
            .map(|(_, k)| k.clone())
            .collect();
        k.sort();
        k
    }

    /// Runs retired before now may be reused.
    pub fn release(&mut self) {
        for (slot, n) in self.retired.drain(..) {
            for v in &mut self.value_used[slot as usize..(slot + n) as usize] {
                *v = false;
            }
        }
    }

    /// A free run of `n` value slots inside one page of a block.
    fn alloc_run(&mut self, n: u32) -> Option<u32> {
        let page = PAGE / 8;
        let cap = self.value_used.len() as u32;
        let mut s = 0;
        while s + n <= cap {
            let first = self.counters_word + s;
            if first / page != (first + n - 1) / page {
                // Straddles a page: start at the next one.
                s = (first / page + 1) * page - self.counters_word;
                continue;
            }
            match (s..s + n).find(|&v| self.value_used[v as usize]) {
                Some(used) => s = used + 1,
                None => {
                    for v in s..s + n {
                        self.value_used[v as usize] = true;
                    }
                    return Some(s);
                }
            }
        }
        None
    }

    /// Publishes `found` as an instance of `group`: a member in each of the
    /// group's families, its run zeroed. Returns the change to apply
    /// before its key goes into the group's map.
    pub fn add(&mut self, group: Group, found: &Found) -> Result<Change, Error> {
        let key = (group, found.key.clone());
        if self.live.contains_key(&key) {
            return Ok(Change::default());
        }
        if self
            .live
            .iter()
            .any(|((g, _), l)| *g == group && l.instance == found.instance)
        {
            return Err(Error::Table(format!(
                "two instances named {} in one family",
                perfabi::text::escape(found.instance.as_bytes())
            )));
        }
        let fams: Vec<(u32, &perfabi_families::table::Family)> = families::FAMILIES
            .iter()
            .enumerate()
            .filter(|(_, f)| f.group == group)
            .map(|(i, f)| (i as u32, *f))
            .collect();
        let free: Vec<u32> = (0..self.member_live.len() as u32)
            .filter(|&m| !self.member_live[m as usize])
            .take(fams.len())
            .collect();
        if free.len() < fams.len() {
            return Err(Error::NoRoom(found.instance.clone()));
        }
        let words = group.words();
        let slot = self
            .alloc_run(words)
            .ok_or_else(|| Error::NoRoom(found.instance.clone()))?;
        let next = self.next_id.entry(group).or_insert(0);
        let id = *self
            .ids
            .entry((group, found.instance.clone()))
            .or_insert_with(|| {
                *next += 1;
                *next - 1
            });
        let mut change = Change::default();
        for (&(fam, f), &m) in fams.iter().zip(&free) {
            let entry = perfabi::family::member_entry(
                fam,
                self.next_reg,
                &found.instance,
                id,
                slot + f.at(),
                &[],
                f.dimension,
            )
            .map_err(|e| Error::Table(format!("{}: {e:?}", found.instance)))?;
            self.next_reg += 1;
            self.member_live[m as usize] = true;
            let at = self.members_word + m * MEMBER_WORDS;
            for (k, w) in bytemuck::bytes_of(&entry).chunks_exact(8).enumerate() {
                let v = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
                change.stores.push((at + k as u32, v));
            }
            self.members_used = self.members_used.max(m + 1);
        }
        self.instances_used = self.instances_used.max(slot + words);
        change.zeros.push((slot, words));
        change.extend(self.counts());
        self.live.insert(
            key,
            Live {
                instance: found.instance.clone(),
                slot,
                members: free,
            },
        );
        Ok(change)
    }

    /// Retires the instance of `group` under `key` (its key already out of
    /// the group's map): its members freed, its run reused after
    /// [`Self::release`].
    pub fn remove(&mut self, group: Group, key: &[u8]) -> Change {
        let Some(live) = self.live.remove(&(group, key.to_vec())) else {
            return Change::default();
        };
        let mut change = Change::default();
        for &m in &live.members {
            self.member_live[m as usize] = false;
            let at = self.members_word + m * MEMBER_WORDS;
            change
                .stores
                .extend((at..at + MEMBER_WORDS).map(|w| (w, 0)));
        }
        self.retired.push((live.slot, group.words()));
        change
    }
}

/// `image`'s words with its counts published, as a reader sees the
/// segment once the loader has started it and found no instance.
pub fn published(image: &Image) -> Vec<u64> {
    let mut w = image.words.clone();
    for (at, v) in Tables::new(image).counts().stores {
        w[at as usize] = v;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Image {
        let cap = crate::image::Capacity {
            values: 1024,
            members: 64,
            damon: 0,
        };
        Image::new(2, 7, 1, 1_000_000_000, cap).unwrap()
    }

    fn found(name: &str, k: u8) -> Found {
        Found {
            key: vec![k; 16],
            instance: name.into(),
        }
    }

    /// Applies `c` to the image's words as `control` does (stores only:
    /// the zeroed runs are zero already in a fresh image).
    fn apply(words: &mut [u64], c: &Change) {
        for &(at, v) in &c.stores {
            words[at as usize] = v;
        }
    }

    fn view_families(words: &[u64]) -> Vec<perfabi::family::Family> {
        let w: Vec<perfabi::Word> = words.iter().map(|&w| perfabi::Word::new(w)).collect();
        let view = perfabi::SegmentView::new(&w).unwrap();
        view.families(64).unwrap().0
    }

    #[test]
    fn instances_come_and_go_and_a_returning_one_keeps_its_number() {
        let img = image();
        let mut t = Tables::new(&img);
        let mut words = img.words.clone();
        apply(&mut words, &t.counts());
        let c = t.add(Group::Block, &found("loop0", 1)).unwrap();
        apply(&mut words, &c);
        let c = t.add(Group::Block, &found("loop1", 2)).unwrap();
        apply(&mut words, &c);
        let fams = view_families(&words);
        let lat = fams
            .iter()
            .find(|f| f.name == "disk.dev.request_latency")
            .unwrap();
        let inst: Vec<&str> = lat.members.iter().map(|m| m.instance.as_str()).collect();
        assert_eq!(inst, ["loop0", "loop1"]);
        let l0 = t.get(Group::Block, &[1; 16]).unwrap().clone();
        assert_eq!(lat.members[0].value_slot, l0.slot + 7);
        // Gone, then back under a new key (a new diskseq): the old number.
        let c = t.remove(Group::Block, &[1; 16]);
        apply(&mut words, &c);
        let fams = view_families(&words);
        let read = fams.iter().find(|f| f.name == "disk.dev.read").unwrap();
        assert_eq!(read.members.len(), 1);
        assert_eq!(read.members[0].instance, "loop1");
        t.release();
        let c = t.add(Group::Block, &found("loop0", 3)).unwrap();
        apply(&mut words, &c);
        let fams = view_families(&words);
        let read = fams.iter().find(|f| f.name == "disk.dev.read").unwrap();
        let ids: Vec<(String, u32)> = read
            .members
            .iter()
            .map(|m| (m.instance.clone(), m.instance_id))
            .collect();
        assert!(ids.contains(&("loop0".into(), 0)), "{ids:?}");
        assert!(ids.contains(&("loop1".into(), 1)), "{ids:?}");
        // A name live already is refused; so is a table full.
        assert!(t.add(Group::Block, &found("loop1", 9)).is_err());
    }

    #[test]
    fn runs_never_straddle_a_page_and_the_tables_fill_up_cleanly() {
        let img = image();
        let mut t = Tables::new(&img);
        let cw = (img.layout.counters_offset / 8) as u32;
        let mut n = 0u8;
        loop {
            match t.add(Group::Irq, &found(&format!("{n}:x"), n)) {
                Ok(_) => {
                    let l = t.get(Group::Irq, &[n; 16]).unwrap();
                    let first = cw + l.slot;
                    assert_eq!(first / 512, (first + 26) / 512, "run at {}", l.slot);
                    n += 1;
                }
                Err(Error::NoRoom(_)) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(n > 10, "{n}");
    }
}
