//! What an endpoint serves, a segment or a directory of segments: a
//! snapshot per scrape (or a merged read of the directory), rendered, or
//! the one-line reason it could not be read.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use perfabi_reader::directory::DirectoryOptions;
use perfabi_reader::exposition::{self, Format, Sink, Text};
use perfabi_reader::view::Families;
use perfabi_reader::{Options, Segment, Snapshot};
use perfabi_shm::safe_open::escape_path;

use crate::directory::Served;
use crate::negotiate::Exposition;
use crate::protobuf::Encoder;

/// A failed read: the reader's error code (`spec/PERFABI.md` §11.6) and
/// the one-line reason.
pub(crate) struct Failure {
    /// The reader's error code (`not-found`, `busy`…).
    pub(crate) code: &'static str,
    /// The reason, one line, its untrusted parts escaped.
    pub(crate) reason: String,
}

/// The segment or directory an endpoint serves, opened at the first scrape
/// and again after a failed one.
pub struct Endpoint {
    path: PathBuf,
    per_cpu: bool,
    source: Mutex<Source>,
    last_error: Mutex<Option<String>>,
}

/// What the scrapes read.
enum Source {
    /// One segment, read with these options.
    Segment(Options, Box<Reading>),
    /// A directory of segments, read as one.
    Directory(Box<Served>),
}

/// The open segment and the snapshot buffer the scrapes fill: while the
/// metadata generation stays the same, a scrape copies the values only and
/// keeps the families decoded by an earlier one (`Segment::snapshot_into`).
#[derive(Default)]
struct Reading {
    segment: Option<Segment>,
    snapshot: Snapshot,
}

impl Reading {
    /// Fills `self.snapshot` (opening the segment if needed); on failure,
    /// the one-line reason, and the segment and the buffer's decoded
    /// metadata are dropped so that the next scrape opens it again.
    fn refresh(&mut self, path: &Path, opts: &Options) -> Result<&Snapshot, Failure> {
        let result = match self.segment.as_mut() {
            Some(seg) => seg.snapshot_into(&mut self.snapshot),
            None => Segment::open_with(path, opts.clone()).and_then(|mut seg| {
                let r = seg.snapshot_into(&mut self.snapshot);
                self.segment = Some(seg);
                r
            }),
        };
        match result {
            Ok(()) => Ok(&self.snapshot),
            Err(e) => {
                self.segment = None;
                self.snapshot = Snapshot::default();
                // The reader's message escapes what it quotes itself.
                Err(Failure {
                    code: e.code(),
                    reason: format!("cannot read {}: {e}", escape_path(path)),
                })
            }
        }
    }
}

impl Endpoint {
    /// An endpoint for the segment at `path`, read with `opts`; with
    /// `per_cpu`, one series per CPU (label `cpu`) instead of totals.
    pub fn new(path: impl Into<PathBuf>, opts: Options, per_cpu: bool) -> Self {
        Self::of(path.into(), per_cpu, Source::Segment(opts, Box::default()))
    }

    /// An endpoint for the directory of segments at `path`, read as one
    /// with `opts` (`spec/PERFABI.md` §15) at every scrape: merged totals
    /// (no per-CPU series), and the reader's gauges
    /// `perfabi_directory_segments` and `perfabi_directory_problems`. A
    /// problem of one file or family is logged once while it lasts, never
    /// a failed scrape; only a directory refused as a whole is a `503`.
    pub fn directory(path: impl Into<PathBuf>, opts: DirectoryOptions) -> Self {
        let path = path.into();
        let served = Served::new(&path, opts);
        Self::of(path, false, Source::Directory(Box::new(served)))
    }

    fn of(path: PathBuf, per_cpu: bool, source: Source) -> Self {
        Self {
            path,
            per_cpu,
            source: Mutex::new(source),
            last_error: Mutex::new(None),
        }
    }

    /// The segment's or directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One snapshot of the segment (opening it if needed); on failure, the
    /// one-line reason, and the segment is dropped so that the next scrape
    /// opens it again. A directory has no one snapshot: its reason says so.
    pub fn snapshot(&self) -> Result<Snapshot, String> {
        let mut source = self.source.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *source {
            Source::Segment(opts, reading) => reading
                .refresh(&self.path, opts)
                .cloned()
                .map_err(|f| f.reason),
            Source::Directory(_) => Err(format!(
                "{} is a directory of segments: it is read as one by a scrape, not snapshotted",
                escape_path(&self.path)
            )),
        }
    }

