//! A directory of segments read as one (`spec/PERFABI.md` §15): every
//! program writes its own segment ([`perfabi_shm::directory`] names them),
//! and one reader merges their families.
//!
//! ```no_run
//! use perfabi_reader::directory::{Directory, DirectoryOptions};
//!
//! let mut dir = Directory::open(perfabi_shm::directory::default_dir(), DirectoryOptions::default())?;
//! let scrape = dir.read()?;
//! for f in &scrape.families {
//!     for (m, r) in f.family.members.iter().zip(&f.readings) {
//!         println!("{} {} {:?}", f.family.name, m.instance, r);
//!     }
//! }
//! for p in &scrape.problems {
//!     eprintln!("{p}"); // a hostile or conflicting file spoils only itself
//! }
//! # Ok::<(), perfabi_reader::Error>(())
//! ```
//!
//! Every file is opened as [`Segment::open_with`] opens one (no link
//! followed, owner, mode, links, holes and size checked): a file refused, or
//! one whose read fails, is named in [`Scrape::problems`] and the others
//! are still served. The merge rules are [`merge`]'s.

mod listing;
mod lock;
pub mod merge;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use perfabi_shm::directory::reference::{KeptIndex, Rank};
use perfabi_shm::directory::{SegmentName, FOLDED_FAMILY, KEPT_NAME};

use crate::{Error, Liveness, Options, Segment, Snapshot};
pub use merge::{MergedFamily, Problem};
/// The default directory (§15.1): `$PERFABI_DIR`, else
/// `/dev/shm/perfabi-<euid>`; the one writers use.
pub use perfabi_shm::directory::default_dir;

/// The default of [`DirectoryOptions::max_segments`].
pub const DEFAULT_MAX_SEGMENTS: usize = 10_000;

/// The label key [`DirectoryOptions::writer_label`] uses by default, and
/// the one a gauge of mode `ALL` is always kept apart by.
pub const WRITER_LABEL: &str = "writer";

/// Checks a writer label key a user gives (a front end's flag): a label
/// key as writers' are ([`perfabi::name::check_label_key`]:
/// `[a-z][a-z0-9_]*`, at most 15 bytes, not `cpu`, `le`, …); otherwise the
/// one-line reason.
pub fn check_writer_label(key: &str) -> Result<(), String> {
    perfabi::name::check_label_key(key).map_err(|_| {
        format!(
            "\"{}\" is not a label key ([a-z][a-z0-9_]*, at most 15 bytes, not cpu or le)",
            perfabi::text::escape(key.as_bytes())
        )
    })
}

/// How a [`Directory`] is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryOptions {
    /// How each segment file is opened and read. `require_live` is
    /// ignored: a dead writer's counters still count (§15.3).
    pub segment: Options,
    /// Keep every writer's series apart under this label key (its value:
    /// `<name>.<pid>` of the segment file name) instead of merging them.
    pub writer_label: Option<String>,
    /// Most segment files read; past it the rest are left out and a
    /// [`Problem`] says so (a reader's cost is bounded by a stated limit,
    /// not by what others put in the directory).
    pub max_segments: usize,
}

impl Default for DirectoryOptions {
    fn default() -> Self {
        Self {
            segment: Options::default(),
            writer_label: None,
            max_segments: DEFAULT_MAX_SEGMENTS,
        }
    }
}

/// One read of a directory: the merged families and what was left out.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// The merged families, by name. Each family's `members` are the merged
    /// series (`slot` `None`, `value_slot` 0: they are no one file's);
    /// `readings[k]` is the value of `members[k]`.
    pub families: Vec<MergedFamily>,
    /// Files refused or unreadable, families refused for conflicting
    /// metadata, limits reached: each spoils only itself.
    pub problems: Vec<Problem>,
    /// Segment files read and merged.
    pub segments: usize,
}

/// A directory of segments, read as one. Segments stay open between reads
/// (a file that disappears is dropped, a new one opened).
pub struct Directory {
    path: PathBuf,
    opts: DirectoryOptions,
    open: BTreeMap<SegmentName, Open>,
}

/// A segment file kept open between reads, with what a read of it reuses:
/// its last snapshot (whose decoded tables the next snapshot keeps while
/// the segment's epoch and generation stay: a steady read copies values
/// only, with every check of [`Segment::snapshot_into`]) and the names the
/// merge gives it.
struct Open {
    seg: Segment,
    /// The last consistent snapshot, which the merge reads.
    snap: Snapshot,
    /// Where the next snapshot is taken (then swapped with `snap`), so a
    /// failed one never spoils the last consistent one (§15.3 rule 4: a live
    /// writer caught busy is served as it last was).
    spare: Snapshot,
    /// Its path.
    file: PathBuf,
    /// `<name>.<pid>`: the writer label's value.
    writer: String,
    /// `<pid>.<nonce>`: how a kept file lists it (§15.5).
    identity: String,
    /// Its writer's `writer_start_ns` (fixed for the file: a directory's
    /// file name is new at every creation), which ranks it when a family's
    /// reference file is chosen (§15.4).
    started: u64,
    /// Read by this call of [`Directory::read`], and whether its writer
    /// was live then.
    read: Option<bool>,
}

