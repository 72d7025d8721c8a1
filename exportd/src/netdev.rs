//! The network source: `network.interface.*` from `/proc/net/dev`, one
//! instance per interface of the daemon's network namespace (run it under
//! `ip netns exec NS` to publish another namespace's). Interfaces appear
//! and go at the next refresh.

use perfabi_families::{table, Family};
use perfabi_shm::writer::Writer;

use crate::collectors::{Collector, Source};
use crate::filter::Filter;
use crate::follow::{Follow, Room};
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{self, NetDev, ProcFile};

/// The families (defined in [`perfabi_families::table`]), each with its
/// value.
#[allow(clippy::type_complexity)]
const FAMILIES: [(&Family, fn(&NetDev) -> u64); 4] = [
    (&table::NET_IN_PACKETS, |d| d.rx_packets),
    (&table::NET_IN_BYTES, |d| d.rx_bytes),
    (&table::NET_OUT_PACKETS, |d| d.tx_packets),
    (&table::NET_OUT_BYTES, |d| d.tx_bytes),
];

/// The `netdev` collector.
pub const COLLECTOR: Collector = Collector {
    name: "netdev",
    default: true,
    help: "network.interface.*, from /proc/net/dev (--collector.netdev.device-include/-exclude)",
    need: |ctx| need(&ctx.paths, &ctx.interfaces),
    start: |w, ctx| {
        Ok(Box::new(NetSource::new(
            w,
            &ctx.paths,
            ctx.interfaces.clone(),
        )?))
    },
};

/// The families and members [`NetSource::new`] registers here now, of the
/// interfaces `filter` lets pass.
pub fn need(paths: &Paths, filter: &Filter) -> std::io::Result<Need> {
    let mut f = ProcFile::new(paths.proc("net/dev"));
    let n = procfs::net_dev(&f.read()?)
        .filter(|d| filter.allows(d.name))
        .count();
    Ok(Need {
        families: FAMILIES.len(),
        members: FAMILIES.len() * n,
    })
}

/// The network source.
pub struct NetSource {
    file: ProcFile,
    filter: Filter,
    follow: Follow,
}

impl NetSource {
    /// Registers the families in `w`; the interfaces `filter` lets pass
    /// come at the first refresh.
    pub fn new(w: &Writer, paths: &Paths, filter: Filter) -> Result<Self, SourceError> {
        let mut file = ProcFile::new(paths.proc("net/dev"));
        file.read().map_err(SourceError::Io)?;
        let families = FAMILIES
            .iter()
            .map(|&(family, _)| w.add_family(&family.spec()))
            .collect::<Result<_, _>>()
            .map_err(SourceError::Abi)?;
        Ok(Self {
            file,
            filter,
            follow: Follow::new("interface", families),
        })
    }
}

impl Source for NetSource {
    /// Reads `/proc/net/dev` once, follows the interfaces and publishes
    /// their counts, all on CPU 0.
    fn refresh(&mut self, w: &Writer, room: &mut Room) -> std::io::Result<()> {
        let text = self.file.read()?;
        self.follow.begin();
        for d in procfs::net_dev(&text).filter(|d| self.filter.allows(d.name)) {
            let counts = FAMILIES.map(|f| (f.1)(&d));
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
