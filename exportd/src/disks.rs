//! The disks source: `disk.dev.*` from `/proc/diskstats`, one instance
//! per whole disk with a medium.
//!
//! A disk is a name of `/proc/diskstats` that is also in `/sys/block`
//! (partitions are not; checked once per name) and has a medium: it is
//! listed in `/proc/partitions` (the kernel lists devices whose size is
//! not 0), or, for the removable disks that file leaves out (a CD drive),
//! its `/sys/block/NAME/size` is not 0 — read when such a disk is first
//! seen and again only when its counts move. An unbound loop device, an
//! unconfigured zram device or an empty drive has no medium and no I/O,
//! and is not published: attaching a file to a loop device (`losetup`)
//! makes it appear, detaching it makes it go, at the next refresh.
//! A refresh reads `/proc/diskstats` and `/proc/partitions` once each.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read;
use std::ops::Range;

use perfabi_families::{table, Family};
use perfabi_shm::writer::Writer;

use crate::collectors::{Collector, Source};
use crate::filter::Filter;
use crate::follow::{Follow, Room};
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{self, DiskStats, ProcFile};

/// Bytes per `/proc/diskstats` sector, whatever the device's own.
const SECTOR: u64 = 512;

/// One published field of a line.
#[derive(Clone, Copy)]
enum Field {
    Reads,
    Writes,
    Discards,
    Flushes,
    ReadBytes,
    WriteBytes,
    DiscardBytes,
}

impl Field {
    fn of(self, d: &DiskStats) -> u64 {
        match self {
            Field::Reads => d.reads,
            Field::Writes => d.writes,
            Field::Discards => d.discards.unwrap_or(0),
            Field::Flushes => d.flushes.unwrap_or(0),
            Field::ReadBytes => d.read_sectors.wrapping_mul(SECTOR),
            Field::WriteBytes => d.write_sectors.wrapping_mul(SECTOR),
            Field::DiscardBytes => d.discard_sectors.unwrap_or(0).wrapping_mul(SECTOR),
        }
    }
}

/// The families (defined in [`perfabi_families::table`]), each with its
/// field and the `/proc/diskstats` format (fields per line) that has it.
const FAMILIES: [(&Family, Field, usize); 7] = [
    (&table::DISK_READ, Field::Reads, 14),
    (&table::DISK_WRITE, Field::Writes, 14),
    (&table::DISK_DISCARD, Field::Discards, 18),
    (&table::DISK_FLUSH, Field::Flushes, 20),
    (&table::DISK_READ_BYTES, Field::ReadBytes, 14),
    (&table::DISK_WRITE_BYTES, Field::WriteBytes, 14),
    (&table::DISK_DISCARD_BYTES, Field::DiscardBytes, 18),
];

/// The fields per line of this kernel's `/proc/diskstats`: those of its
/// first line, or, with no device listed, what the kernel's release has
/// (18 from Linux 4.18, 20 from 5.5).
fn format(paths: &Paths, text: &str) -> usize {
    if let Some(line) = text.lines().find(|l| !l.trim().is_empty()) {
        return line.split_ascii_whitespace().count();
    }
    let release = std::fs::read_to_string(paths.proc("sys/kernel/osrelease")).unwrap_or_default();
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    match (v.next().unwrap_or(0), v.next().unwrap_or(0)) {
        (m, n) if (m, n) >= (5, 5) => 20,
        (m, n) if (m, n) >= (4, 18) => 18,
        _ => 14,
    }
}

/// What is known of one name of `/proc/diskstats`.
struct Name {
    /// In `/sys/block`: a whole disk.
    whole: bool,
    /// For a whole disk `/proc/partitions` does not list: its I/O count
    /// and whether it had a medium when its size was last read.
    unlisted: Option<(u64, bool)>,
    seen: u64,
}

/// Which names of `/proc/diskstats` are disks with a medium.
struct Disks {
    paths: Paths,
    names: HashMap<String, Name>,
    pass: u64,
    path: String,
    buf: String,
    /// The spans of `/proc/partitions`' names in its text, sorted by name.
    listed: Vec<Range<usize>>,
}

impl Disks {
    fn new(paths: &Paths) -> Self {
        Self {
            paths: paths.clone(),
            names: HashMap::new(),
            pass: 0,
            path: String::new(),
            buf: String::new(),
            listed: Vec::new(),
        }
    }

    /// Starts a refresh: `partitions` is `/proc/partitions`' text.
    fn begin(&mut self, partitions: &str) {
        self.pass += 1;
        self.listed.clear();
        let base = partitions.as_ptr() as usize;
        self.listed
            .extend(procfs::partitions(partitions).map(|(name, _)| {
                let at = name.as_ptr() as usize - base;
                at..at + name.len()
            }));
        self.listed
            .sort_unstable_by(|a, b| partitions[a.clone()].cmp(&partitions[b.clone()]));
    }

    /// `/sys/block/NAME/FILE` into `self.path` (sysfs spells a `/` of a
    /// device name `!`, as in `cciss!c0d0`).
    fn sys_path(&mut self, name: &str, file: &str) {
        self.path.clear();
        // not raw: builds the path to open, not a message
        let _ = write!(self.path, "{}/block/", self.paths.sys.display());
        self.path
            .extend(name.chars().map(|c| if c == '/' { '!' } else { c }));
        self.path.push_str(file);
    }