    /// One scrape: a snapshot (or the directory's merged read) rendered in
    /// `format`, or the reason it failed (one line, its untrusted parts
    /// escaped with [`perfabi::text::escape`]). Scrapes take turns: the
    /// snapshot is rendered from the endpoint's one buffer before the next
    /// scrape refills it.
    pub fn scrape(&self, format: Format) -> Result<String, String> {
        self.read(format).map_err(|f| f.reason)
    }

    /// [`Endpoint::scrape`], its failure with the reader's error code.
    pub(crate) fn read(&self, format: Format) -> Result<String, Failure> {
        let mut page = String::with_capacity(64 * 1024);
        self.walk(&mut Text {
            out: &mut page,
            format,
        })?;
        Ok(page)
    }

    /// One scrape as [`scrape`](Self::scrape), in a text format or as the
    /// protobuf exposition (native histograms, [`crate::protobuf`]).
    pub fn page(&self, exposition: Exposition) -> Result<Vec<u8>, String> {
        self.read_page(exposition).map_err(|f| f.reason)
    }

    /// [`Endpoint::page`], its failure with the reader's error code.
    pub(crate) fn read_page(&self, exposition: Exposition) -> Result<Vec<u8>, Failure> {
        match exposition {
            Exposition::Text(format) => self.read(format).map(String::into_bytes),
            Exposition::Protobuf => {
                let mut encoder = Encoder::new();
                self.walk(&mut encoder)?;
                Ok(encoder.finish())
            }
        }
    }

    /// One scrape handed to `sink`, or the reason it failed.
    fn walk(&self, sink: &mut impl Sink) -> Result<(), Failure> {
        let mut source = self.source.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *source {
            Source::Segment(opts, reading) => {
                let snap = reading.refresh(&self.path, opts)?;
                exposition::walk(sink, &Families::snapshot(snap), self.per_cpu);
                Ok(())
            }
            Source::Directory(served) => served.walk(sink),
        }
    }

    /// Logs a read's failure (`Some(reason)`) to stderr when it differs
    /// from the last one logged (a writer that stays away is logged once,
    /// not every scrape), and a recovery (`None`) once.
    pub(crate) fn log(&self, failure: Option<&str>) {
        let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        match (failure, last.as_deref()) {
            (Some(e), prev) if prev != Some(e) => {
                eprintln!("perfabi-prometheus: {e} (answering 503)");
                *last = Some(e.to_string());
            }
            (None, Some(_)) => {
                eprintln!(
                    "perfabi-prometheus: {} readable again",
                    escape_path(&self.path)
                );
                *last = None;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoint keeps the families decoded by an earlier scrape while
    /// the metadata generation stays; an instance added, a value changed or
    /// an instance deleted between two scrapes must show in the next one.
    #[test]
    fn a_scrape_shows_what_changed_since_the_last_one() {
        use perfabi::{FamilySpec, Kind, Unit};
        use perfabi_shm::writer::{Config, Writer};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let cfg = Config {
            max_instances: 64,
            max_families: 4,
            max_members: 16,
            damon_capacity: 0,
            ..Config::default()
        };
        let w = Writer::create(&path, &cfg).unwrap();
        let spec = FamilySpec::new("io.ops", "Ops", "dev", Kind::Counter, Unit::COUNT);
        let fam = w.add_family(&spec).unwrap();
        let a = w.add_member(fam, "a", &[]).unwrap();
        w.member_add(&a, 5).unwrap();
        let e = Endpoint::new(&path, Options::default(), false);
        let page = e.scrape(Format::OpenMetrics).unwrap();
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"a\"} 5\n"),
            "{page}"
        );

        w.member_add(&a, 1).unwrap();
        let b = w.add_member(fam, "b", &[]).unwrap();
        w.member_add(&b, 3).unwrap();
        let page = e.scrape(Format::OpenMetrics).unwrap();
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"a\"} 6\n"),
            "{page}"
        );
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"b\"} 3\n"),
            "{page}"
        );

        w.del_member(&a).unwrap();
        let page = e.scrape(Format::Prometheus).unwrap();
        assert!(!page.contains("dev=\"a\""), "{page}");
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"b\"} 3\n"),
            "{page}"
        );
        assert_eq!(e.snapshot().unwrap().families.len(), 1);
    }

    /// A path with a line break and terminal controls gives a reason on one
    /// line with neither in it.
    #[test]
    fn reasons_are_one_escaped_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a\nb\x1b]0;pwn\x07");
        let e = Endpoint::new(&path, Options::default(), false);
        let reason = e.scrape(Format::Prometheus).unwrap_err();
        assert_eq!(reason.lines().count(), 1, "{reason:?}");
        assert!(!reason.contains(['\x1b', '\x07']), "{reason:?}");
        assert!(reason.contains("a\\nb\\u{1b}]0;pwn\\u{7}"), "{reason:?}");
    }
}
