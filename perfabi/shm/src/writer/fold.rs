//! Folding dead writers' counts into a directory's kept file
//! (`spec/PERFABI.md` §15.5), so that their segment files can be removed
//! without a merged total going backwards.
//!
//! Holding the directory's locks ([`crate::directory::lock`]: the folds'
//! own, and `fold.lock` alone), for every segment file of this user whose
//! writer is dead for sure (closed, its liveness lock not held, or, with
//! no lock promised, its pid no longer a process started at its start
//! time: [`writer_dead`]), the fold reads a total of its counters, histograms
//! and peaks ([`perfabi::dead::snapshot`]) and writes a new kept file = old
//! kept + those totals, listing the folded segments' identities, under a
//! temporary name; renames it over the kept file; then removes the folded
//! files. A reader holds `fold.lock` to read while it lists and reads, and
//! skips a segment the kept file lists: at no moment is a count missing or
//! counted twice. Each kept family takes the metadata (a reworded help) of
//! its reference, chosen as readers choose it (§15.4,
//! [`directory::reference`](mod@crate::directory::reference)), and
//! records the start of the writer that had them, which ranks it in the
//! next reads; counts of other identity metadata (a program upgraded with
//! new buckets or unit) are retired, as readers leave them out already,
//! so no file is left for ever.

mod reference;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;

use perfabi::family::Origin;
use perfabi::layout::FLAG_CLOSED;
use perfabi::{Family, FamilySpec, Kind, Reading, Semantics, Snapshot};

use super::{Config, MethodChoice, Writer};
use crate::directory::reference::{KeptIndex, REFERENCE_LABEL};
use crate::directory::{self, lock, SegmentName, FOLDED_FAMILY, KEPT_NAME};
use crate::safe_open::{euid, FileId, FileKind, Folder};

/// The test-only variable that makes a fold kill its own process with
/// SIGKILL at one step: `written` (kept file written under its temporary
/// name), `renamed` (renamed over the kept file), `unlinked` (after the
/// first folded file is removed).
pub const CRASH_ENV: &str = "PERFABI_FOLD_TEST_CRASH_AT";

/// How long a fold waits for readers (which hold the lock shared while
/// they read) or another fold to let go of the lock.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// Largest segment a fold reads (a larger one stays as it is).
const MAX_SEGMENT: u64 = 1 << 30;

/// Most dead writers' segments one fold folds (§15.5): the rest wait for
/// the next fold, so that a fold holds the lock for a bounded time,
/// whatever piled up.
pub const MAX_BATCH: usize = 64;

/// Time one fold spends reading dead writers' segments at most; past it,
/// the rest wait for the next fold.
pub const READ_BUDGET: std::time::Duration = std::time::Duration::from_millis(50);

/// What one fold did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoldReport {
    /// Another process was folding: nothing done.
    pub busy: bool,
    /// Segment files folded and removed.
    pub folded: usize,
    /// Dead writers' files left as they are, with why (a reader still
    /// counts them).
    pub left: Vec<String>,
    /// Families whose counts were dropped, with why: a dead writer's, or
    /// the kept file's, whose identity metadata (kind, unit, value type,
    /// dimension, buckets, gauge mode) differ from those of the family's
    /// reference file, chosen as readers choose it (§15.4, §15.5): counts
    /// readers leave out already, which nothing could merge.
    pub retired: Vec<String>,
    /// The batch was full ([`MAX_BATCH`], [`READ_BUDGET`]), or a family's
    /// reference was not found within [`READ_BUDGET`] (§15.5 step 4):
    /// segment files were left for a later fold.
    pub more: bool,
    /// How long the fold held the directory's lock (readers waited at
    /// most this long for it).
    pub held: std::time::Duration,
}

