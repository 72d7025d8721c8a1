//! Which file's metadata a merged family has (`spec/PERFABI.md` §15.4):
//! the one rule readers and the fold share, and the kept file's record of
//! the start time of the writer whose metadata each kept family holds
//! (§15.5).
//!
//! A family's **reference file** is the one of highest [`Rank`] among the
//! files that have it: a live writer's above every other, then the latest
//! start (`writer_start_ns`; a kept family's is the start of the writer
//! whose metadata it keeps, [`KeptIndex::started`]), then a segment file
//! above the kept file; of files that rank equal, the first in the order
//! read (the kept file, then segment files in name order).

use std::collections::{BTreeMap, BTreeSet};

use perfabi::Snapshot;

use super::FOLDED_FAMILY;

/// The label a kept file's [`FOLDED_FAMILY`] member has when it records a
/// kept family's reference start (§15.5): its instance is the family's
/// name, its value that start. A member without labels is a folded
/// segment's identity.
pub const REFERENCE_LABEL: (&str, &str) = ("role", "reference");

/// How a file ranks when a family's reference file is chosen (§15.4),
/// compared field by field: live, then the start, then a segment file
/// above the kept file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    /// Its writer is live (§15.3 step 3). The kept file's never is.
    pub live: bool,
    /// Its writer's `writer_start_ns`; for a kept family, the one its
    /// kept file records for it (0 if none: a kept file of an older
    /// format).
    pub started: u64,
    /// A segment file, not the kept file.
    pub segment: bool,
}

impl Rank {
    /// A kept family's, whose metadata are those of a writer started at
    /// `started` ([`KeptIndex::started`]).
    pub fn kept(started: u64) -> Rank {
        Rank {
            live: false,
            started,
            segment: false,
        }
    }

    /// A segment file's, whose writer is `live` or not and started at
    /// `started` (its header's `writer_start_ns`).
    pub fn segment(live: bool, started: u64) -> Rank {
        Rank {
            live,
            started,
            segment: true,
        }
    }
}

/// What a kept file's [`FOLDED_FAMILY`] says (§15.5).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeptIndex {
    /// The folded segments' identities (`<pid>.<nonce>`): members without
    /// labels.
    pub identities: BTreeSet<String>,
    /// Each kept family's reference start by family name: members labelled
    /// [`REFERENCE_LABEL`]. A family absent here (a kept file of an older
    /// format) ranks as started at 0.
    pub started: BTreeMap<String, u64>,
}

impl KeptIndex {
    /// Reads the index of the kept file whose snapshot is `snap`.
    pub fn of(snap: &Snapshot) -> Self {
        let mut index = Self::default();
        for f in snap.families.iter().filter(|f| f.name == FOLDED_FAMILY) {
            for m in &f.members {
                if is_reference(&m.labels) {
                    let started = match snap.reading(f, m) {
                        perfabi::Reading::Unsigned(v) => v,
                        perfabi::Reading::Signed(v) => v as u64,
                        perfabi::Reading::Histogram(_) => continue,
                    };
                    index.started.insert(m.instance.clone(), started);
                } else if m.labels.is_empty() {
                    index.identities.insert(m.instance.clone());
                }
            }
        }
        index
    }

    /// The rank of the kept file's family `name`.
    pub fn rank(&self, name: &str) -> Rank {
        Rank::kept(self.started.get(name).copied().unwrap_or(0))
    }
}

fn is_reference(labels: &[(String, String)]) -> bool {
    matches!(labels, [(k, v)] if k == REFERENCE_LABEL.0 && v == REFERENCE_LABEL.1)
}
