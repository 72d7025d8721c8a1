//! Each kept family's metadata after a fold (`spec/PERFABI.md` §15.5
//! step 4), chosen by readers' rule (§15.4,
//! [`directory::reference`](mod@crate::directory::reference)), so that a fold retires only counts
//! readers leave out already.
//!
//! The candidates are the kept file's families (each ranked by the start
//! the kept file records for it) and the families of the dead writers the
//! fold folds. Where they all have the same identity metadata, nothing is
//! retired and the highest-ranked candidate's metadata are kept: no other
//! file needs a look. Where they differ, the family's reference is found
//! as a reader finds it, over every file a reader merges: the kept file,
//! the batch, and the directory's other segment files (live writers', and
//! dead writers' left for a later batch), whose family tables the fold
//! reads without folding them. Candidates of the reference's identity
//! metadata are kept, the others retired. Those reads stop at
//! [`READ_BUDGET`](super::READ_BUDGET): a disputed family whose
//! reference is then unknown is **undecided**, its kept counts stay as
//! they are and the dead writers' files that have it are left for a later
//! fold, so the lock is held for a bounded time whatever the directory
//! holds.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::time::{Duration, Instant};

use perfabi::{Family, Kind, Snapshot};

use super::{identity_of, own_file, same, writer_dead, Dead, MAX_SEGMENT};
use crate::directory::reference::{KeptIndex, Rank};
use crate::directory::FOLDED_FAMILY;
use crate::safe_open::Folder;

/// What a fold keeps of one family.
pub(super) struct Choice<'a> {
    /// The metadata kept and the start of the writer that had them (its
    /// rank in the next reads), or `None`: every count of the family is
    /// retired (the reference is a gauge, or of metadata none of the
    /// candidates has).
    pub keep: Option<(&'a Family, u64)>,
    /// The reference's identity metadata, for a report.
    pub identity: String,
    /// The candidates disagree and the reference was not found within
    /// the budget: `keep` is the kept file's own (nothing retired), and
    /// the dead writers' files with this family are not to be folded now.
    pub undecided: bool,
}

/// A segment file of the directory the fold does not fold (a live
/// writer's, or a dead writer's left for a later batch).
pub(super) struct Other {
    /// Its place in the listing (name order).
    pub seq: usize,
    /// Its file name.
    pub file: OsString,
}

/// Each family's [`Choice`], by name, given the kept file (its snapshot
/// and index), the `batch` folded, and the `others` listed, whose family
/// tables are read only for a disputed family, until `budget` (the fold's
/// [`READ_BUDGET`](super::READ_BUDGET)) has passed.
pub(super) fn choose<'a>(
    folder: &Folder,
    kept: Option<(&'a Snapshot, &KeptIndex)>,
    batch: &'a [Dead],
    others: &[Other],
    budget: Duration,
) -> BTreeMap<&'a str, Choice<'a>> {
    // Candidates in the order a reader reads: the kept file, then the
    // segment files in name order.
    let mut order: Vec<&Dead> = batch.iter().collect();
    order.sort_by_key(|d| d.seq);
    let mut cands: BTreeMap<&str, Vec<(Rank, &Family)>> = BTreeMap::new();
    if let Some((snap, index)) = kept {
        for f in families(snap) {
            cands
                .entry(&f.name)
                .or_default()
                .push((index.rank(&f.name), f));
        }
    }
    for d in &order {
        for f in families(&d.snap) {
            let rank = Rank::segment(false, d.started);
            cands.entry(&f.name).or_default().push((rank, f));
        }
    }
    // The reference among the candidates; where they disagree, among
    // every file.
    let mut refs: BTreeMap<&str, (Rank, Family)> = cands
        .iter()
        .map(|(name, c)| {
            let (rank, f) = best(c.iter().copied());
            (*name, (rank, f.clone()))
        })
        .collect();
    let disputed: Vec<&str> = cands
        .iter()
        .filter(|(name, c)| {
            let (_, r) = &refs[*name];
            c.iter().any(|(_, f)| !same(r, f))
        })
        .map(|(name, _)| *name)
        .collect();
    let mut complete = true;
    if !disputed.is_empty() {
        let mut files: Vec<(usize, Rank, Vec<Family>)> = Vec::new();
        for d in &order {
            let fams = d.snap.families.clone();
            files.push((d.seq, Rank::segment(false, d.started), fams));
        }
        let until = Instant::now() + budget;
        for o in others {
            if Instant::now() >= until {
                complete = false;
                break;
            }
            if let Some((rank, fams)) = metadata(folder, &o.file) {
                files.push((o.seq, rank, fams));
            }
        }
        files.sort_by_key(|(seq, ..)| *seq);
        for name in &disputed {
            // From the kept file's family, if it has one (first read).
            let mut r: Option<(Rank, &Family)> = kept.and_then(|(snap, index)| {
                families(snap)
                    .find(|f| f.name == *name)
                    .map(|f| (index.rank(name), f))
            });
            for (_, rank, fams) in &files {
                if let Some(f) = fams.iter().find(|f| f.name == *name) {
                    if r.is_none_or(|(best, _)| *rank > best) {
                        r = Some((*rank, f));
                    }
                }
            }
            if let Some((rank, f)) = r {
                refs.insert(name, (rank, f.clone()));
            }
        }
    }
    let kept_own = |name: &str| {
        kept.and_then(|(snap, index)| {
            families(snap)
                .find(|f| f.name == name)
                .map(|f| (f, index.rank(name).started))
        })
    };
    cands
        .iter()
        .map(|(name, c)| {
            if !complete && disputed.contains(name) {
                let keep = kept_own(name);
                let identity = String::new();
                let undecided = true;
                return (
                    *name,
                    Choice {
                        keep,
                        identity,
                        undecided,
                    },
                );
            }
            let (_, r) = &refs[*name];
            let keep = best_of(
                c.iter()
                    .copied()
                    .filter(|(_, f)| f.kind != Kind::Gauge && same(r, f)),
            )
            .map(|(rank, f)| (f, rank.started));
            let identity = identity_of(r);
            let undecided = false;
            (
                *name,
                Choice {
                    keep,
                    identity,
                    undecided,
                },
            )
        })
        .collect()
}

