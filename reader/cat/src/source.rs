//! What perfabi-cat reads: one segment, or a directory of segments read
//! as one (`spec/PERFABI.md` §15, [`perfabi_reader::directory`]), and one
//! read of either, whose families the table, JSON, rates and the live view
//! show alike ([`Families`]).

use perfabi_reader::directory::{Directory, Scrape};
use perfabi_reader::view::Families;
use perfabi_reader::{Error, Liveness, Segment, Snapshot};

/// A segment or a directory.
pub enum Source {
    /// One segment.
    Segment(Box<Segment>),
    /// A directory of segments, merged at every read.
    Directory(Directory),
}

/// One read of a [`Source`]: a snapshot, or a directory's merged read.
#[derive(Default)]
pub struct Read {
    /// A segment's snapshot (its buffers reused from read to read).
    pub snap: Snapshot,
    /// A directory's merged read (`None` for a segment).
    pub scrape: Option<Scrape>,
}

impl Read {
    /// Its families with their values.
    pub fn families(&self) -> Families<'_> {
        match &self.scrape {
            Some(s) => Families::merged(&s.families),
            None => Families::snapshot(&self.snap),
        }
    }

    /// What it was read from, for the lines of `--watch`: a segment's
    /// metadata generation, or the segment files a directory merged.
    pub fn stamp(&self) -> String {
        match &self.scrape {
            Some(s) => format!("{} segments", s.segments),
            None => format!("generation {}", self.snap.generation),
        }
    }
}

impl Source {
    /// Reads into `into` (a snapshot of the segment, or the directory
    /// listed, opened and merged again).
    pub fn read_into(&mut self, into: &mut Read) -> Result<(), Error> {
        match self {
            Source::Segment(seg) => {
                into.scrape = None;
                seg.snapshot_into(&mut into.snap)
            }
            Source::Directory(dir) => {
                into.scrape = Some(dir.read()?);
                Ok(())
            }
        }
    }

    /// The path read, escaped for a terminal.
    pub fn shown_path(&self) -> String {
        let p = match self {
            Source::Segment(seg) => seg.path(),
            Source::Directory(dir) => Some(dir.path()),
        };
        p.map_or_else(
            || "(segment)".to_string(),
            |p| perfabi_shm::safe_open::escape_path(p).to_string(),
        )
    }

    /// Who writes it, in a few words, and whether that needs attention: a
    /// segment's writer liveness (gone, closed or silent: stale); a
    /// directory's segment files and problems of `last` (a problem needs
    /// attention).
    pub fn status(&mut self, last: &Read) -> (String, bool) {
        match self {
            Source::Segment(seg) => match seg.info() {
                Ok(i) => (
                    format!("writer {}", liveness(&i.liveness)),
                    !matches!(i.liveness, Liveness::Alive | Liveness::Kernel),
                ),
                Err(e) => (format!("writer unknown ({e})"), true),
            },
            Source::Directory(_) => match &last.scrape {
                Some(s) if s.problems.is_empty() => {
                    (format!("{} segments merged", s.segments), false)
                }
                Some(s) => (
                    format!(
                        "{} segments merged, {} left out: {}",
                        s.segments,
                        s.problems.len(),
                        s.problems[0]
                    ),
                    true,
                ),
                None => ("no read yet".into(), false),
            },
        }
    }
}

/// A writer's liveness in a word or three.
fn liveness(l: &Liveness) -> String {
    match l {
        Liveness::Alive => "alive".into(),
        Liveness::Kernel => "kernel".into(),
        Liveness::Closed => "closed".into(),
        Liveness::Silent { silent_for } => {
            format!("stale (silent {:.1} s)", silent_for.as_secs_f64())
        }
        Liveness::Dead { silent_for } => {
            format!("stale (writer gone, {:.1} s)", silent_for.as_secs_f64())
        }
    }
}