fn crash_at(step: &str) {
    if std::env::var_os(CRASH_ENV).is_some_and(|v| v == step) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Whether the writer of a segment whose header says `info` is gone for
/// sure, judged by the header alone: it closed the segment, or its pid
/// names no process started at its start time (within a second). A writer
/// merely silent is not. This is the fallback of [`writer_dead`] for a
/// segment whose writer holds no liveness lock: a pid and a start time are
/// those of the writer's pid and time namespaces.
pub fn dead_for_sure(info: &perfabi::Info) -> bool {
    writer_gone(info.flags, info.writer_pid, info.writer_start_ns)
}

/// Whether the writer of the segment open as `file`, whose header says
/// `info`, is gone for sure (§10, §15.5): it closed the segment; or it
/// promised a liveness lock (`FLAG_LIVE_LOCK`) and nobody holds it (a lock
/// held keeps it alive whatever its pid says: it may run in another pid or
/// time namespace); or, with no lock promised or none that can be asked
/// about, [`dead_for_sure`].
pub fn writer_dead(file: &std::fs::File, info: &perfabi::Info) -> bool {
    header_dead(file, info.flags, info.writer_pid, info.writer_start_ns)
}

/// [`writer_dead`] of a header's `flags`, `writer_pid` and
/// `writer_start_ns`.
fn header_dead(file: &std::fs::File, flags: u64, pid: u64, start_ns: u64) -> bool {
    if flags & FLAG_CLOSED != 0 {
        return true;
    }
    match super::live_lock::alive(file, flags) {
        Some(alive) => !alive,
        None => writer_gone(flags, pid, start_ns),
    }
}

/// [`dead_for_sure`] of a header's `flags`, `writer_pid` and
/// `writer_start_ns`.
fn writer_gone(flags: u64, writer_pid: u64, writer_start_ns: u64) -> bool {
    if flags & FLAG_CLOSED != 0 {
        return true;
    }
    let Ok(pid) = u32::try_from(writer_pid) else {
        return false;
    };
    if pid == 0 {
        return false;
    }
    match crate::host::process_start_ns(Some(pid)) {
        None => {
            rustix::process::test_kill_process(match rustix::process::Pid::from_raw(pid as i32) {
                Some(p) => p,
                None => return false,
            })
            .is_err_and(|e| e == rustix::io::Errno::SRCH)
        }
        Some(start) => start.abs_diff(writer_start_ns) > 1_000_000_000,
    }
}

/// Whether `name` is the temporary file a writer fills before naming its
/// segment (`.<segment file name>.<pid>.<nonce>.tmp`, §15.5) and that
/// writer's pid names no process: it was killed while creating, and its
/// file (as large as the segment: memory on tmpfs) would stay for ever.
/// A pid reused since stays (the file is left, never a live one removed).
fn dead_writers_temporary(name: &str) -> bool {
    let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    let mut parts = inner.rsplitn(3, '.');
    let (Some(_nonce), Some(pid), Some(segment)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Ok(pid), Some(seg)) = (pid.parse::<i32>(), SegmentName::parse(OsStr::new(segment))) else {
        return false;
    };
    if u64::from(seg.pid) != pid as u64 {
        return false;
    }
    rustix::process::Pid::from_raw(pid).is_some_and(|p| {
        rustix::process::test_kill_process(p).is_err_and(|e| e == rustix::io::Errno::SRCH)
    })
}

/// A snapshot of the file `name` in `folder`, which must be a regular file
/// of this user, not writable by others, with one link, and whose writer
/// is dead for sure ([`perfabi::dead::snapshot`]: a block left odd by its
/// death is read settled). `None` when it is not: judged on its header,
/// read with one `pread` before anything is mapped, so a live writer's
/// segment costs a fold one header read. With it, the writer's
/// `writer_start_ns` and the identity of the file read.
///
/// Also `None` when, its lock seen released, `name` no longer names the
/// file read: a live writer that re-created its segment renames the new
/// file over the name **before** it lets go of the old file's lock (§10),
/// so the old file's counts are not the name's any more, and its identity
/// (`<pid>.<nonce>`) must not be listed as folded while the live writer's
/// new file has it.
fn read(folder: &Folder, name: &OsStr) -> Result<Option<(Snapshot, u64, FileId)>, String> {
    let (file, md) = folder
        .open_read_checked(name, own_file)
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; perfabi::layout::HEADER_SIZE_V1_0];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut head, 0)
        .map_err(|e| format!("header: {e}"))?;
    let h = perfabi::layout::header_from_bytes(&head);
    if !header_dead(&file, h.flags, h.writer_pid, h.writer_start_ns) {
        return Ok(None);
    }
    // The same open file description, to ask about the lock again.
    let probe = file.try_clone().map_err(|e| e.to_string())?;
    let map = crate::SegmentMap::new(file, &md, perfabi::trust::Origin::File, MAX_SEGMENT)
        .map_err(|e| format!("{e:?}"))?;
    // The mapped header is the one validated: judged again.
    if !writer_dead(&probe, &map.view().info()) {
        return Ok(None);
    }
    // Its writer is gone: a block its death left odd is read settled.
    let snap = perfabi::dead::snapshot(
        map.words(),
        *map.layout(),
        perfabi::protocol::DEFAULT_RETRIES,
    )
    .map_err(|e| e.to_string())?
    .snapshot;
    if !map.intact() {
        return Err("truncated while read".into());
    }
    let id = FileId::of(&md);
    if folder.stat(name).map_err(|e| e.to_string())?.map(|e| e.id) != Some(id) {
        return Ok(None);
    }
    Ok(Some((snap, h.writer_start_ns, id)))
}

