//! The merge rules of a segment directory (`spec/PERFABI.md` §15.4):
//!
//! * families merge by name when their identity metadata agree (kind,
//!   unit, value type, dimension, buckets, gauge mode; not the help);
//! * a family's metadata (its help among them) are those of its
//!   **reference** file: the live writer that started last, else, of the
//!   dead writers' files and the kept file, the one whose writer started
//!   last (the kept file's family ranked by the start of the writer whose
//!   metadata it keeps), by [`directory::reference`](mod@perfabi_shm::directory::reference)'s rule,
//!   the one the fold uses too. A live writer
//!   that disagrees with the reference refuses the family whole, with a
//!   [`Problem`] naming both files; a dead writer's file or the kept file
//!   that disagrees is left out of that family (its counts are of metadata
//!   no writer uses any more), with a [`Problem`] naming it, and the family
//!   is still served. Every other family is served either way;
//! * series (members) merge by instance and labels; with a writer label,
//!   every writer's series stay apart under it;
//! * counters and histograms: the wrapping sum over every writer, live or
//!   dead; peaks: the largest;
//! * gauges: only live writers' count (a closed or dead writer's gauge is
//!   gone), merged by the family's [`GaugeMode`]: sum, max, min, or `ALL`
//!   (never merged: each writer's series under the writer label).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use perfabi::{Family, GaugeMode, Kind, Member, Reading, Snapshot};
use perfabi_shm::directory::reference::{KeptIndex, Rank};

use super::WRITER_LABEL;
use crate::Error;

/// A family merged over a directory's segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergedFamily {
    /// The family's metadata, and its merged series as `members`.
    pub family: Family,
    /// `readings[k]`: the merged value of `family.members[k]`.
    pub readings: Vec<Reading>,
    /// How many files' families of this name were merged (those whose
    /// identity metadata are its reference file's, §15.4).
    pub writers: usize,
}

/// Something left out of a directory's read; each spoils only itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file it concerns (the directory, for a limit).
    pub file: PathBuf,
    /// The family it concerns, if it is a family's: refused, or left out
    /// of this file's counts (§15.4).
    pub family: Option<String>,
    /// What happened, in one line (paths escaped).
    pub message: String,
    /// The reader's error code (`spec/PERFABI.md` §11.6), or
    /// `family-conflict` / `limit`.
    pub code: &'static str,
}

impl Problem {
    pub(super) fn file(file: &Path, e: &Error) -> Self {
        let shown = perfabi_shm::safe_open::escape_path(file).to_string();
        let message = e.to_string();
        Self {
            file: file.to_path_buf(),
            family: None,
            // Every message names its file.
            message: if message.contains(&shown) {
                message
            } else {
                format!("{shown}: {message}")
            },
            code: e.code(),
        }
    }

