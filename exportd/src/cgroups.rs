//! The `cgroups` collector: CPU, memory and I/O of each cgroup of the
//! cgroup v2 hierarchy, one instance per `cgroup` (its path below the
//! root, `/` for the root, `/system.slice/ssh.service`), on CPU 0:
//!
//! | family | kind | unit | file, key |
//! |---|---|---|---|
//! | `cgroup.cpu.usage`, `.user`, `.system` | counter | µs | `cpu.stat` `usage_usec`, `user_usec`, `system_usec` |
//! | `cgroup.cpu.throttled`, `.throttled_time` | counter | count, µs | `cpu.stat` `nr_throttled`, `throttled_usec` (with the cpu controller) |
//! | `cgroup.memory.current` | gauge | bytes | `memory.current` |
//! | `cgroup.memory.anon`, `.file` | gauge | bytes | `memory.stat` `anon`, `file` |
//! | `cgroup.memory.oom`, `.oom_kill` | counter | count | `memory.events` `oom`, `oom_kill` |
//! | `cgroup.io.read_bytes`, `.write_bytes`, `.reads`, `.writes` | counter | bytes, count | `io.stat` `rbytes`, `wbytes`, `rios`, `wios`, per device: instance `CGROUP::DEVICE` (dimension `cgroup_device`, the device named as `/sys/dev/block/MAJ:MIN` names it) |
//! | `cgroup.dropped` | gauge | count | cgroups not published: past `--collector.cgroups.max` |
//!
//! A cgroup has the members of the files and keys it has (a cgroup
//! without the memory controller has no `cgroup.memory.*`), never zeros
//! for what it lacks. The hierarchy is walked at every refresh, breadth
//! first in name order, down to `--collector.cgroups.depth` below the
//! root; the first `--collector.cgroups.max` are published and the rest
//! counted in `cgroup.dropped` (at most [`MAX_WALK`] directories are
//! visited). Cgroups come and go with the walk; one removed and made again
//! under its name (a new directory) is a new registration. A path longer
//! than an instance string holds (63 bytes, 61 with `::` and a device) is
//! skipped with one log line and counted in `exportd.skipped_instances`.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{MemberId, Writer};

use crate::collectors::{CgroupOptions, Collector, Source};
use crate::follow::{Follow, Room};
use crate::mountinfo;
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{ProcFile, MAX_LINES};

/// The `cgroups` collector.
pub const COLLECTOR: Collector = Collector {
    name: "cgroups",
    default: false,
    help: "cgroup.{cpu,memory,io}.* per cgroup v2 cgroup (--collector.cgroups.*); off by default: it reads 5 files per cgroup per refresh",
    need: |ctx| {
        let root = root(&ctx.paths, &ctx.cgroups)?;
        let walk = walk(&root, &ctx.cgroups);
        let io: usize = walk
            .found
            .iter()
            .map(|c| {
                let mut buf = String::new();
                read_into(&c.dir.join("io.stat"), &mut buf)
                    .map_or(0, |()| buf.lines().count())
            })
            .sum();
        Ok(Need {
            families: GROUPS.iter().map(|g| g.len()).sum::<usize>() + 1,
            members: walk.found.len() * 10 + io * 4 + 1,
        })
    },
    start: |w, ctx| Ok(Box::new(CgroupSource::new(w, &ctx.paths, &ctx.cgroups)?)),
};

/// The most directories one walk visits, published or counted.
pub const MAX_WALK: usize = 65_536;

/// The most bytes read of one cgroup file.
const MAX_FILE: u64 = 1 << 20;

