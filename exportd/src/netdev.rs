//! The network source: `network.interface.*` from `/proc/net/dev`, one
//! instance per interface of the daemon's network namespace (run it under
//! `ip netns exec NS` to publish another namespace's). Interfaces appear
//! and go at the next refresh.

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::Writer;

use crate::follow::{Follow, Room};
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{self, NetDev, ProcFile};

/// The families, in the README's order: name, help, unit, value.
#[allow(clippy::type_complexity)]
const FAMILIES: [(&str, &str, Unit, fn(&NetDev) -> u64); 4] = [
    (
        "network.interface.in.packets",
        "Packets received, from /proc/net/dev",
        Unit::COUNT,
        |d| d.rx_packets,
    ),
    (
        "network.interface.in.bytes",
        "Bytes received, from /proc/net/dev",
        Unit::BYTES,
        |d| d.rx_bytes,
    ),
    (
        "network.interface.out.packets",
        "Packets sent, from /proc/net/dev",
        Unit::COUNT,
        |d| d.tx_packets,
    ),
    (
        "network.interface.out.bytes",
        "Bytes sent, from /proc/net/dev",
        Unit::BYTES,
        |d| d.tx_bytes,
    ),
];

/// The families and members [`NetSource::new`] registers here now.
pub fn need(paths: &Paths) -> std::io::Result<Need> {
    let mut f = ProcFile::new(paths.proc("net/dev"));
    let n = procfs::net_dev(&f.read()?).count();
    Ok(Need {
        families: FAMILIES.len(),
        members: FAMILIES.len() * n,
    })
}

/// The network source.
pub struct NetSource {
    file: ProcFile,
    follow: Follow,
}

impl NetSource {
    /// Registers the families in `w`; the interfaces come at the first
    /// [`refresh`](Self::refresh).
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let mut file = ProcFile::new(paths.proc("net/dev"));
        file.read().map_err(SourceError::Io)?;
        let families = FAMILIES
            .iter()
            .map(|&(name, help, unit, _)| {
                w.add_family(&FamilySpec::new(
                    name,
                    help,
                    "interface",
                    Kind::Counter,
                    unit,
                ))
            })
            .collect::<Result<_, _>>()
            .map_err(SourceError::Abi)?;
        Ok(Self {
            file,
            follow: Follow::new("interface", families),
        })
    }

    /// Reads `/proc/net/dev` once, follows the interfaces and publishes
    /// their counts, all on CPU 0.
    pub fn refresh(&mut self, w: &Writer, room: &mut Room) -> std::io::Result<()> {
        let text = self.file.read()?;
        self.follow.begin();
        for d in procfs::net_dev(&text) {
            let counts = FAMILIES.map(|f| (f.3)(&d));
            let Some(members) = self.follow.see(w, room, d.name, &counts) else {
                continue;
            };
            for (m, &v) in members.iter().zip(&counts) {
                let _ = w.publish_member_per_cpu(m, &[v]);
            }
        }
        self.follow.end(w, room);
        Ok(())
    }
}
