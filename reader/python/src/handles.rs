//! The family handles a `perfabi.Segment` keeps, by family name: looked up
//! by a name's first `read()` or `family()` and kept for its next reads,
//! each with the buffer its reads fill.
//!
//! Only the families the segment has are kept. A program that reads ever
//! new names (a family per process it watches, writers restarting under
//! new names) would otherwise keep a handle of every name it ever read.
//! When a read or look-up finds the segment moved on (another metadata
//! generation, or mapped anew: a new writer's segment) and a name was added
//! since the last pruning, the handles of the families no longer there are
//! dropped, and the names still there are handed to the `Segment` (see
//! [`Handles::take_live`]) to prune its `perfabi.Family` objects alike. So
//! every handle kept names a family that was live at the last pruning or
//! has been looked up since, at the same generation: no more handles than
//! the segment has families at one generation.

use std::collections::{HashMap, HashSet};

use perfabi::Family;
use perfabi_reader as reader;

use crate::convert::FamilyReadings;

#[derive(Default)]
pub(crate) struct Handles {
    by_name: HashMap<String, (reader::FamilyHandle, reader::FamilyValues)>,
    /// The segment at the last pruning: (times it was mapped anew,
    /// metadata generation).
    pruned_at: Option<(u64, u64)>,
    /// Whether a name was added since the last pruning.
    added: bool,
    /// The live families' names the last pruning found, until
    /// [`take_live`](Self::take_live) hands them on.
    live: Option<Vec<String>>,
}

impl Handles {
    /// How many handles are kept.
    pub(crate) fn len(&self) -> usize {
        self.by_name.len()
    }

    /// One family's values through its handle (looked up on first use).
    /// A handle the reader refuses — its family was deleted, or the segment
    /// created again by a new writer — is looked up again once.
    pub(crate) fn read(
        &mut self,
        seg: &mut reader::Segment,
        name: &str,
    ) -> Result<FamilyReadings, reader::Error> {
        // The hot path does not look at the path or the writer by itself.
        seg.check()?;
        let mut looked_up = false;
        loop {
            if !self.by_name.contains_key(name) {
                let h = seg.family_handle(name)?;
                self.insert(name, h);
                looked_up = true;
            }
            let (h, v) = self.by_name.get_mut(name).expect("inserted above");
            match seg.read_family(h, v) {
                Ok(generation) => {
                    let r = FamilyReadings::of_handle(h, v);
                    self.moved_to(seg, generation);
                    return Ok(r);
                }
                Err(reader::Error::Abi(perfabi::Error::UnknownInstance)) if !looked_up => {
                    self.by_name.remove(name);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The family called `name`, with its live instances, looked up now;
    /// its handle is kept for the next read.
    pub(crate) fn family(
        &mut self,
        seg: &mut reader::Segment,
        name: &str,
    ) -> Result<Family, reader::Error> {
        let h = seg.family_handle(name)?;
        let (family, generation) = (h.family().clone(), h.generation());
        self.insert(name, h);
        if let Some(g) = generation {
            self.moved_to(seg, g);
        }
        Ok(family)
    }

    /// Keeps `h` as the handle of `name` (with the buffer of the one it
    /// replaces, if any).
    fn insert(&mut self, name: &str, h: reader::FamilyHandle) {
        match self.by_name.get_mut(name) {
            Some(kept) => kept.0 = h,
            None => {
                self.by_name
                    .insert(name.to_owned(), (h, reader::FamilyValues::default()));
                self.added = true;
            }
        }
    }

    /// After a look-up or read that found the segment at metadata
    /// generation `generation`: prunes the handles if the segment moved on
    /// and a name was added since the last pruning. If the families cannot
    /// be listed now (a busy writer, say), a later call prunes.
    fn moved_to(&mut self, seg: &mut reader::Segment, generation: u64) {
        let at = (seg.stats().remaps, generation);
        if !self.added || self.pruned_at == Some(at) {
            return;
        }
        let Ok(live) = seg.families() else {
            return;
        };
        self.keep_families(&live);
        self.pruned_at = Some(at);
        self.live = Some(live.into_iter().map(|f| f.name).collect());
    }

    /// Keeps only the handles of the families of `live`, every live family
    /// of the segment.
    pub(crate) fn keep_families(&mut self, live: &[Family]) {
        let names: HashSet<&str> = live.iter().map(|f| f.name.as_str()).collect();
        self.by_name.retain(|name, _| names.contains(name.as_str()));
        self.added = false;
    }

    /// The names of the live families the last pruning found, once: the
    /// `Segment` keeps only their `perfabi.Family` objects.
    pub(crate) fn take_live(&mut self) -> Option<Vec<String>> {
        self.live.take()
    }
}