/// The families, by the file group they come from, each: name, help,
/// kind, unit. The order of [`Group`].
const GROUPS: [&[(&str, &str, Kind, Unit)]; 6] = [
    &[
        (
            "cgroup.cpu.usage",
            "CPU time used, from cpu.stat usage_usec",
            Kind::Counter,
            Unit::US,
        ),
        (
            "cgroup.cpu.user",
            "CPU time in user mode, from cpu.stat user_usec",
            Kind::Counter,
            Unit::US,
        ),
        (
            "cgroup.cpu.system",
            "CPU time in kernel mode, from cpu.stat system_usec",
            Kind::Counter,
            Unit::US,
        ),
    ],
    &[
        (
            "cgroup.cpu.throttled",
            "Periods throttled, from cpu.stat nr_throttled",
            Kind::Counter,
            Unit::COUNT,
        ),
        (
            "cgroup.cpu.throttled_time",
            "Time throttled, from cpu.stat throttled_usec",
            Kind::Counter,
            Unit::US,
        ),
    ],
    &[(
        "cgroup.memory.current",
        "Memory in use, from memory.current",
        Kind::Gauge,
        Unit::BYTES,
    )],
    &[
        (
            "cgroup.memory.anon",
            "Anonymous memory, from memory.stat anon",
            Kind::Gauge,
            Unit::BYTES,
        ),
        (
            "cgroup.memory.file",
            "File-backed memory, from memory.stat file",
            Kind::Gauge,
            Unit::BYTES,
        ),
    ],
    &[
        (
            "cgroup.memory.oom",
            "Times the memory limit was hit, from memory.events oom",
            Kind::Counter,
            Unit::COUNT,
        ),
        (
            "cgroup.memory.oom_kill",
            "Processes killed by the OOM killer, from memory.events oom_kill",
            Kind::Counter,
            Unit::COUNT,
        ),
    ],
    &[
        (
            "cgroup.io.read_bytes",
            "Bytes read, from io.stat rbytes",
            Kind::Counter,
            Unit::BYTES,
        ),
        (
            "cgroup.io.write_bytes",
            "Bytes written, from io.stat wbytes",
            Kind::Counter,
            Unit::BYTES,
        ),
        (
            "cgroup.io.reads",
            "Read operations, from io.stat rios",
            Kind::Counter,
            Unit::COUNT,
        ),
        (
            "cgroup.io.writes",
            "Write operations, from io.stat wios",
            Kind::Counter,
            Unit::COUNT,
        ),
    ],
];

/// `key value` lines (`cpu.stat`, `memory.stat`, `memory.events`): the
/// values of `keys` in order; a key missing or not a number is `None`.
pub fn flat_keyed<const N: usize>(text: &str, keys: [&str; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    for line in text.lines().take(MAX_LINES) {
        let mut f = line.split_ascii_whitespace();
        let (Some(k), Some(v), None) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if let Some(i) = keys.iter().position(|x| *x == k) {
            out[i] = v.parse().ok();
        }
    }
    out
}

/// The lines of `io.stat` (`8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0
/// dios=0`): the device's `MAJ:MIN` and the values of `keys`, by name; a
/// line without a device, or without every key as a number, is skipped.
pub fn io_stat<'a, const N: usize>(
    text: &'a str,
    keys: [&'a str; N],
) -> impl Iterator<Item = (&'a str, [u64; N])> + 'a {
    text.lines().take(MAX_LINES).filter_map(move |line| {
        let mut f = line.split_ascii_whitespace();
        let dev = f.next().filter(|d| {
            d.split_once(':').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
            })
        })?;
        let mut out = [None; N];
        for kv in f {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            if let Some(i) = keys.iter().position(|x| *x == k) {
                out[i] = v.parse::<u64>().ok();
            }
        }
        let mut values = [0; N];
        for (v, o) in values.iter_mut().zip(out) {
            *v = o?;
        }
        Some((dev, values))
    })
}

/// The hierarchy's root: the option, else the first `cgroup2` mount.
fn root(paths: &Paths, o: &CgroupOptions) -> std::io::Result<PathBuf> {
    if let Some(r) = &o.root {
        return Ok(r.clone());
    }
    let text = ProcFile::new(paths.proc("self/mountinfo"))
        .read()?
        .into_owned();
    let found = mountinfo::mounts(&text)
        .find(|m| m.fstype == "cgroup2")
        .map(|m| PathBuf::from(m.mountpoint));
    found.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no cgroup2 mount in /proc/self/mountinfo",
        )
    })
}

/// One cgroup found by a walk.
struct Found {
    /// Its instance string (`/`, `/a/b`).
    name: String,
    dir: PathBuf,
    /// Its directory's inode: another one is another cgroup.
    ino: u64,
}

struct Walk {
    found: Vec<Found>,
    /// Cgroups past the bound.
    dropped: u64,
}

/// The cgroups under `root` (see the module's doc).
fn walk(root: &Path, o: &CgroupOptions) -> Walk {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    let mut dropped = 0u64;
    let Ok(meta) = std::fs::metadata(root) else {
        return Walk { found, dropped };
    };
    let mut queue =
        std::collections::VecDeque::from([(String::from("/"), root.to_path_buf(), meta.ino(), 0)]);
    let mut visited = 0usize;
    while let Some((name, dir, ino, depth)) = queue.pop_front() {
        visited += 1;
        if found.len() < o.max {
            found.push(Found {
                name: name.clone(),
                dir: dir.clone(),
                ino,
            });
        } else {
            dropped += 1;
        }
        if depth >= o.depth || visited + queue.len() >= MAX_WALK {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        // A name that is not UTF-8 keeps its bytes in the path it is read
        // from; its instance string (lossy) then fails the instance rule
        // and it is skipped and counted.
        let mut subs: Vec<(String, PathBuf, u64)> = entries
            .take(MAX_WALK)
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| {
                (
                    // An instance name, checked by the instance rule and
                    // escaped by every reader that shows it.
                    // not raw: an instance name, not a message
                    e.file_name().to_string_lossy().into_owned(),
                    e.path(),
                    e.ino(),
                )
            })
            .collect();
        subs.sort();
        for (sub, path, ino) in subs {
            if visited + queue.len() >= MAX_WALK {
                break;
            }
            let child = if name == "/" {
                format!("/{sub}")
            } else {
                format!("{name}/{sub}")
            };
            queue.push_back((child, path, ino, depth + 1));
        }
    }
    Walk { found, dropped }
}

