//! Every collector of the exporter ([`ALL`], the registry the
//! `--collector.NAME` flags come from) together: what the selected ones
//! need of the segment at start, their registration, and one refresh of
//! all of them, each timed and its success published
//! (`exportd.collector.refresh_us` and `exportd.collector.success`, one
//! instance per collector).
//!
//! | family | kind | unit | dimension | module | source |
//! |---|---|---|---|---|---|
//! | `kernel.cpu.time` | counter | µs | `mode` (`user`, `nice`, `system`, …) | [`host`] | `/proc/stat` `cpuN` lines |
//! | `kernel.all.pswitch` | counter | count | none | [`host`] | `/proc/stat` `ctxt` |
//! | `kernel.softirqs` | counter | count | `kind` (`timer`, `net_rx`, …, lower case) | [`host`] | `/proc/softirqs`, per CPU |
//! | `mem.vmstat.<name>` | counter (gauge for `nr_*`) | count (pages for `nr_*`) | none | [`host`] | `/proc/vmstat` |
//! | `disk.dev.{read,write,discard,flush}` | counter | count | `device` (whole disks with a medium) | [`disks`] | `/proc/diskstats` |
//! | `disk.dev.{read,write,discard}_bytes` | counter | bytes | `device` | [`disks`] | `/proc/diskstats` sectors × 512 |
//! | `network.interface.{in,out}.{packets,bytes}` | counter | count, bytes | `interface` | [`netdev`] | `/proc/net/dev` |
//! | `kernel.interrupts.count` | counter | count | `irq` (`N:actions`) | [`interrupts`] | `/proc/interrupts` numbered rows, per CPU |
//! | `kernel.interrupts.other` | counter | count | `kind` (`NMI`, `LOC`, …) | [`interrupts`] | `/proc/interrupts` named rows, per CPU |
//! | `kernel.all.pressure.<res>.<some,full>.total` | counter | µs | none | [`pressure`] | `/proc/pressure/<res>` |
//! | `mem.physmem`, `mem.util.*` | gauge | KiB | none | [`meminfo`] | `/proc/meminfo` |
//! | `filesys.*` | gauge | bytes, count | `mountpoint` (labels `device`, `fstype`) | [`filesystem`] | `/proc/self/mountinfo`, `statvfs` |
//! | `kernel.all.load`, `kernel.all.runnable`, `kernel.all.nprocs` | gauge | count | `interval` for the load | [`loadavg`] | `/proc/loadavg` |
//! | `network.{tcp,udp,icmp,ip}.*` | counter (gauge for `currestab`) | count, bytes | none | [`netstat`] | `/proc/net/snmp`, `/proc/net/netstat` |
//! | `cgroup.{cpu,memory}.*`, `cgroup.io.*` | counter, gauge | µs, bytes, count | `cgroup`, `cgroup_device` | [`cgroups`] | cgroup v2 `cpu.stat`, `memory.*`, `io.stat` |
//!
//! The families it shares with the kernel sources (disks, network,
//! `kernel.interrupts.count`, `kernel.all.pswitch`) are
//! [`perfabi_families::table`]'s; the README's table
//! (`## Families out of the box`, parsed by [`perfabi_families::readme`])
//! is the contract for the rest, and the exporter's tests check every
//! family it publishes against it. Machine-wide values are on CPU 0; per-CPU files
//! by their header's CPU numbers. Disks, interfaces and IRQs are followed
//! ([`crate::follow`]).
//!
//! [`host`]: crate::host
//! [`disks`]: crate::disks
//! [`netdev`]: crate::netdev
//! [`interrupts`]: crate::interrupts
//! [`pressure`]: crate::pressure
//! [`meminfo`]: crate::meminfo
//! [`filesystem`]: crate::filesystem
//! [`loadavg`]: crate::loadavg
//! [`netstat`]: crate::netstat
//! [`cgroups`]: crate::cgroups

use std::time::Instant;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{MemberId, Writer};

use crate::collectors::{Collector, Context, Selection, Source};
use crate::follow::Room;
use crate::{
    cgroups, disks, filesystem, host, interrupts, loadavg, meminfo, netdev, netstat, pressure,
};

pub use crate::proc_source::{Need, Paths, SourceError};