    pub(super) fn limit(dir: &Path, message: String) -> Self {
        Self {
            file: dir.to_path_buf(),
            family: None,
            message: format!("{}: {message}", perfabi_shm::safe_open::escape_path(dir)),
            code: "limit",
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The identity metadata that differ, for a problem's message.
fn differences(a: &Family, b: &Family) -> String {
    let mut d = Vec::new();
    if a.kind != b.kind {
        d.push(format!("kind {} / {}", a.kind.as_str(), b.kind.as_str()));
    }
    if a.unit != b.unit || a.unit_text != b.unit_text {
        d.push(format!("unit {:?} / {:?}", a.unit_text, b.unit_text));
    }
    if a.value_type != b.value_type {
        d.push(format!(
            "value type {} / {}",
            a.value_type.as_str(),
            b.value_type.as_str()
        ));
    }
    if a.dimension != b.dimension {
        d.push(format!("dimension {:?} / {:?}", a.dimension, b.dimension));
    }
    if a.buckets != b.buckets {
        d.push("buckets".into());
    }
    if a.gauge_mode != b.gauge_mode {
        d.push(format!(
            "gauge mode {} / {}",
            a.gauge_mode.as_str(),
            b.gauge_mode.as_str()
        ));
    }
    d.join(", ")
}

/// A series' identity within a family, borrowed from the snapshots being
/// merged: instance, labels, and the writer it is kept apart under (if it
/// is). Looked up without building the merged labels: those are built
/// once per merged series, in [`Merger::finish`].
type SeriesKey<'a> = (&'a str, &'a [(String, String)], Option<&'a str>);

/// A merged series: the first writer's member, the writer label it is kept
/// apart under, and the value so far.
struct Series<'a> {
    member: &'a Member,
    apart: Option<(&'a str, &'a str)>,
    reading: Reading,
}

struct Acc<'a> {
    /// The reference file's family: its metadata are the merged family's.
    family: &'a Family,
    /// The reference file (§15.4).
    reference: &'a Path,
    /// The reference file's rank.
    rank: Rank,
    conflict: Option<String>,
    /// Dead writers' or the kept file's families of other identity
    /// metadata, left out (said unless the family is refused whole).
    left_out: Vec<Problem>,
    index: HashMap<SeriesKey<'a>, usize>,
    series: Vec<Series<'a>>,
    writers: usize,
}

/// One file's snapshot to merge.
struct Source<'a> {
    file: &'a Path,
    writer: &'a str,
    rank: Rank,
    /// The kept file's index: its families rank each by the start it
    /// records for them, not by `rank`.
    kept: Option<&'a KeptIndex>,
    snap: &'a Snapshot,
}

impl Source<'_> {
    /// The rank of its family `name`.
    fn rank_of(&self, name: &str) -> Rank {
        self.kept.map_or(self.rank, |k| k.rank(name))
    }
}

/// Merges segments' snapshots into merged families. It borrows them: a
/// family or series is looked up by the names the snapshots hold, and
/// nothing is copied until [`finish`](Self::finish) builds the merged
/// families (a directory of 1,000 writers of the same 20 families builds
/// 20, not 20,000).
pub(super) struct Merger<'a> {
    writer_label: Option<&'a str>,
    sources: Vec<Source<'a>>,
}

impl<'a> Merger<'a> {
    pub(super) fn new(writer_label: Option<&'a str>) -> Self {
        Self {
            writer_label,
            sources: Vec::new(),
        }
    }

    /// Adds the families of `snap`, read from `file` of the writer named
    /// `writer`, ranked `rank` (live or not, and when it started).
    pub(super) fn add(&mut self, file: &'a Path, writer: &'a str, rank: Rank, snap: &'a Snapshot) {
        self.sources.push(Source {
            file,
            writer,
            rank,
            kept: None,
            snap,
        });
    }

    /// Adds the families of the kept file `file`, whose snapshot is `snap`
    /// (without its [`perfabi_shm::directory::FOLDED_FAMILY`]) and whose
    /// index is `index` (each family ranked by the start it records).
    pub(super) fn add_kept(&mut self, file: &'a Path, snap: &'a Snapshot, index: &'a KeptIndex) {
        self.sources.push(Source {
            file,
            writer: "kept",
            rank: Rank::kept(0),
            kept: Some(index),
            snap,
        });
    }

