//! The `filesystem` collector: `statvfs` of every mount of
//! `/proc/self/mountinfo` (as node_exporter's filesystem collector and
//! `df` report them), one instance per `mountpoint`, labels `device` and
//! `fstype`, gauges on CPU 0:
//!
//! * `filesys.capacity`, `filesys.free` (root's reserve included),
//!   `filesys.avail` (for unprivileged users): bytes;
//! * `filesys.maxfiles`, `filesys.freefiles`: inodes;
//! * `filesys.readonly`: 1 if mounted read-only;
//! * `filesys.device_error`: 1 if the last `statvfs` failed or is stuck.
//!
//! Mount points and filesystem types matching the exclude patterns
//! (node_exporter's defaults: `/proc`, `/sys`, `/dev`, … and the virtual
//! types) are left out. Of several mounts on one mount point the last
//! (the visible one) counts. A `statvfs` that hangs (a dead NFS server)
//! does not stall the refresh: [`crate::statfs`] waits for it at most
//! `--collector.filesystem.mount-timeout`, then marks the mount stuck
//! (`device_error` 1, its other values as they were) until the call
//! returns. A mount point, device or type that cannot be an instance
//! string or label value (spec §5.3: a space, more than 63 or 47 bytes) is
//! skipped with one log line and counted in `exportd.skipped_instances`.
//! A mount point whose device or type changed (unmounted and mounted
//! again) is a new registration.

use std::collections::HashMap;
use std::path::Path;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::Writer;

use crate::collectors::{Collector, FsOptions, Source};
use crate::follow::{Follow, Room};
use crate::mountinfo::{self, Mount};
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::ProcFile;
use crate::statfs::{Outcome, Statter, Usage};

/// The `filesystem` collector.
pub const COLLECTOR: Collector = Collector {
    name: "filesystem",
    default: true,
    help: "filesys.*, statvfs of each mount of /proc/self/mountinfo (--collector.filesystem.*)",
    need: |ctx| {
        let n = mounts(&ctx.paths, &ctx.filesystem)?.len();
        Ok(Need {
            families: FAMILIES.len(),
            members: FAMILIES.len() * n,
        })
    },
    start: |w, ctx| Ok(Box::new(FsSource::new(w, &ctx.paths, &ctx.filesystem)?)),
};

/// The families: name, help, unit.
const FAMILIES: [(&str, &str, Unit); 7] = [
    (
        "filesys.capacity",
        "Size of the filesystem, from statvfs",
        Unit::BYTES,
    ),
    (
        "filesys.free",
        "Free space, root's reserve included, from statvfs",
        Unit::BYTES,
    ),
    (
        "filesys.avail",
        "Space free for unprivileged users, from statvfs",
        Unit::BYTES,
    ),
    ("filesys.maxfiles", "Inodes, from statvfs", Unit::COUNT),
    (
        "filesys.freefiles",
        "Free inodes, from statvfs",
        Unit::COUNT,
    ),
    (
        "filesys.readonly",
        "1 if mounted read-only, from /proc/self/mountinfo",
        Unit::COUNT,
    ),
    (
        "filesys.device_error",
        "1 if the last statvfs failed or did not answer in time",
        Unit::COUNT,
    ),
];

/// The mounts of `mountinfo` the options let pass, one per mount point
/// (the last).
fn select(text: &str, o: &FsOptions) -> Vec<Mount> {
    let mut out: Vec<Mount> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for m in mountinfo::mounts(text) {
        if !o.mount_points.allows(&m.mountpoint) || !o.fs_types.allows(&m.fstype) {
            continue;
        }
        match at.get(&m.mountpoint) {
            Some(&i) => out[i] = m,
            None => {
                at.insert(m.mountpoint.clone(), out.len());
                out.push(m);
            }
        }
    }
    out
}

fn mounts(paths: &Paths, o: &FsOptions) -> std::io::Result<Vec<Mount>> {
    Ok(select(
        &ProcFile::new(paths.proc("self/mountinfo")).read()?,
        o,
    ))
}

/// The `filesystem` collector's source.
pub struct FsSource {
    file: ProcFile,
    options: FsOptions,
    follow: Follow,
    statter: Statter,
    /// Each published mount point's device and type, when registered.
    seen: HashMap<String, (String, String)>,
    /// The last values published of each mount point.
    last: HashMap<String, Usage>,
}

