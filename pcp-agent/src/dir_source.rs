//! A directory of segments as the agent sees it (`--directory`,
//! `spec/PERFABI.md` §15): read as one by the reader library's
//! [`Directory`], which lists it, checks and reads every file and merges
//! the families. Nothing is merged here.
//!
//! The merged families are laid out as the agent lays out a segment's
//! values ([`DirSource::snapshot`]: one row, as of one CPU, each merged
//! series' words at its `value_slot`), so that the metrics, instance
//! domains, help and labels are made and served by the same code as a
//! segment's. The snapshot's `generation` changes exactly when the merged
//! families (names, metadata, series) change: the agent rebuilds its
//! tables then, and only then.
//!
//! Every fetch reads the directory anew ([`DirSource::read`]); other
//! requests (names, descriptors, instances) read it if the last read is
//! older than [`MAX_AGE`] ([`DirSource::refresh`]). A file refused, a
//! family in conflict, a limit reached are problems of a read (logged once
//! each while they last, and counted by `perfabi.segment.problems`), never
//! a failed fetch. Only the directory as a whole can fail (refused, or a
//! fold holding its lock past the busy timeout): then the last good values
//! are held for at most [`HOLD`] after they were read, as for a segment,
//! and after that no values are served until a read succeeds.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use perfabi::Snapshot;
use perfabi_reader::directory::{Directory, DirectoryOptions, Scrape};
use perfabi_shm::safe_open::escape_path;

pub use crate::source::HOLD;

/// How old a read may be for a request that is not a fetch.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// Most problems logged at one read (the rest are counted in one line).
const MAX_LOGGED: usize = 10;

/// A segment directory, read as one for the agent.
pub struct DirSource {
    path: PathBuf,
    opts: DirectoryOptions,
    dir: Option<Directory>,
    /// The merged families and their values (see the module's doc).
    pub snapshot: Snapshot,
    /// Whether `snapshot` holds a read (fresh or held).
    pub available: bool,
    /// Segment files the last good read merged.
    pub segments: usize,
    /// The last good read's problems, one line each.
    pub problems: Vec<String>,
    /// The same, `; ` between two.
    problems_text: String,
    /// Whether the values are held over a failed read.
    pub held: bool,
    /// Requests answered with held values.
    pub held_reads: u64,
    /// When the last read was made, and the last good one.
    last_read: Option<Instant>,
    last_good: Option<Instant>,
    /// The failure last logged (logged once while it lasts).
    last_failure: Option<String>,
}