    /// Each family's reference file (§15.4), in one pass over every file:
    /// the families by first appearance, `index` from name to family, and,
    /// for each file's families in order, the family's place (`None`: a
    /// family named as the kept file's list, refused in `problems`).
    fn references(&self, problems: &mut Vec<Problem>) -> (Vec<Acc<'a>>, Vec<Option<usize>>) {
        let mut index: HashMap<&'a str, usize> = HashMap::new();
        let mut families: Vec<Acc<'a>> = Vec::new();
        let mut places = Vec::new();
        for src in &self.sources {
            let snap: &'a Snapshot = src.snap;
            for f in &snap.families {
                if f.name == perfabi_shm::directory::FOLDED_FAMILY {
                    let shown = perfabi_shm::safe_open::escape_path(src.file);
                    problems.push(Problem {
                        file: src.file.to_path_buf(),
                        family: Some(f.name.clone()),
                        message: format!(
                            "{shown}: family {} refused: the name is the kept file's list of folded writers (§15.5)",
                            f.name
                        ),
                        code: "reserved-name",
                    });
                    places.push(None);
                    continue;
                }
                let rank = src.rank_of(&f.name);
                let at = *index.entry(&f.name).or_insert_with(|| {
                    families.push(Acc {
                        family: f,
                        reference: src.file,
                        rank,
                        conflict: None,
                        left_out: Vec::new(),
                        index: HashMap::new(),
                        series: Vec::new(),
                        writers: 0,
                    });
                    families.len() - 1
                });
                let acc = &mut families[at];
                if rank > acc.rank {
                    (acc.family, acc.reference, acc.rank) = (f, src.file, rank);
                }
                places.push(Some(at));
            }
        }
        (families, places)
    }