/// Every collector, in the order they are registered and refreshed (and
/// listed in `--help`).
pub const ALL: [Collector; 12] = [
    host::CPU,
    host::SOFTIRQS,
    host::VMSTAT,
    disks::COLLECTOR,
    netdev::COLLECTOR,
    interrupts::COLLECTOR,
    pressure::COLLECTOR,
    meminfo::COLLECTOR,
    filesystem::COLLECTOR,
    loadavg::COLLECTOR,
    netstat::COLLECTOR,
    cgroups::COLLECTOR,
];

/// The collector of `name`.
pub fn collector(name: &str) -> Option<&'static Collector> {
    ALL.iter().find(|c| c.name == name)
}

/// The families and members of the collectors' own figures.
const OWN: Need = Need {
    families: 2,
    members: 0,
};

/// What the collectors of `selection` register on this host now: the
/// families, and the members of the devices live now. Devices that
/// appear later need headroom on top (the daemon's `--max-members`). A
/// collector whose file cannot be read needs nothing: it will be left out.
pub fn need(ctx: &Context, selection: &Selection) -> Need {
    let mut n = OWN;
    for c in ALL.iter().filter(|c| selection.runs(c.name)) {
        n = n + (c.need)(ctx).unwrap_or_default();
        // Its own two figures.
        n.members += 2;
    }
    n
}

/// One running collector: its source, its own figures, its last error.
struct Running {
    name: &'static str,
    source: Box<dyn Source>,
    refresh_us: MemberId,
    success: MemberId,
    /// The last error, logged when it changes.
    error: Option<String>,
}

/// Every selected collector, registered in one segment.
pub struct Sources {
    running: Vec<Running>,
    room: Room,
}

impl Sources {
    /// Registers every collector of `selection` in `w` and publishes a
    /// first refresh. A collector that cannot read its file at start is
    /// left out, with one log line: a machine without, say,
    /// `/proc/diskstats` still gets the rest.
    pub fn new(w: &Writer, ctx: &Context, selection: &Selection) -> Result<Self, SourceError> {
        let abi = SourceError::Abi;
        let mut started = Vec::new();
        for c in ALL.iter().filter(|c| selection.runs(c.name)) {
            match (c.start)(w, ctx) {
                Ok(source) => started.push((c.name, source)),
                Err(SourceError::Io(e)) => {
                    eprintln!("perfabi-exportd: {e}: the {} collector is left out", c.name);
                }
                Err(e) => return Err(e),
            }
        }
        // The collectors' own figures after their families, so that a
        // reader listing the segment meets the host's statistics first.
        let duration = w
            .add_family(&FamilySpec::new(
                "exportd.collector.refresh_us",
                "How long the collector's last refresh took",
                "collector",
                Kind::Gauge,
                Unit::US,
            ))
            .map_err(abi)?;
        let ok = w
            .add_family(&FamilySpec::new(
                "exportd.collector.success",
                "1 if the collector's last refresh succeeded, else 0",
                "collector",
                Kind::Gauge,
                Unit::COUNT,
            ))
            .map_err(abi)?;
        let mut running = Vec::new();
        for (name, source) in started {
            running.push(Running {
                name,
                source,
                refresh_us: w.add_external_member(duration, name, &[]).map_err(abi)?,
                success: w.add_external_member(ok, name, &[]).map_err(abi)?,
                error: None,
            });
        }
        let mut s = Self {
            running,
            room: Room::new(w).map_err(abi)?,
        };
        s.refresh(w);
        Ok(s)
    }

    /// The collectors running, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.running.iter().map(|r| r.name)
    }

    /// Refreshes every collector once; one that fails keeps its last
    /// values, and its error is logged once until it changes.
    pub fn refresh(&mut self, w: &Writer) {
        for r in &mut self.running {
            let t = Instant::now();
            let result = r.source.refresh(w, &mut self.room);
            let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
            let _ = w.publish_member_per_cpu(&r.refresh_us, &[us]);
            let _ = w.publish_member_per_cpu(&r.success, &[u64::from(result.is_ok())]);
            match result {
                Ok(()) => r.error = None,
                Err(e) => {
                    let line = e.to_string();
                    if r.error.as_deref() != Some(line.as_str()) {
                        eprintln!("perfabi-exportd: {}: {line}", r.name);
                    }
                    r.error = Some(line);
                }
            }
        }
    }
}
