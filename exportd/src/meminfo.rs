//! The memory source: `mem.physmem` and `mem.util.*` from `/proc/meminfo`,
//! gauges in KiB on CPU 0, named as PCP's Linux agent names them. A line
//! this kernel's `/proc/meminfo` lacks is skipped with one log line at
//! start.

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::safe_open::escape_path;
use perfabi_shm::writer::{MemberId, Writer};

use crate::collectors::{Collector, Source};
use crate::follow::Room;
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{self, ProcFile};

/// Family and `/proc/meminfo` line, in the README's order.
pub const FAMILIES: [(&str, &str); 16] = [
    ("mem.physmem", "MemTotal"),
    ("mem.util.free", "MemFree"),
    ("mem.util.available", "MemAvailable"),
    ("mem.util.bufmem", "Buffers"),
    ("mem.util.cached", "Cached"),
    ("mem.util.active", "Active"),
    ("mem.util.inactive", "Inactive"),
    ("mem.util.dirty", "Dirty"),
    ("mem.util.writeback", "Writeback"),
    ("mem.util.anonpages", "AnonPages"),
    ("mem.util.mapped", "Mapped"),
    ("mem.util.shmem", "Shmem"),
    ("mem.util.slab", "Slab"),
    ("mem.util.swapTotal", "SwapTotal"),
    ("mem.util.swapFree", "SwapFree"),
    ("mem.util.committed_AS", "Committed_AS"),
];

/// The [`FAMILIES`] whose line `text` has.
fn present(text: &str) -> Vec<(&'static str, &'static str)> {
    FAMILIES
        .iter()
        .copied()
        .filter(|(_, line)| procfs::meminfo(text).any(|(n, _)| n == *line))
        .collect()
}

/// The `meminfo` collector.
pub const COLLECTOR: Collector = Collector {
    name: "meminfo",
    default: true,
    help: "mem.physmem and mem.util.*, from /proc/meminfo",
    need: |ctx| need(&ctx.paths),
    start: |w, ctx| Ok(Box::new(MemSource::new(w, &ctx.paths)?)),
};

/// The families and members [`MemSource::new`] registers here now.
pub fn need(paths: &Paths) -> std::io::Result<Need> {
    let n = present(&ProcFile::new(paths.proc("meminfo")).read()?).len();
    Ok(Need {
        families: n,
        members: n,
    })
}

/// The memory source.
pub struct MemSource {
    file: ProcFile,
    /// `/proc/meminfo` line and its member.
    members: Vec<(&'static str, MemberId)>,
}

impl MemSource {
    /// Registers a family of one instance per line this host has in `w`.
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let mut file = ProcFile::new(paths.proc("meminfo"));
        let path = file.path().to_path_buf();
        let text = file.read().map_err(SourceError::Io)?;
        let present = present(&text);
        for (family, line) in FAMILIES.iter().filter(|f| !present.contains(f)) {
            eprintln!(
                "perfabi-exportd: {}: no {line} line: {family} not published",
                escape_path(&path)
            );
        }
        let members = present
            .into_iter()
            .map(|(family, line)| {
                let help = format!("{line} of /proc/meminfo");
                let f =
                    w.add_family(&FamilySpec::new(family, &help, "", Kind::Gauge, Unit::KIB))?;
                Ok((line, w.add_external_member(f, "", &[])?))
            })
            .collect::<Result<_, perfabi::Error>>()
            .map_err(SourceError::Abi)?;
        drop(text);
        Ok(Self { file, members })
    }
}

impl Source for MemSource {
    /// Reads `/proc/meminfo` once and publishes its values on CPU 0.
    fn refresh(&mut self, w: &Writer, _: &mut Room) -> std::io::Result<()> {
        let text = self.file.read()?;
        for (name, v) in procfs::meminfo(&text) {
            if let Some((_, m)) = self.members.iter().find(|(n, _)| *n == name) {
                let _ = w.publish_member_per_cpu(m, &[v]);
            }
        }
        Ok(())
    }
}