    /// Whether `d` is a whole disk with a medium (see the module's doc).
    fn medium(&mut self, d: &DiskStats, partitions: &str) -> bool {
        if d.name.is_empty() || d.name == "." || d.name == ".." {
            return false;
        }
        let pass = self.pass;
        if !self.names.contains_key(d.name) {
            self.sys_path(d.name, "");
            let whole = std::fs::symlink_metadata(&self.path).is_ok();
            self.names.insert(
                d.name.to_string(),
                Name {
                    whole,
                    unlisted: None,
                    seen: pass,
                },
            );
        }
        let listed = self
            .listed
            .binary_search_by(|r| partitions[r.clone()].cmp(d.name))
            .is_ok();
        let io = d.reads.wrapping_add(d.writes);
        let n = self.names.get_mut(d.name).expect("inserted above");
        n.seen = pass;
        if !n.whole {
            return false;
        }
        if listed {
            n.unlisted = None;
            return true;
        }
        if let Some((at, medium)) = n.unlisted {
            if at == io {
                return medium;
            }
        }
        self.sys_path(d.name, "/size");
        self.buf.clear();
        let _ =
            std::fs::File::open(&self.path).and_then(|f| f.take(64).read_to_string(&mut self.buf));
        let medium = self.buf.trim().parse::<u64>().is_ok_and(|s| s > 0);
        let n = self.names.get_mut(d.name).expect("inserted above");
        n.unlisted = Some((io, medium));
        medium
    }

    /// Forgets the names not seen since [`begin`](Self::begin).
    fn end(&mut self) {
        let pass = self.pass;
        self.names.retain(|_, n| n.seen == pass);
    }
}

/// The `diskstats` collector.
pub const COLLECTOR: Collector = Collector {
    name: "diskstats",
    default: true,
    help: "disk.dev.*, from /proc/diskstats (--collector.diskstats.device-include/-exclude)",
    need: |ctx| need(&ctx.paths, &ctx.disks),
    start: |w, ctx| Ok(Box::new(DiskSource::new(w, &ctx.paths, ctx.disks.clone())?)),
};

/// The disks of this host now that `filter` lets pass (names).
fn disks(paths: &Paths, filter: &Filter) -> std::io::Result<usize> {
    let mut stats = ProcFile::new(paths.proc("diskstats"));
    let mut parts = ProcFile::new(paths.proc("partitions"));
    let (stats, parts) = (stats.read()?, parts.read()?);
    let mut d = Disks::new(paths);
    d.begin(&parts);
    Ok(procfs::diskstats(&stats)
        .filter(|s| filter.allows(s.name) && d.medium(s, &parts))
        .count())
}

/// The families and members [`DiskSource::new`] registers here now, of
/// the disks `filter` lets pass.
pub fn need(paths: &Paths, filter: &Filter) -> std::io::Result<Need> {
    let fields = format(paths, &ProcFile::new(paths.proc("diskstats")).read()?);
    let families = FAMILIES.iter().filter(|x| fields >= x.2).count();
    Ok(Need {
        families,
        members: families * disks(paths, filter)?,
    })
}

/// The disks source.
pub struct DiskSource {
    stats: ProcFile,
    partitions: ProcFile,
    fields: Vec<Field>,
    disks: Disks,
    filter: Filter,
    follow: Follow,
    /// One disk's counts, in the order of `fields` (reused).
    counts: Vec<u64>,
}

impl DiskSource {
    /// Registers the families this kernel's `/proc/diskstats` has fields
    /// for (discards from Linux 4.18, flushes from 5.5) in `w`; the disks
    /// come at the first refresh, those `filter` lets pass.
    pub fn new(w: &Writer, paths: &Paths, filter: Filter) -> Result<Self, SourceError> {
        let mut stats = ProcFile::new(paths.proc("diskstats"));
        let n = format(paths, &stats.read().map_err(SourceError::Io)?);
        let mut partitions = ProcFile::new(paths.proc("partitions"));
        partitions.read().map_err(SourceError::Io)?;
        let mut families = Vec::new();
        let mut fields = Vec::new();
        for &(family, field, _) in FAMILIES.iter().filter(|x| n >= x.2) {
            families.push(w.add_family(&family.spec()).map_err(SourceError::Abi)?);
            fields.push(field);
        }
        Ok(Self {
            stats,
            partitions,
            fields,
            disks: Disks::new(paths),
            filter,
            follow: Follow::new("disk", families),
            counts: Vec::new(),
        })
    }
}

impl Source for DiskSource {
    /// Reads `/proc/diskstats` and `/proc/partitions` once, follows the
    /// disks and publishes their counts, all on CPU 0.
    fn refresh(&mut self, w: &Writer, room: &mut Room) -> std::io::Result<()> {
        let partitions = self.partitions.read()?;
        let text = self.stats.read()?;
        self.disks.begin(&partitions);
        self.follow.begin();
        for d in procfs::diskstats(&text) {
            if !self.filter.allows(d.name) || !self.disks.medium(&d, &partitions) {
                continue;
            }
            self.counts.clear();
            self.counts.extend(self.fields.iter().map(|f| f.of(&d)));
            let Some(members) = self.follow.see(w, room, d.name, &self.counts) else {
                continue;
            };
            for (m, &v) in members.iter().zip(&self.counts) {
                let _ = w.publish_member_per_cpu(m, &[v]);
            }
        }
        self.follow.end(w, room);
        self.disks.end();
        Ok(())
    }
}