impl DirSource {
    /// The directory at `path`, read with `opts`; nothing is read yet.
    pub fn new(path: &Path, opts: DirectoryOptions) -> Self {
        Self {
            path: path.to_path_buf(),
            opts,
            dir: None,
            snapshot: Snapshot::default(),
            available: false,
            segments: 0,
            problems: Vec::new(),
            problems_text: String::new(),
            held: false,
            held_reads: 0,
            last_read: None,
            last_good: None,
            last_failure: None,
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last good read's problems in one line, `; ` between two.
    pub fn problems_text(&self) -> &str {
        &self.problems_text
    }

    /// The label key writers are kept apart under, if the agent was given
    /// one.
    pub fn writer_label(&self) -> Option<&str> {
        self.opts.writer_label.as_deref()
    }

    /// Before a request that is not a fetch: reads the directory if it was
    /// never read, or not for [`MAX_AGE`].
    pub fn refresh(&mut self, now: Instant, log: &mut dyn FnMut(String)) {
        if self
            .last_read
            .is_none_or(|t| now.saturating_duration_since(t) >= MAX_AGE)
        {
            self.read(now, log);
        }
    }

    /// Reads the directory now: merged by the reader library, laid out in
    /// [`DirSource::snapshot`].
    pub fn read(&mut self, now: Instant, log: &mut dyn FnMut(String)) {
        self.last_read = Some(now);
        let read = match &mut self.dir {
            Some(d) => d.read(),
            None => Directory::open(&self.path, self.opts.clone()).and_then(|mut d| {
                let r = d.read();
                self.dir = Some(d);
                r
            }),
        };
        match read {
            Ok(scrape) => {
                if let Some(f) = self.last_failure.take() {
                    log(format!(
                        "{}: read again ({} segment files) after: {f}",
                        escape_path(&self.path),
                        scrape.segments
                    ));
                }
                self.install(scrape, log);
                self.last_good = Some(now);
                self.available = true;
                self.held = false;
            }
            Err(e) => {
                let what = e.to_string();
                let within = self
                    .last_good
                    .is_some_and(|t| now.saturating_duration_since(t) <= HOLD);
                if self.available && within {
                    self.held = true;
                    self.held_reads += 1;
                } else {
                    self.available = false;
                    self.held = false;
                    self.snapshot.families.clear();
                    self.snapshot.values.clear();
                    self.snapshot.slots = 0;
                    self.snapshot.generation += 1;
                    self.segments = 0;
                    self.problems.clear();
                    self.problems_text.clear();
                    // A directory replaced or refused is opened anew.
                    self.dir = None;
                }
                let line = format!(
                    "{what}; {}",
                    if self.held {
                        "answering with the values of the last good read"
                    } else {
                        "serving no values"
                    }
                );
                if self.last_failure.as_deref() != Some(line.as_str()) {
                    log(line.clone());
                    self.last_failure = Some(line);
                }
            }
        }
    }

    /// Lays `scrape` out in the snapshot; a new generation if its families
    /// differ from the last read's. Logs the problems not logged at the
    /// last read.
    fn install(&mut self, scrape: Scrape, log: &mut dyn FnMut(String)) {
        let mut families = Vec::with_capacity(scrape.families.len());
        let mut values = Vec::new();
        for m in scrape.families {
            let mut f = m.family;
            for (member, r) in f.members.iter_mut().zip(&m.readings) {
                let at = values.len();
                r.push_words(&mut values);
                member.value_slot = u32::try_from(at).unwrap_or(u32::MAX);
                member.words = u32::try_from(values.len() - at).unwrap_or(0);
            }
            families.push(f);
        }
        let s = &mut self.snapshot;
        if families != s.families {
            s.generation += 1;
            s.families = families;
        }
        s.nr_cpus = 1;
        s.slots = values.len();
        s.values = values;
        self.segments = scrape.segments;
        let problems: Vec<String> = scrape.problems.into_iter().map(|p| p.message).collect();
        let old: HashSet<&String> = self.problems.iter().collect();
        let new: Vec<&String> = problems.iter().filter(|p| !old.contains(p)).collect();
        for p in new.iter().take(MAX_LOGGED) {
            log(format!("left out of the merge: {p}"));
        }
        if new.len() > MAX_LOGGED {
            log(format!(
                "... and {} more problems in {}",
                new.len() - MAX_LOGGED,
                escape_path(&self.path)
            ));
        }
        if problems != self.problems {
            self.problems_text = problems.join("; ");
            self.problems = problems;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::{FamilySpec, Kind, Unit};
    use perfabi_shm::writer::{Config, FamilyId, Writer};

    fn writer(dir: &Path, name: &str, n: i64) -> (Writer, FamilyId) {
        let w = Writer::create_in(dir, name, &Config::default()).unwrap();
        let f = w
            .add_family(&FamilySpec::new(
                "jobs",
                "Jobs done",
                "kind",
                Kind::Counter,
                Unit::COUNT,
            ))
            .unwrap();
        let m = w.add_member(f, "build", &[]).unwrap();
        w.member_add(&m, n).unwrap();
        (w, f)
    }

    /// A directory absent when the agent starts is served once a writer
    /// makes it, as a segment that appears later is.
    #[test]
    fn a_directory_made_after_the_agent_starts_is_served() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("later");
        let mut s = DirSource::new(&dir, DirectoryOptions::default());
        let mut logs = Vec::new();
        let t0 = Instant::now();
        s.refresh(t0, &mut |l| logs.push(l));
        assert!(!s.available && !s.held);
        assert_eq!(total(&s), None);
        let _w = writer(&dir, "a", 3);
        // Not read again within MAX_AGE of the last read, then read.
        s.refresh(t0 + MAX_AGE / 2, &mut |l| logs.push(l));
        assert!(!s.available);
        s.refresh(t0 + MAX_AGE, &mut |l| logs.push(l));
        assert!(s.available);
        assert_eq!((total(&s), s.segments), (Some(3), 1));
        assert_eq!(logs.len(), 2, "{logs:#?}");
        assert!(logs[0].contains("serving no values"), "{logs:#?}");
        assert!(
            logs[1].contains("read again (1 segment files)"),
            "{logs:#?}"
        );
    }

    fn total(s: &DirSource) -> Option<u64> {
        let f = s.snapshot.families.iter().find(|f| f.name == "jobs")?;
        Some(s.snapshot.values[f.members.first()?.value_slot as usize])
    }

    /// The merged values are laid out where the members say; the
    /// generation moves when the series change, not when values do; a
    /// directory gone is held, then dropped, and logged once each.
    #[test]
    fn merged_values_are_laid_out_and_the_generation_moves_with_the_series() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("segs");
        let (a, jobs) = writer(&dir, "a", 5);
        let mut s = DirSource::new(&dir, DirectoryOptions::default());
        let mut logs = Vec::new();
        let t0 = Instant::now();
        s.read(t0, &mut |l| logs.push(l));
        assert!(s.available);
        assert_eq!((total(&s), s.segments), (Some(5), 1));
        let g = s.snapshot.generation;
        let _b = writer(&dir, "b", 7);
        s.read(t0, &mut |l| logs.push(l));
        assert_eq!((total(&s), s.segments), (Some(12), 2));
        assert_eq!(s.snapshot.generation, g, "the same series: same tables");
        a.add_member(jobs, "test", &[]).unwrap();
        s.read(t0, &mut |l| logs.push(l));
        assert_eq!(s.snapshot.generation, g + 1, "a new series: new tables");
        assert_eq!(s.snapshot.families[0].members.len(), 2);
        // A closed writer's counts stay; a refresh within MAX_AGE reads
        // nothing.
        drop(a);
        s.refresh(t0 + Duration::from_millis(10), &mut |l| logs.push(l));
        assert_eq!(s.segments, 2);
        // The directory refused: held, then dropped.
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        s.read(t0 + Duration::from_secs(1), &mut |l| logs.push(l));
        assert!(s.available && s.held);
        assert_eq!(total(&s), Some(12));
        s.read(t0 + Duration::from_secs(2), &mut |l| logs.push(l));
        assert_eq!(s.held_reads, 2);
        s.read(t0 + HOLD + Duration::from_secs(2), &mut |l| logs.push(l));
        assert!(!s.available && !s.held);
        assert_eq!(total(&s), None);
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        s.read(t0 + HOLD + Duration::from_secs(3), &mut |l| logs.push(l));
        assert!(s.available);
        assert_eq!(total(&s), Some(12));
        assert_eq!(logs.len(), 3, "{logs:#?}");
        assert!(logs[0].contains("answering with the values of the last good read"));
        assert!(logs[1].contains("serving no values"));
        assert!(logs[2].contains("read again (2 segment files)"));
    }
}