/// The check of a segment file a fold opens: a regular file of this user,
/// not writable by others, with one link.
fn own_file(e: &crate::safe_open::Entry) -> Result<(), crate::safe_open::Problem> {
    if e.kind != FileKind::Regular {
        return Err(crate::safe_open::Problem::Kind(e.kind));
    }
    if e.uid != euid() || e.mode & 0o022 != 0 || e.nlink != 1 {
        return Err(crate::safe_open::Problem::Refused);
    }
    Ok(())
}

/// A series' identity within a family: instance, then labels.
type SeriesKey = (String, Vec<(String, String)>);

/// A kept family: its metadata (members cleared), the start of the
/// writer that had them (§15.5), and its series' total words by
/// (instance, labels).
struct Kept {
    family: Family,
    started: u64,
    series: BTreeMap<SeriesKey, Vec<u64>>,
}

fn words(r: &Reading) -> Vec<u64> {
    match r {
        Reading::Unsigned(v) => vec![*v],
        Reading::Signed(v) => vec![*v as u64],
        Reading::Histogram(h) => [h.count, h.sum]
            .into_iter()
            .chain(h.buckets.iter().copied())
            .collect(),
    }
}

/// Whether a dead writer's family may be added to the kept one: the same
/// identity metadata (§15.4), and both entries or both 1.0 counters.
fn same(a: &Family, b: &Family) -> bool {
    let origin = |f: &Family| matches!(f.origin, Origin::Entry(_));
    origin(a) == origin(b) && a.same_identity(b)
}

/// The families of `snap` a kept file keeps: counters, histograms, peaks.
fn kept_families(snap: &Snapshot) -> impl Iterator<Item = &Family> {
    snap.families
        .iter()
        .filter(|f| f.kind != Kind::Gauge && f.name != FOLDED_FAMILY)
}

/// Whether the kept file can hold the families of `snap` (their names,
/// help and units are a writer's), or why not.
fn check(snap: &Snapshot) -> Result<(), String> {
    for f in kept_families(snap).filter(|f| !matches!(f.origin, Origin::Entry(_))) {
        spec_of(f)
            .entry(1)
            .map_err(|e| format!("family {}: {e}", f.name))?;
    }
    Ok(())
}

/// Each kept family's [`reference::Choice`] by name.
type Choices<'a> = BTreeMap<&'a str, reference::Choice<'a>>;

/// Gives the kept families of `acc` the metadata and start `refs` keep (a
/// newer help), and drops those whose identity metadata differ from them
/// (retired).
fn reconcile(acc: &mut BTreeMap<String, Kept>, refs: &Choices<'_>, retired: &mut Vec<String>) {
    acc.retain(|name, k| match refs.get(name.as_str()) {
        None => true,
        Some(reference::Choice {
            keep: Some((r, started)),
            ..
        }) if same(&k.family, r) => {
            k.family = Family {
                members: Vec::new(),
                ..(*r).clone()
            };
            k.started = *started;
            true
        }
        Some(c) => {
            retired.push(format!(
                "{KEPT_NAME}: family {name}: its kept counts retired: the family's reference \
                 file (§15.4) has other identity metadata ({})",
                c.identity
            ));
            false
        }
    });
}

/// A family's identity metadata, for a report.
fn identity_of(f: &Family) -> String {
    format!(
        "kind {}, unit {:?}, value type {}, dimension {:?}, buckets {:?}, gauge mode {}",
        f.kind.as_str(),
        f.unit_text,
        f.value_type.as_str(),
        f.dimension,
        f.buckets,
        f.gauge_mode.as_str()
    )
}