    /// The merged families by name, and the families refused or files'
    /// families left out.
    pub(super) fn finish(self) -> (Vec<MergedFamily>, Vec<Problem>) {
        let mut problems = Vec::new();
        let (mut families, places) = self.references(&mut problems);
        let mut places = places.into_iter();
        for src in &self.sources {
            let snap: &'a Snapshot = src.snap;
            for f in &snap.families {
                let Some(Some(at)) = places.next() else {
                    continue;
                };
                let acc = &mut families[at];
                if acc.conflict.is_some() {
                    continue;
                }
                if !acc.family.same_identity(f) {
                    let (reference, file) = (
                        perfabi_shm::safe_open::escape_path(acc.reference),
                        perfabi_shm::safe_open::escape_path(src.file),
                    );
                    let name = perfabi::text::escape(f.name.as_bytes());
                    let what = differences(acc.family, f);
                    if src.rank.live {
                        // Two live writers disagree: neither is right.
                        acc.conflict = Some(format!(
                            "family {name} refused: {reference} and {file} disagree on its {what}"
                        ));
                        acc.series.clear();
                        acc.index.clear();
                    } else {
                        // Counts of metadata no live writer uses any more.
                        acc.left_out.push(Problem {
                            file: src.file.to_path_buf(),
                            family: Some(f.name.clone()),
                            message: format!(
                                "{file}: its counts of family {name} are left out: \
                                 {reference} (the newest writer's) and it disagree on \
                                 its {what}; a fold retires them (§15.4)"
                            ),
                            code: "family-conflict",
                        });
                    }
                    continue;
                }
                acc.writers += 1;
                let gauge = f.kind == Kind::Gauge;
                if gauge && !src.rank.live {
                    continue;
                }
                let apart = writer_label_of(self.writer_label, f).map(|key| (key, src.writer));
                for m in &f.members {
                    let r = snap.reading(f, m);
                    let key = (m.instance.as_str(), &m.labels[..], apart.map(|(_, w)| w));
                    match acc.index.entry(key) {
                        Entry::Vacant(v) => {
                            v.insert(acc.series.len());
                            acc.series.push(Series {
                                member: m,
                                apart,
                                reading: r,
                            });
                        }
                        Entry::Occupied(o) => {
                            combine(f.kind, f.gauge_mode, &mut acc.series[*o.get()].reading, r);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        families.sort_unstable_by(|a, b| a.family.name.cmp(&b.family.name));
        for mut acc in families {
            if let Some(message) = acc.conflict {
                problems.push(Problem {
                    file: acc.reference.to_path_buf(),
                    family: Some(acc.family.name.clone()),
                    message,
                    code: "family-conflict",
                });
                continue;
            }
            problems.append(&mut acc.left_out);
            let apart_key = apart_key(&acc);
            let mut series: Vec<(Member, Reading)> = acc
                .series
                .into_iter()
                .map(|s| {
                    let mut labels = s.member.labels.clone();
                    if let (Some((_, writer)), Some(key)) = (s.apart, &apart_key) {
                        labels.push((key.clone(), writer.to_string()));
                    }
                    let member = Member {
                        slot: None,
                        value_slot: 0,
                        reg_id: s.member.reg_id,
                        instance: s.member.instance.clone(),
                        instance_id: s.member.instance_id,
                        labels,
                        words: s.member.words,
                    };
                    (member, s.reading)
                })
                .collect();
            // By instance, then labels (the writer label among them).
            series.sort_unstable_by(|(a, _), (b, _)| {
                (&a.instance, &a.labels).cmp(&(&b.instance, &b.labels))
            });
            let (members, readings) = series.into_iter().unzip();
            let f = acc.family;
            let family = Family {
                origin: f.origin,
                reg_id: f.reg_id,
                name: f.name.clone(),
                help: f.help.clone(),
                dimension: f.dimension.clone(),
                kind: f.kind,
                unit: f.unit,
                unit_text: f.unit_text.clone(),
                value_type: f.value_type,
                buckets: f.buckets.clone(),
                gauge_mode: f.gauge_mode,
                members,
            };
            out.push(MergedFamily {
                family,
                readings,
                writers: acc.writers,
            });
        }
        (out, problems)
    }
}

/// The label key a merged family's writers are kept apart under: the key
/// [`writer_label_of`] gives, with `_` appended while the family already
/// uses it (its dimension, or a label key of any of its series), so no
/// series ever has a key twice (§15.4).
fn apart_key(acc: &Acc<'_>) -> Option<String> {
    let (key, _) = acc.series.iter().find_map(|s| s.apart)?;
    let taken = |k: &str| {
        acc.family.dimension == k
            || acc
                .series
                .iter()
                .any(|s| s.member.labels.iter().any(|(l, _)| l == k))
    };
    let mut key = key.to_string();
    while taken(&key) {
        key.push('_');
    }
    Some(key)
}

/// The label key family `f`'s writers are kept apart under, the last of
/// each merged series' labels (§15.4): the reader's `writer_label`, else
/// [`WRITER_LABEL`] for a gauge of mode `ALL`, else none (merged). What a
/// front end that names series by something else than labels (a PCP
/// instance name) needs to tell writers apart.
pub fn writer_label_of<'a>(writer_label: Option<&'a str>, f: &Family) -> Option<&'a str> {
    writer_label
        .or((f.kind == Kind::Gauge && f.gauge_mode == GaugeMode::All).then_some(WRITER_LABEL))
}

/// Merges `b` into `a`, two writers' values of one series of a family of
/// `kind` (and `mode`, for a gauge).
pub fn combine(kind: Kind, mode: GaugeMode, a: &mut Reading, b: Reading) {
    use Reading::*;
    // Counters and gauges of mode SUM add; so does a gauge of mode ALL,
    // which meets a second value only from another segment of the same
    // writer (name and pid).
    match (a, b) {
        (Histogram(a), Histogram(b)) => {
            a.count = a.count.wrapping_add(b.count);
            a.sum = a.sum.wrapping_add(b.sum);
            for (x, y) in a.buckets.iter_mut().zip(b.buckets) {
                *x = x.wrapping_add(y);
            }
        }
        (Unsigned(x), Unsigned(y)) => {
            *x = match (kind, mode) {
                (Kind::Peak, _) | (Kind::Gauge, GaugeMode::Max) => (*x).max(y),
                (Kind::Gauge, GaugeMode::Min) => (*x).min(y),
                _ => x.wrapping_add(y),
            }
        }
        (Signed(x), Signed(y)) => {
            *x = match (kind, mode) {
                (Kind::Peak, _) | (Kind::Gauge, GaugeMode::Max) => (*x).max(y),
                (Kind::Gauge, GaugeMode::Min) => (*x).min(y),
                _ => x.wrapping_add(y),
            }
        }
        // Metadata agree, so the variants do; nothing else can meet.
        (a, b) => *a = b,
    }
}