/// Reads at most [`MAX_FILE`] bytes of `path` into `buf`: a regular file
/// only, opened without following a link or blocking (a `--collector.
/// cgroups.root` that is not cgroupfs may hold a FIFO named `cpu.stat`).
fn read_into(path: &Path, buf: &mut String) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    buf.clear();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    f.take(MAX_FILE).read_to_string(buf).map(drop)
}

/// The `cgroups` collector's source.
pub struct CgroupSource {
    root: PathBuf,
    options: CgroupOptions,
    sys: PathBuf,
    /// One per group of [`GROUPS`].
    follows: Vec<Follow>,
    dropped: MemberId,
    /// Each live cgroup's inode.
    inodes: HashMap<String, u64>,
    /// Block device names by `MAJ:MIN`.
    devices: HashMap<String, String>,
    buf: String,
    instance: String,
}

impl CgroupSource {
    /// Registers the families in `w`; the cgroups come at the first
    /// refresh.
    pub fn new(w: &Writer, paths: &Paths, options: &CgroupOptions) -> Result<Self, SourceError> {
        let root = root(paths, options).map_err(SourceError::Io)?;
        std::fs::read_dir(&root).map_err(|e| SourceError::Read(root.clone(), e))?;
        let add = || -> Result<(Vec<Follow>, MemberId), perfabi::Error> {
            let mut follows = Vec::new();
            for (g, fams) in GROUPS.iter().enumerate() {
                let dim = if g == Group::Io as usize {
                    "cgroup_device"
                } else {
                    "cgroup"
                };
                let ids = fams
                    .iter()
                    .map(|(n, h, k, u)| w.add_family(&FamilySpec::new(n, h, dim, *k, *u)))
                    .collect::<Result<_, _>>()?;
                follows.push(Follow::new(
                    if g == Group::Io as usize {
                        "cgroup device"
                    } else {
                        "cgroup"
                    },
                    ids,
                ));
            }
            let d = w.add_family(&FamilySpec::new(
                "cgroup.dropped",
                "Cgroups not published: past --collector.cgroups.max",
                "",
                Kind::Gauge,
                Unit::COUNT,
            ))?;
            Ok((follows, w.add_external_member(d, "", &[])?))
        };
        let (follows, dropped) = add().map_err(SourceError::Abi)?;
        Ok(Self {
            root,
            options: options.clone(),
            sys: paths.sys.clone(),
            follows,
            dropped,
            inodes: HashMap::new(),
            devices: HashMap::new(),
            buf: String::new(),
            instance: String::new(),
        })
    }

    /// The name of block device `majmin`, as `/sys/dev/block` links it.
    fn device(&mut self, majmin: &str) -> String {
        if let Some(n) = self.devices.get(majmin) {
            return n.clone();
        }
        let name = std::fs::read_link(self.sys.join("dev/block").join(majmin))
            .ok()
            // A device name for an instance, checked by the instance rule
            // and escaped by every reader that shows it.
            // not raw: an instance name, not a message
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| majmin.to_string());
        if self.devices.len() < MAX_WALK {
            self.devices.insert(majmin.to_string(), name.clone());
        }
        name
    }

    /// Publishes `values` in group `g`'s members of `instance` (`counts`:
    /// what tells a new cgroup under the name, see [`Follow::see`]).
    fn publish(
        &mut self,
        w: &Writer,
        room: &mut Room,
        g: Group,
        instance: &str,
        counts: &[u64],
        values: &[u64],
    ) {
        if let Some(members) = self.follows[g as usize].see(w, room, instance, counts) {
            for (m, &v) in members.iter().zip(values) {
                let _ = w.publish_member_per_cpu(m, &[v]);
            }
        }
    }
}

/// The groups of [`GROUPS`], by index.
#[derive(Clone, Copy)]
enum Group {
    Cpu,
    Throttle,
    Current,
    Stat,
    Events,
    Io,
}