/// Adds the kept families of `snap` (counters, histograms, peaks) to
/// `acc`: those whose identity metadata are those `refs` keep (all of
/// them when `refs` is `None`: the kept file itself); the others are
/// reported in `retired` as `file`'s.
fn fold_in(
    acc: &mut BTreeMap<String, Kept>,
    snap: &Snapshot,
    refs: Option<&Choices<'_>>,
    file: &str,
    retired: &mut Vec<String>,
) {
    for f in kept_families(snap) {
        let (r, started) = match refs.and_then(|r| r.get(f.name.as_str())) {
            None => (f, 0),
            Some(reference::Choice {
                keep: Some((r, started)),
                ..
            }) if same(r, f) => (*r, *started),
            Some(c) => {
                retired.push(format!(
                    "{file}: family {}: its counts retired: the family's reference file \
                     (§15.4) has other identity metadata ({})",
                    f.name, c.identity
                ));
                continue;
            }
        };
        let k = acc.entry(f.name.clone()).or_insert_with(|| Kept {
            family: Family {
                members: Vec::new(),
                ..r.clone()
            },
            started,
            series: BTreeMap::new(),
        });
        for m in &f.members {
            let w = words(&snap.reading(f, m));
            let key = (m.instance.clone(), m.labels.clone());
            match k.series.get_mut(&key) {
                None => {
                    k.series.insert(key, w);
                }
                Some(old) if f.kind == Kind::Peak => old[0] = old[0].max(w[0]),
                Some(old) => {
                    for (a, b) in old.iter_mut().zip(w) {
                        *a = a.wrapping_add(b);
                    }
                }
            }
        }
    }
}

/// A dead writer's segment a fold folds.
struct Dead {
    /// Its place in the listing (name order).
    seq: usize,
    /// Its file name.
    file: std::ffi::OsString,
    /// `<pid>.<nonce>`.
    identity: String,
    /// Its writer's `writer_start_ns`.
    started: u64,
    /// The file read.
    id: FileId,
    snap: Snapshot,
}

fn spec_of(f: &Family) -> FamilySpec {
    FamilySpec {
        value_type: f.value_type,
        buckets: f.buckets.clone(),
        ..FamilySpec::new(&f.name, &f.help, &f.dimension, f.kind, f.unit)
    }
}

/// Writes `acc` and `ids` as a kept file under a temporary name in
/// `folder`, with each kept family's reference start in its list
/// ([`KeptIndex`]); returns that name.
fn write_kept(
    dir: &Path,
    acc: &BTreeMap<String, Kept>,
    ids: &BTreeSet<String>,
) -> io::Result<std::ffi::OsString> {
    let members: usize =
        acc.values().map(|k| k.series.len()).sum::<usize>() + ids.len() + acc.len();
    let values: usize = acc
        .values()
        .map(|k| k.series.values().map(Vec::len).sum::<usize>())
        .sum::<usize>()
        + ids.len()
        + acc.len();
    let config = Config {
        nr_cpus: Some(1),
        max_instances: u32::try_from(values + 8).map_err(io::Error::other)?,
        max_families: u32::try_from(acc.len() + 2).map_err(io::Error::other)?,
        max_members: u32::try_from(members + 2).map_err(io::Error::other)?,
        damon_capacity: 0,
        heartbeat_interval: std::time::Duration::ZERO,
        auto_heartbeat: false,
        method: MethodChoice::Lock,
    };
    let tmp = format!(
        ".kept.{}.{:016x}.tmp",
        std::process::id(),
        SegmentName::new("kept")?.nonce
    );
    let w = Writer::create(dir.join(&tmp), &config).map_err(|e| io::Error::other(e.to_string()))?;
    let bad = |e: perfabi::Error| io::Error::other(e.to_string());
    let store = |slot: u32, vals: &[u64]| {
        let words = w.state.words();
        for (k, v) in vals.iter().enumerate() {
            words[w.state.layout.counter_word(0, slot as usize + k)].store(*v, Ordering::Relaxed);
        }
    };
    for k in acc.values() {
        if matches!(k.family.origin, Origin::Entry(_)) {
            let sem = match k.family.kind {
                Kind::Counter => Semantics::Counter,
                _ => continue,
            };
            let id = w
                .add_typed(
                    &k.family.name,
                    &k.family.unit_text,
                    sem,
                    k.family.value_type,
                )
                .map_err(bad)?;
            if let Some(v) = k.series.values().next() {
                store(id.slot(), v);
            }
            continue;
        }
        let f = w.add_family(&spec_of(&k.family)).map_err(bad)?;
        for ((instance, labels), v) in &k.series {
            let l: Vec<(&str, &str)> = labels
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            let m = w.add_member(f, instance, &l).map_err(bad)?;
            store(m.value_slot(), v);
        }
    }
    let f = w
        .add_family(&FamilySpec::new(
            FOLDED_FAMILY,
            "Segments whose counts this kept file holds",
            "segment",
            Kind::Counter,
            perfabi::Unit::COUNT,
        ))
        .map_err(bad)?;
    for id in ids {
        let m = w.add_member(f, id, &[]).map_err(bad)?;
        store(m.value_slot(), &[1]);
    }
    for (name, k) in acc {
        let m = w.add_member(f, name, &[REFERENCE_LABEL]).map_err(bad)?;
        store(m.value_slot(), &[k.started]);
    }
    w.close();
    Ok(tmp.into())
}