impl Directory {
    /// Opens the directory `dir` (checked as [`read`](Self::read) checks
    /// it at every call).
    pub fn open(dir: impl AsRef<Path>, opts: DirectoryOptions) -> Result<Self, Error> {
        let mut d = Self {
            path: dir.as_ref().to_path_buf(),
            opts,
            open: BTreeMap::new(),
        };
        d.opts.segment.require_live = false;
        listing::open(&d.path, &d.opts)?;
        Ok(d)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lists the directory, opens new segment files, and merges every
    /// segment's families. Fails only if the directory itself is refused
    /// (a link of another user on the way, not a directory, owned by an
    /// untrusted user, or others may replace its files); every other
    /// failure is a [`Problem`] of one file or one family.
    pub fn read(&mut self) -> Result<Scrape, Error> {
        let folder = listing::open(&self.path, &self.opts)?;
        // Held to read from before the listing to the end of the reading:
        // no fold runs meanwhile (a fold between the listing and the kept
        // file could remove a listed segment's identity from it).
        let (path, patience) = (self.path.clone(), self.opts.segment.busy_timeout);
        lock::read_under(&folder, &path, patience, || self.read_locked(&folder))
    }

    /// [`read`](Self::read) under the lock.
    fn read_locked(&mut self, folder: &perfabi_shm::safe_open::Folder) -> Result<Scrape, Error> {
        let open = &self.open;
        let listed = listing::list(folder, &self.path, &self.opts, |n| open.contains_key(n))?;
        let mut scrape = Scrape {
            problems: listed.problems,
            ..Scrape::default()
        };
        self.open.retain(|n, _| listed.names.contains(n));
        for name in listed.names {
            let o = match self.open.entry(name) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    let file = self.path.join(v.key().to_string());
                    match Segment::open_with(&file, self.opts.segment.clone()) {
                        Ok(mut seg) => {
                            let started = seg.info().map_or(0, |i| i.header.writer_start_ns);
                            let name = v.key();
                            let writer = format!("{}.{}", name.name, name.pid);
                            let identity = name.identity();
                            v.insert(Open {
                                seg,
                                snap: Snapshot::default(),
                                spare: Snapshot::default(),
                                file,
                                writer,
                                identity,
                                started,
                                read: None,
                            })
                        }
                        // Gone between the listing and the open: nothing to read.
                        Err(Error::NotFound(_)) => continue,
                        Err(e) => {
                            scrape.problems.push(Problem::file(&file, &e));
                            continue;
                        }
                    }
                }
            };
            let last = o.read;
            o.read = match o.seg.snapshot_into(&mut o.spare) {
                // Judged by the snapshot's own look at the header and the
                // writer (Segment::check).
                Ok(()) => {
                    std::mem::swap(&mut o.snap, &mut o.spare);
                    Some(!matches!(
                        o.seg.liveness(),
                        Liveness::Closed | Liveness::Dead { .. }
                    ))
                }
                // A dead writer killed inside an update left a block busy
                // for ever: read settled, as the fold will (§15.5).
                Err(e) if e.code().starts_with("busy") => match o.seg.snapshot_if_dead() {
                    Ok(Some(snap)) => {
                        o.snap = snap;
                        Some(false)
                    }
                    // A live writer caught inside an update past the busy
                    // timeout (stopped, frozen, descheduled): its last
                    // consistent values are served, and the problem says
                    // so, so that no total goes backwards (§15.4).
                    Ok(None) if last.is_some() => {
                        let mut p = Problem::file(&o.file, &e);
                        p.message
                            .push_str(" (its last consistent values are served)");
                        scrape.problems.push(p);
                        last
                    }
                    Ok(None) => {
                        scrape.problems.push(Problem::file(&o.file, &e));
                        None
                    }
                    Err(d) => {
                        scrape.problems.push(Problem::file(&o.file, &d));
                        None
                    }
                },
                Err(e) => {
                    scrape.problems.push(Problem::file(&o.file, &e));
                    None
                }
            };
        }
        // The kept file after the segments (§15.5): a segment it lists is
        // counted there, not again.
        let kept_path = self.path.join(KEPT_NAME);
        let mut index = KeptIndex::default();
        let kept = match Segment::open_with(&kept_path, self.opts.segment.clone())
            .and_then(|mut k| k.snapshot())
        {
            Ok(mut snap) => {
                index = KeptIndex::of(&snap);
                snap.families.retain(|f| f.name != FOLDED_FAMILY);
                Some(snap)
            }
            Err(Error::NotFound(_)) => None,
            Err(e) => {
                scrape.problems.push(Problem::file(&kept_path, &e));
                None
            }
        };
        let mut merger = merge::Merger::new(self.opts.writer_label.as_deref());
        if let Some(snap) = &kept {
            merger.add_kept(&kept_path, snap, &index);
        }
        for o in self.open.values() {
            let Some(live) = o.read else { continue };
            if index.identities.contains(&o.identity) {
                continue;
            }
            merger.add(&o.file, &o.writer, Rank::segment(live, o.started), &o.snap);
            scrape.segments += 1;
        }
        let (families, problems) = merger.finish();
        scrape.families = families;
        scrape.problems.extend(problems);
        Ok(scrape)
    }
}