impl Source for CgroupSource {
    /// Walks the hierarchy and reads each cgroup's files once.
    fn refresh(&mut self, w: &Writer, room: &mut Room) -> std::io::Result<()> {
        let walk = walk(&self.root, &self.options);
        if walk.found.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{}: no cgroup hierarchy",
                    perfabi_shm::safe_open::escape_path(&self.root)
                ),
            ));
        }
        for f in &mut self.follows {
            f.begin();
        }
        for c in &walk.found {
            // Made again under its name: every member goes, and comes back
            // as a new registration.
            if self.inodes.get(&c.name).is_some_and(|&i| i != c.ino) {
                for f in &mut self.follows {
                    f.forget(w, room, &c.name);
                }
                let prefix = format!("{}::", c.name);
                let io: Vec<String> = self.follows[Group::Io as usize]
                    .instances()
                    .filter(|i| i.starts_with(&prefix))
                    .map(str::to_string)
                    .collect();
                for i in io {
                    self.follows[Group::Io as usize].forget(w, room, &i);
                }
            }
            self.inodes.insert(c.name.clone(), c.ino);
            let mut buf = std::mem::take(&mut self.buf);
            if read_into(&c.dir.join("cpu.stat"), &mut buf).is_ok() {
                let [u, us, sy, nt, tt] = flat_keyed(
                    &buf,
                    [
                        "usage_usec",
                        "user_usec",
                        "system_usec",
                        "nr_throttled",
                        "throttled_usec",
                    ],
                );
                if let (Some(u), Some(us), Some(sy)) = (u, us, sy) {
                    self.publish(w, room, Group::Cpu, &c.name, &[u, us, sy], &[u, us, sy]);
                }
                if let (Some(nt), Some(tt)) = (nt, tt) {
                    self.publish(w, room, Group::Throttle, &c.name, &[nt, tt], &[nt, tt]);
                }
            }
            if read_into(&c.dir.join("memory.current"), &mut buf).is_ok() {
                if let Ok(v) = buf.trim().parse::<u64>() {
                    self.publish(w, room, Group::Current, &c.name, &[], &[v]);
                }
            }
            if read_into(&c.dir.join("memory.stat"), &mut buf).is_ok() {
                if let [Some(a), Some(f)] = flat_keyed(&buf, ["anon", "file"]) {
                    self.publish(w, room, Group::Stat, &c.name, &[], &[a, f]);
                }
            }
            if read_into(&c.dir.join("memory.events"), &mut buf).is_ok() {
                if let [Some(o), Some(k)] = flat_keyed(&buf, ["oom", "oom_kill"]) {
                    self.publish(w, room, Group::Events, &c.name, &[o, k], &[o, k]);
                }
            }
            if read_into(&c.dir.join("io.stat"), &mut buf).is_ok() {
                for (dev, v) in io_stat(&buf, ["rbytes", "wbytes", "rios", "wios"]) {
                    let name = self.device(dev);
                    let mut instance = std::mem::take(&mut self.instance);
                    instance.clear();
                    instance.push_str(&c.name);
                    instance.push_str("::");
                    instance.push_str(&name);
                    self.publish(w, room, Group::Io, &instance, &v, &v);
                    self.instance = instance;
                }
            }
            self.buf = buf;
        }
        for f in &mut self.follows {
            f.end(w, room);
        }
        let live: std::collections::HashSet<&str> =
            walk.found.iter().map(|c| c.name.as_str()).collect();
        self.inodes.retain(|k, _| live.contains(k.as_str()));
        let _ = w.publish_member_per_cpu(&self.dropped, &[walk.dropped]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_keyed_files() {
        let t = "usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 0\nnr_throttled x\n\
                 junk\nthrottled_usec 5 extra\n";
        assert_eq!(
            flat_keyed(
                t,
                [
                    "usage_usec",
                    "user_usec",
                    "system_usec",
                    "nr_throttled",
                    "throttled_usec"
                ]
            ),
            [Some(100), Some(60), Some(40), None, None]
        );
        assert_eq!(flat_keyed("", ["a"]), [None]);
    }

    #[test]
    fn io_stat_by_key_not_position() {
        let t = "8:0 wbytes=2 rbytes=1 rios=3 wios=4 dbytes=0 dios=0 newkey=9\n\
                 8:16 rbytes=5 wbytes=6 rios=7\n\
                 x:y rbytes=1 wbytes=1 rios=1 wios=1\n\
                 253:0 rbytes=10 wbytes=20 rios=30 wios=40\n\
                 garbage\n";
        let got: Vec<_> = io_stat(t, ["rbytes", "wbytes", "rios", "wios"]).collect();
        assert_eq!(got, [("8:0", [1, 2, 3, 4]), ("253:0", [10, 20, 30, 40])]);
    }
}