/// Why the folded file `name` must not be removed, if it must not: it no
/// longer is the file read (`read`, the identity `id` it had then), or a
/// writer holds its liveness lock (a live writer's file under an identity
/// the kept file lists, §15.5 step 6: never removed, whatever the list
/// says). A file already gone is removed by nobody: `None`.
fn kept_back(folder: &Folder, name: &OsStr, id: Option<FileId>) -> Option<String> {
    let now = match folder.stat(name) {
        Ok(Some(e)) => e.id,
        Ok(None) => return None,
        Err(e) => return Some(e.to_string()),
    };
    if id.is_some_and(|id| id != now) {
        return Some("its name names another file now".into());
    }
    let file = match folder.open_read_checked(name, |e| {
        if e.kind != FileKind::Regular {
            return Err(crate::safe_open::Problem::Kind(e.kind));
        }
        if e.id != now {
            return Err(crate::safe_open::Problem::Changed);
        }
        Ok(())
    }) {
        Ok((file, _)) => file,
        // Another user's file (a sticky directory) cannot always be
        // opened: its removal is refused or not, as the folder says.
        Err(e) if matches!(e.problem, crate::safe_open::Problem::Io(_)) => return None,
        Err(e) => return Some(e.to_string()),
    };
    match lock::write_locked(
        &file,
        super::live_lock::LOCK_START,
        super::live_lock::LOCK_LEN,
    ) {
        Ok(false) => None,
        Ok(true) => Some("a writer holds its liveness lock".into()),
        Err(e) => Some(format!("its liveness lock cannot be asked about: {e}")),
    }
}