/// The families of `snap` that rank (every one but the kept file's list).
fn families(snap: &Snapshot) -> impl Iterator<Item = &Family> {
    snap.families.iter().filter(|f| f.name != FOLDED_FAMILY)
}

/// The highest-ranked of `c` (not empty); of equals, the first.
fn best<'a>(c: impl Iterator<Item = (Rank, &'a Family)>) -> (Rank, &'a Family) {
    best_of(c).expect("a candidate")
}

/// The highest-ranked of `c`; of equals, the first.
fn best_of<'a>(c: impl Iterator<Item = (Rank, &'a Family)>) -> Option<(Rank, &'a Family)> {
    c.fold(None, |acc: Option<(Rank, &Family)>, (rank, f)| match acc {
        Some((r, _)) if rank <= r => acc,
        _ => Some((rank, f)),
    })
}

/// The rank and families of the segment file `name` in `folder`, read
/// without folding it, or `None` if it cannot be read (a reader leaves it
/// out too, §15.3).
fn metadata(folder: &Folder, name: &OsStr) -> Option<(Rank, Vec<Family>)> {
    let (file, md) = folder.open_read_checked(name, own_file).ok()?;
    let probe = file.try_clone().ok()?;
    let map = crate::SegmentMap::new(file, &md, perfabi::trust::Origin::File, MAX_SEGMENT).ok()?;
    let info = map.view().info();
    let (fams, _) = map
        .view()
        .families(perfabi::protocol::DEFAULT_RETRIES)
        .ok()?;
    if !map.intact() {
        return None;
    }
    let live = !writer_dead(&probe, &info);
    Some((Rank::segment(live, info.writer_start_ns), fams))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::SegmentName;
    use crate::writer::{Config, Writer};
    use perfabi::{Buckets, FamilySpec, Unit};

    /// A writer in `dir` with histogram `app.latency` of log2 buckets from
    /// `2^first`, one observation.
    fn writer(dir: &std::path::Path, first: u32) -> (Writer, OsString) {
        let name = SegmentName::new("t").unwrap().to_string();
        let config = Config {
            nr_cpus: Some(1),
            max_instances: 16,
            damon_capacity: 0,
            ..Config::default()
        };
        let w = Writer::create(dir.join(&name), &config).unwrap();
        let f = w
            .add_family(&FamilySpec::histogram(
                "app.latency",
                "Latency",
                "",
                Unit::NS,
                Buckets::Log2 { first, n: 4 },
            ))
            .unwrap();
        w.observe(&w.add_member(f, "", &[]).unwrap(), 100).unwrap();
        (w, name.into())
    }

    fn dead(folder: &Folder, seq: usize, file: OsString) -> Dead {
        let (snap, started, id) = super::super::read(folder, &file).unwrap().unwrap();
        Dead {
            seq,
            file,
            identity: String::new(),
            started,
            id,
            snap,
        }
    }

    #[test]
    fn a_disputed_family_whose_reference_is_not_found_in_time_is_undecided() {
        let top = tempfile::tempdir().unwrap();
        let folder = crate::directory::prepare(top.path()).unwrap();
        let (a, a_file) = writer(top.path(), 10);
        let (b, b_file) = writer(top.path(), 12);
        let (_live, live_file) = writer(top.path(), 14);
        a.close();
        b.close();
        let batch = [dead(&folder, 0, a_file), dead(&folder, 1, b_file)];
        let others = [Other {
            seq: 2,
            file: live_file,
        }];
        // With time to read the live writer's table, it is the reference
        // (live), and neither dead writer's buckets are its own: both
        // retired.
        let c = choose(&folder, None, &batch, &others, super::super::READ_BUDGET);
        let c = &c["app.latency"];
        assert!(!c.undecided && c.keep.is_none(), "{}", c.identity);
        assert!(c.identity.contains("first: 14"), "{}", c.identity);
        // Without: undecided, nothing kept or retired.
        let c = choose(&folder, None, &batch, &others, Duration::ZERO);
        let c = &c["app.latency"];
        assert!(c.undecided && c.keep.is_none());
        // Undisputed (one dead writer): decided without reading others.
        let c = choose(&folder, None, &batch[..1], &others, Duration::ZERO);
        let c = &c["app.latency"];
        assert!(!c.undecided);
        assert_eq!(
            c.keep.map(|(f, _)| f.buckets.clone()),
            Some(Some(Buckets::Log2 { first: 10, n: 4 }))
        );
    }
}
