//! Every `/proc` source of the exporter together: what they need of the
//! segment at start, their registration, and one refresh of all of them.
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

use perfabi_shm::writer::Writer;

use crate::disks::DiskSource;
use crate::follow::Room;
use crate::host::HostSource;
use crate::interrupts::InterruptSource;
use crate::meminfo::MemSource;
use crate::netdev::NetSource;
use crate::pressure::PressureSource;
use crate::{disks, host, interrupts, meminfo, netdev, pressure};

pub use crate::proc_source::{Need, Paths, SourceError};

/// What every source registers on this host now: the families, and the
/// members of the devices live now. Devices that appear later need
/// headroom on top (the daemon's `--max-members`). A source whose file
/// cannot be read needs nothing: it will be left out.
pub fn need(paths: &Paths, vmstat: &[String]) -> Result<Need, SourceError> {
    Ok(host::need(paths, vmstat)?
        + disks::need(paths).unwrap_or_default()
        + netdev::need(paths).unwrap_or_default()
        + interrupts::need(paths).unwrap_or_default()
        + pressure::need(paths)
        + meminfo::need(paths).unwrap_or_default())
}

/// A source that cannot read its file at start is left out, with one log
/// line naming its families: a machine without, say, `/proc/diskstats`
/// still gets the rest.
fn optional<T>(r: Result<T, SourceError>, families: &str) -> Result<Option<T>, SourceError> {
    match r {
        Ok(s) => Ok(Some(s)),
        Err(SourceError::Io(e)) => {
            eprintln!("perfabi-exportd: {e}: {families} not published");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The number of sources [`Sources::refresh`] runs.
const SOURCES: usize = 6;

/// Every source, registered in one segment.
pub struct Sources {
    host: HostSource,
    disks: Option<DiskSource>,
    net: Option<NetSource>,
    interrupts: Option<InterruptSource>,
    pressure: PressureSource,
    mem: Option<MemSource>,
    room: Room,
    /// Each source's last error, logged when it changes.
    errors: [Option<String>; SOURCES],
}

impl Sources {
    /// Registers every source's families in `w` and publishes a first
    /// refresh.
    pub fn new(w: &Writer, paths: &Paths, vmstat: &[String]) -> Result<Self, SourceError> {
        let mut s = Self {
            host: HostSource::new(w, paths, vmstat)?,
            disks: optional(DiskSource::new(w, paths), "disk.dev.*")?,
            net: optional(NetSource::new(w, paths), "network.interface.*")?,
            interrupts: optional(InterruptSource::new(w, paths), "kernel.interrupts.*")?,
            pressure: PressureSource::new(w, paths)?,
            mem: optional(MemSource::new(w, paths), "mem.physmem and mem.util.*")?,
            room: Room::new(w).map_err(SourceError::Abi)?,
            errors: Default::default(),
        };
        s.refresh(w);
        Ok(s)
    }

    /// Reads every file once and publishes every value; a source that
    /// fails keeps its last values, and its error is logged once until it
    /// changes.
    pub fn refresh(&mut self, w: &Writer) {
        let room = &mut self.room;
        let results = [
            self.host.refresh(w),
            self.disks.as_mut().map_or(Ok(()), |s| s.refresh(w, room)),
            self.net.as_mut().map_or(Ok(()), |s| s.refresh(w, room)),
            self.interrupts
                .as_mut()
                .map_or(Ok(()), |s| s.refresh(w, room)),
            self.pressure.refresh(w),
            self.mem.as_mut().map_or(Ok(()), |s| s.refresh(w)),
        ];
        for (r, last) in results.into_iter().zip(&mut self.errors) {
            match r {
                Ok(()) => *last = None,
                Err(e) => {
                    let line = e.to_string();
                    if last.as_deref() != Some(line.as_str()) {
                        eprintln!("perfabi-exportd: {line}");
                    }
                    *last = Some(line);
                }
            }
        }
    }
}