/// Folds the dead writers' segments of this user in the directory `dir`
/// (see the module's text). Safe against a crash at any moment and
/// against concurrent folds and readers.
pub fn fold(dir: &Path) -> io::Result<FoldReport> {
    let refused = |e: crate::safe_open::PathError| io::Error::other(e.to_string());
    let folder = directory::prepare(dir).map_err(refused)?;
    // Readers hold the lock for the moment of a read: wait a little for a
    // gap (a lock readers hold past that is replaced); another fold
    // running: leave the work to it.
    let Some(locks) = lock::for_fold(&folder, LOCK_PATIENCE)? else {
        return Ok(FoldReport {
            busy: true,
            ..FoldReport::default()
        });
    };
    let held = std::time::Instant::now();
    let mut report = FoldReport::default();
    // A crashed fold's temporary kept files: no fold runs but this one.
    // Only this user's segment files: it folds no other's (`read`), and
    // another user's files, of any name, never take their place.
    let me = euid();
    let listing = directory::list(&folder, |_| false, |uid| uid == me)?;
    for junk in &listing.hidden {
        let junk_name = junk.to_string_lossy();
        if junk_name.starts_with(".kept.")
            || junk_name.starts_with("..kept.")
            || junk_name.starts_with(lock::TEMP_PREFIX)
            || dead_writers_temporary(&junk_name)
        {
            let _ = folder.unlink(junk);
        }
    }
    let mut acc = BTreeMap::new();
    let mut old_ids = BTreeSet::new();
    let mut kept = None;
    if folder.stat(OsStr::new(KEPT_NAME))?.is_some() {
        // Never replace a kept file that cannot be read: its counts would
        // be lost.
        let (snap, _, _) = read(&folder, OsStr::new(KEPT_NAME))
            .ok()
            .flatten()
            .ok_or_else(|| io::Error::other("the kept file cannot be read: not folding"))?;
        check(&snap).map_err(io::Error::other)?;
        fold_in(&mut acc, &snap, None, KEPT_NAME, &mut report.retired);
        let index = KeptIndex::of(&snap);
        old_ids = index.identities.clone();
        kept = Some((snap, index));
    }
    let listed: BTreeSet<String> = listing.names.iter().map(SegmentName::identity).collect();
    let mut folded = Vec::new();
    // An identity is dropped only when its file is surely gone: a listing
    // that stopped at a limit may have missed files still there.
    let mut ids: BTreeSet<String> = if listing.truncated || listing.full {
        old_ids.clone()
    } else {
        old_ids.intersection(&listed).cloned().collect()
    };
    let started = std::time::Instant::now();
    let mut batch = Vec::new();
    // The files a reader merges that this fold does not fold: they may
    // be the reference of a family (§15.4).
    let mut others = Vec::new();
    for (seq, name) in listing.names.iter().enumerate() {
        let file = OsStr::new(&name.to_string()).to_os_string();
        if !ids.contains(&name.identity())
            && (batch.len() >= MAX_BATCH || started.elapsed() >= READ_BUDGET)
        {
            report.more = true;
            others.push(reference::Other { seq, file });
            continue;
        }
        if ids.contains(&name.identity()) {
            // Folded by a fold that stopped before removing it.
            folded.push((file, None));
            continue;
        }
        let (snap, writer_started, id) = match read(&folder, &file) {
            Ok(Some(dead)) => dead,
            Ok(None) => {
                // A live writer's.
                others.push(reference::Other { seq, file });
                continue;
            }
            Err(e) => {
                report.left.push(format!("{name}: {e}"));
                continue;
            }
        };
        if let Err(e) = check(&snap) {
            report.left.push(format!("{name}: {e}"));
            // Readers still merge it.
            others.push(reference::Other { seq, file });
            continue;
        }
        batch.push(Dead {
            seq,
            file,
            identity: name.identity(),
            started: writer_started,
            id,
            snap,
        });
    }
    // Each family's metadata are its reference's, chosen as readers
    // choose it (a reworded help kept, other identity metadata retiring
    // counts readers leave out already), §15.4, §15.5.
    let kept_ref = kept.as_ref().map(|(snap, index)| (snap, index));
    let refs = reference::choose(&folder, kept_ref, &batch, &others, READ_BUDGET);
    // A family whose reference was not found in time: the dead writers'
    // files that have it wait for a later fold, counted by readers.
    let (batch, waiting): (Vec<&Dead>, Vec<&Dead>) = batch.iter().partition(|d| {
        !d.snap
            .families
            .iter()
            .any(|f| refs.get(f.name.as_str()).is_some_and(|c| c.undecided))
    });
    for d in waiting {
        report.more = true;
        report.left.push(format!(
            "{}: a family's reference (§15.4) not found within the fold's budget: \
             left for a later fold",
            d.file.to_string_lossy()
        ));
    }
    reconcile(&mut acc, &refs, &mut report.retired);
    for d in batch {
        let shown = d.file.to_string_lossy();
        fold_in(&mut acc, &d.snap, Some(&refs), &shown, &mut report.retired);
        ids.insert(d.identity.clone());
        folded.push((d.file.clone(), Some(d.id)));
    }
    if folded.is_empty() && ids == old_ids {
        report.held = held.elapsed();
        return Ok(report);
    }
    let tmp = write_kept(dir, &acc, &ids)?;
    crash_at("written");
    folder
        .rename(&tmp, OsStr::new(KEPT_NAME))
        .inspect_err(|_| {
            let _ = folder.unlink(&tmp);
        })?;
    crash_at("renamed");
    for (k, (f, id)) in folded.iter().enumerate() {
        if let Some(why) = kept_back(&folder, f, *id) {
            report
                .left
                .push(format!("{}: not removed: {why}", Path::new(f).display()));
            continue;
        }
        match folder.unlink(f) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // Another user's file under a folded identity (a sticky
            // directory): its counts are in the kept file and readers skip
            // it; it stays, and the files after it are still removed.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => report
                .left
                .push(format!("{}: not removed: {e}", Path::new(f).display())),
            Err(e) => return Err(e),
        }
        if k == 0 {
            crash_at("unlinked");
        }
    }
    report.folded = folded.len();
    report.held = held.elapsed();
    drop(locks);
    Ok(report)
}