impl FsSource {
    /// Registers the families in `w`; the mounts come at the first
    /// refresh.
    pub fn new(w: &Writer, paths: &Paths, options: &FsOptions) -> Result<Self, SourceError> {
        let mut file = ProcFile::new(paths.proc("self/mountinfo"));
        file.read().map_err(SourceError::Io)?;
        let families = FAMILIES
            .iter()
            .map(|(name, help, unit)| {
                w.add_family(&FamilySpec::new(
                    name,
                    help,
                    "mountpoint",
                    Kind::Gauge,
                    *unit,
                ))
            })
            .collect::<Result<_, _>>()
            .map_err(SourceError::Abi)?;
        Ok(Self {
            file,
            statter: Statter::new(options.stat.clone(), options.timeout),
            options: options.clone(),
            follow: Follow::new("mount point", families),
            seen: HashMap::new(),
            last: HashMap::new(),
        })
    }
}

impl Source for FsSource {
    /// Reads `/proc/self/mountinfo` once, asks `statvfs` of each mount
    /// (each waited for at most the timeout) and publishes.
    fn refresh(&mut self, w: &Writer, room: &mut Room) -> std::io::Result<()> {
        let mounts = select(&self.file.read()?, &self.options);
        self.follow.begin();
        for m in &mounts {
            let labels = [("device", m.device.as_str()), ("fstype", m.fstype.as_str())];
            let now = (m.device.clone(), m.fstype.clone());
            if self.seen.get(&m.mountpoint).is_some_and(|was| *was != now) {
                self.follow.forget(w, room, &m.mountpoint);
                self.last.remove(&m.mountpoint);
            }
            let Some(members) = self
                .follow
                .see_labelled(w, room, &m.mountpoint, &[], &labels)
            else {
                continue;
            };
            let outcome = self.statter.stat(Path::new(&m.mountpoint));
            self.seen.insert(m.mountpoint.clone(), now);
            let (usage, error) = match outcome {
                Outcome::Usage(u) => (u, 0),
                Outcome::Failed(_) | Outcome::Stuck => {
                    (self.last.get(&m.mountpoint).copied().unwrap_or_default(), 1)
                }
            };
            let values = [
                usage.size,
                usage.free,
                usage.avail,
                usage.files,
                usage.files_free,
                u64::from(m.readonly),
                error,
            ];
            for (member, v) in members.iter().zip(values) {
                let _ = w.publish_member_per_cpu(member, &[v]);
            }
            self.last.insert(m.mountpoint.clone(), usage);
        }
        self.follow.end(w, room);
        let live: std::collections::HashSet<&str> = self.follow.instances().collect();
        self.seen.retain(|k, _| live.contains(k.as_str()));
        self.last.retain(|k, _| live.contains(k.as_str()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{Filter, FS_TYPES_EXCLUDE, MOUNT_POINTS_EXCLUDE};

    #[test]
    fn node_exporters_default_excludes_and_the_last_mount_wins() {
        let o = FsOptions {
            mount_points: Filter::exclude("m", MOUNT_POINTS_EXCLUDE).unwrap(),
            fs_types: Filter::exclude("t", FS_TYPES_EXCLUDE).unwrap(),
            ..FsOptions::default()
        };
        let t = "1 0 0:1 / / rw - ext4 /dev/vda1 rw\n\
                 2 1 0:2 / /proc rw - proc proc rw\n\
                 3 1 0:3 / /dev/shm rw - tmpfs tmpfs rw\n\
                 4 1 0:4 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n\
                 5 1 0:5 / /data rw - ext4 /dev/vdb rw\n\
                 6 1 0:6 / /data ro - xfs /dev/vdc ro\n\
                 7 1 0:7 / /run rw - tmpfs tmpfs rw\n\
                 8 1 0:8 / /var/lib/docker/overlay2/x rw - ext4 /dev/vdd rw\n";
        let m = select(t, &o);
        let got: Vec<(&str, &str, bool)> = m
            .iter()
            .map(|m| (m.mountpoint.as_str(), m.device.as_str(), m.readonly))
            .collect();
        assert_eq!(
            got,
            [
                ("/", "/dev/vda1", false),
                ("/data", "/dev/vdc", true),
                ("/run", "tmpfs", false)
            ]
        );
    }
}
