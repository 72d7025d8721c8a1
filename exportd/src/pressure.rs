//! The pressure source: `kernel.all.pressure.<resource>.<some|full>.total`
//! from `/proc/pressure/<resource>`, microseconds during which some (or
//! all) non-idle tasks stalled on the resource, on CPU 0. A file the
//! kernel lacks (no PSI, `psi=0`, or `irq` before Linux 6.1), or a line
//! it lacks (`cpu` `full` before 5.13), is skipped with one log line at
//! start.

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::safe_open::escape_path;
use perfabi_shm::writer::{MemberId, Writer};

use crate::collectors::{Collector, Source};
use crate::follow::Room;
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{self, ProcFile};

/// The resources and which of their lines the README's table publishes.
const RESOURCES: [(&str, bool, bool); 4] = [
    ("cpu", true, true),
    ("memory", true, true),
    ("io", true, true),
    ("irq", false, true),
];

/// One file and the members of its lines.
struct File {
    file: ProcFile,
    some: Option<MemberId>,
    full: Option<MemberId>,
}

/// What this host's pressure files have: per resource, its file's path
/// and whether its `some` and `full` lines are there and published.
/// Unreadable files are logged (when `log`) and left out.
fn present(paths: &Paths, log: bool) -> Vec<(&'static str, ProcFile, bool, bool)> {
    let mut out = Vec::new();
    for (res, some, full) in RESOURCES {
        let mut f = ProcFile::new(paths.proc(&format!("pressure/{res}")));
        let p = match f.read() {
            Ok(text) => procfs::pressure(&text),
            Err(e) => {
                if log {
                    eprintln!("perfabi-exportd: {e}: kernel.all.pressure.{res}.* not published");
                }
                continue;
            }
        };
        let (has_some, has_full) = (some && p.some.is_some(), full && p.full.is_some());
        for (wanted, has, line) in [(some, has_some, "some"), (full, has_full, "full")] {
            if log && wanted && !has {
                eprintln!(
                    "perfabi-exportd: {}: no {line} total: kernel.all.pressure.{res}.{line}.total not published",
                    escape_path(f.path())
                );
            }
        }
        out.push((res, f, has_some, has_full));
    }
    out
}

/// The `pressure` collector.
pub const COLLECTOR: Collector = Collector {
    name: "pressure",
    default: true,
    help: "kernel.all.pressure.*, from /proc/pressure",
    need: |ctx| Ok(need(&ctx.paths)),
    start: |w, ctx| Ok(Box::new(PressureSource::new(w, &ctx.paths)?)),
};

/// The families and members [`PressureSource::new`] registers here now.
pub fn need(paths: &Paths) -> Need {
    let n = present(paths, false)
        .iter()
        .map(|p| usize::from(p.2) + usize::from(p.3))
        .sum();
    Need {
        families: n,
        members: n,
    }
}

/// The pressure source.
pub struct PressureSource {
    files: Vec<File>,
}

impl PressureSource {
    /// Registers a family of one instance per total this host has in `w`.
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let add = |res: &str, line: &str| -> Result<MemberId, perfabi::Error> {
            let help =
                format!("Time some tasks stalled on {res} ({line}), from /proc/pressure/{res}");
            let help = match line {
                "full" => help.replace("some tasks", "all non-idle tasks"),
                _ => help,
            };
            let f = w.add_family(&FamilySpec::new(
                &format!("kernel.all.pressure.{res}.{line}.total"),
                &help,
                "",
                Kind::Counter,
                Unit::US,
            ))?;
            w.add_external_member(f, "", &[])
        };
        let mut files = Vec::new();
        for (res, file, some, full) in present(paths, true) {
            files.push(File {
                file,
                some: some
                    .then(|| add(res, "some"))
                    .transpose()
                    .map_err(SourceError::Abi)?,
                full: full
                    .then(|| add(res, "full"))
                    .transpose()
                    .map_err(SourceError::Abi)?,
            });
        }
        Ok(Self { files })
    }
}

impl Source for PressureSource {
    /// Reads each file once and publishes its totals on CPU 0. A file that
    /// cannot be read keeps its last values; the first error is returned
    /// after the others are published.
    fn refresh(&mut self, w: &Writer, _: &mut Room) -> std::io::Result<()> {
        let mut result = Ok(());
        for f in &mut self.files {
            let p = match f.file.read() {
                Ok(text) => procfs::pressure(&text),
                Err(e) => {
                    if result.is_ok() {
                        result = Err(std::io::Error::new(
                            e.kind(),
                            format!("{}: {e}", escape_path(f.file.path())),
                        ));
                    }
                    continue;
                }
            };
            for (m, v) in [(&f.some, p.some), (&f.full, p.full)] {
                if let (Some(m), Some(v)) = (m, v) {
                    let _ = w.publish_member_per_cpu(m, &[v]);
                }
            }
        }
        result
    }
}
