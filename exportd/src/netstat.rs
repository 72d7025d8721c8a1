//! The `netstat` collector: TCP, UDP, ICMP and IP counters of the
//! daemon's network namespace from `/proc/net/snmp` and
//! `/proc/net/netstat`, the ones node_exporter's `netstat` collector
//! exports by default, named as PCP's Linux agent names them
//! (`network.tcp.activeopens`; `TcpExt` fields are `network.tcp.*` too,
//! without their `TCP` prefix). Machine-wide values on CPU 0.
//!
//! Both files are pairs of lines, a header naming the fields and a line
//! of values, each starting with the section (`Tcp:`); fields are found
//! by their header's name, never by position, so a kernel that adds or
//! reorders columns shifts nothing. A field this kernel lacks is not
//! published (one log line at start); a value that is not a number, or a
//! line of values shorter than its header, leaves the fields it lacks as
//! they were.

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{MemberId, Writer};

use crate::collectors::{Collector, Source};
use crate::follow::Room;
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{ProcFile, MAX_LINES};

/// The `netstat` collector.
pub const COLLECTOR: Collector = Collector {
    name: "netstat",
    default: true,
    help: "network.{tcp,udp,icmp,ip}.*, from /proc/net/snmp and /proc/net/netstat",
    need: |ctx| {
        let n = present(&ctx.paths)?.len();
        Ok(Need {
            families: n,
            members: n,
        })
    },
    start: |w, ctx| Ok(Box::new(NetstatSource::new(w, &ctx.paths)?)),
};

/// One published field: family, file, section, field, kind, unit.
pub struct Field {
    /// The family.
    pub family: &'static str,
    /// `snmp` or `netstat` (under `/proc/net`).
    pub file: &'static str,
    /// The section (`Tcp`).
    pub section: &'static str,
    /// The field's name in the section's header.
    pub name: &'static str,
    /// A counter, or a gauge (`CurrEstab`).
    pub kind: Kind,
    /// Its unit.
    pub unit: Unit,
}

const fn field(
    family: &'static str,
    file: &'static str,
    section: &'static str,
    name: &'static str,
) -> Field {
    Field {
        family,
        file,
        section,
        name,
        kind: Kind::Counter,
        unit: Unit::COUNT,
    }
}

/// The published fields, in the README's order.
pub const FIELDS: [Field; 28] = [
    field("network.tcp.activeopens", "snmp", "Tcp", "ActiveOpens"),
    field("network.tcp.passiveopens", "snmp", "Tcp", "PassiveOpens"),
    Field {
        kind: Kind::Gauge,
        ..field("network.tcp.currestab", "snmp", "Tcp", "CurrEstab")
    },
    field("network.tcp.insegs", "snmp", "Tcp", "InSegs"),
    field("network.tcp.outsegs", "snmp", "Tcp", "OutSegs"),
    field("network.tcp.outrsts", "snmp", "Tcp", "OutRsts"),
    field("network.tcp.retranssegs", "snmp", "Tcp", "RetransSegs"),
    field("network.tcp.inerrs", "snmp", "Tcp", "InErrs"),
    field(
        "network.tcp.listenoverflows",
        "netstat",
        "TcpExt",
        "ListenOverflows",
    ),
    field(
        "network.tcp.listendrops",
        "netstat",
        "TcpExt",
        "ListenDrops",
    ),
    field(
        "network.tcp.syncookiessent",
        "netstat",
        "TcpExt",
        "SyncookiesSent",
    ),
    field(
        "network.tcp.syncookiesrecv",
        "netstat",
        "TcpExt",
        "SyncookiesRecv",
    ),
    field(
        "network.tcp.syncookiesfailed",
        "netstat",
        "TcpExt",
        "SyncookiesFailed",
    ),
    field(
        "network.tcp.synretrans",
        "netstat",
        "TcpExt",
        "TCPSynRetrans",
    ),
    field("network.tcp.timeouts", "netstat", "TcpExt", "TCPTimeouts"),
    field("network.tcp.ofoqueue", "netstat", "TcpExt", "TCPOFOQueue"),
    field("network.tcp.rcvqdrop", "netstat", "TcpExt", "TCPRcvQDrop"),
    field("network.udp.indatagrams", "snmp", "Udp", "InDatagrams"),
    field("network.udp.outdatagrams", "snmp", "Udp", "OutDatagrams"),
    field("network.udp.inerrors", "snmp", "Udp", "InErrors"),
    field("network.udp.noports", "snmp", "Udp", "NoPorts"),
    field("network.udp.rcvbuferrors", "snmp", "Udp", "RcvbufErrors"),
    field("network.udp.sndbuferrors", "snmp", "Udp", "SndbufErrors"),
    field("network.icmp.inmsgs", "snmp", "Icmp", "InMsgs"),
    field("network.icmp.outmsgs", "snmp", "Icmp", "OutMsgs"),
    field("network.icmp.inerrors", "snmp", "Icmp", "InErrors"),
    Field {
        unit: Unit::BYTES,
        ..field("network.ip.inoctets", "netstat", "IpExt", "InOctets")
    },
    Field {
        unit: Unit::BYTES,
        ..field("network.ip.outoctets", "netstat", "IpExt", "OutOctets")
    },
];

/// Whether a line's text after its section is values: its first token
/// a number.
fn numeric(v: &str) -> bool {
    v.split_ascii_whitespace()
        .next()
        .is_some_and(|t| t.parse::<i64>().is_ok() || t.parse::<u64>().is_ok())
}

/// The fields of a `/proc/net/snmp` or `/proc/net/netstat` text: section,
/// name and value, by the header's names. A header whose next line is not
/// values of its section (its first token a number) is skipped (that line
/// may start the next pair); values
/// that are not unsigned numbers (`MaxConn -1`) and names past the end of
/// a short line of values are left out.
pub fn fields(text: &str) -> impl Iterator<Item = (&str, &str, u64)> {
    let mut lines = text.lines().take(MAX_LINES).peekable();
    std::iter::from_fn(move || loop {
        let header = lines.next()?;
        let Some((section, names)) = header.split_once(':') else {
            continue;
        };
        let Some(values) = lines
            .peek()
            .and_then(|l| l.split_once(':'))
            .filter(|(s, v)| *s == section && numeric(v))
            .map(|(_, v)| v)
        else {
            continue;
        };
        lines.next();
        let pairs = names
            .split_ascii_whitespace()
            .zip(values.split_ascii_whitespace())
            .filter_map(move |(n, v)| Some((section, n, v.parse::<u64>().ok()?)));
        return Some(pairs);
    })
    .flatten()
}

/// The [`FIELDS`] this host has: each with its index.
fn present(paths: &Paths) -> std::io::Result<Vec<usize>> {
    let mut out = Vec::new();
    for file in ["snmp", "netstat"] {
        let mut f = ProcFile::new(paths.proc(&format!("net/{file}")));
        let text = f.read()?;
        for (i, x) in FIELDS.iter().enumerate().filter(|(_, x)| x.file == file) {
            if fields(&text).any(|(s, n, _)| s == x.section && n == x.name) {
                out.push(i);
            }
        }
    }
    Ok(out)
}

/// The `netstat` collector's source.
pub struct NetstatSource {
    files: [ProcFile; 2],
    /// Per published field: its index in [`FIELDS`] and its member.
    members: Vec<(usize, MemberId)>,
}

impl NetstatSource {
    /// Registers a family of one instance per field this host has in `w`.
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let present = present(paths).map_err(SourceError::Io)?;
        for x in FIELDS
            .iter()
            .enumerate()
            .filter(|(i, _)| !present.contains(i))
        {
            eprintln!(
                "perfabi-exportd: /proc/net/{} has no {} {}: {} not published",
                x.1.file, x.1.section, x.1.name, x.1.family
            );
        }
        let members = present
            .into_iter()
            .map(|i| {
                let x = &FIELDS[i];
                let help = format!("{} {}, from /proc/net/{}", x.section, x.name, x.file);
                let f = w.add_family(&FamilySpec::new(x.family, &help, "", x.kind, x.unit))?;
                Ok((i, w.add_external_member(f, "", &[])?))
            })
            .collect::<Result<_, perfabi::Error>>()
            .map_err(SourceError::Abi)?;
        Ok(Self {
            files: [
                ProcFile::new(paths.proc("net/snmp")),
                ProcFile::new(paths.proc("net/netstat")),
            ],
            members,
        })
    }
}

impl Source for NetstatSource {
    /// Reads both files once and publishes the fields found.
    fn refresh(&mut self, w: &Writer, _: &mut Room) -> std::io::Result<()> {
        let mut result = Ok(());
        for (file, name) in self.files.iter_mut().zip(["snmp", "netstat"]) {
            let text = match file.read() {
                Ok(t) => t,
                Err(e) => {
                    result = result.and(Err(e));
                    continue;
                }
            };
            for (section, field, v) in fields(&text) {
                let found = self.members.iter().find(|(i, _)| {
                    let x = &FIELDS[*i];
                    x.file == name && x.section == section && x.name == field
                });
                if let Some((_, m)) = found {
                    let _ = w.publish_member_per_cpu(m, &[v]);
                }
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_by_name_not_position() {
        let t = "Tcp: RtoAlgorithm MaxConn ActiveOpens CurrEstab\nTcp: 1 -1 30 4\n\
                 Udp: New InDatagrams\nUdp: 9 70\n";
        let got: Vec<_> = fields(t).collect();
        assert_eq!(
            got,
            [
                ("Tcp", "RtoAlgorithm", 1),
                ("Tcp", "ActiveOpens", 30),
                ("Tcp", "CurrEstab", 4),
                ("Udp", "New", 9),
                ("Udp", "InDatagrams", 70)
            ]
        );
    }

    #[test]
    fn broken_pairs_junk_and_short_lines() {
        // A header without its values, a line of values of another
        // section, junk, a short line of values, a value that is no number.
        let t = "Ip: A B\nTcp: ActiveOpens PassiveOpens InSegs\nTcp: 5 x\n\
                 garbage\nUdp: InDatagrams\nIcmp: 3\nIcmp: InMsgs\nIcmp: 7 8 9\n";
        let got: Vec<_> = fields(t).collect();
        assert_eq!(got, [("Tcp", "ActiveOpens", 5), ("Icmp", "InMsgs", 7)]);
        assert_eq!(fields("").count(), 0);
        assert_eq!(fields("Tcp:\nTcp:\n").count(), 0);
    }

    #[test]
    fn family_names_are_valid_and_distinct() {
        for (i, x) in FIELDS.iter().enumerate() {
            let spec = FamilySpec::new(x.family, "h", "", x.kind, x.unit);
            assert!(spec.entry(1).is_ok(), "{}", x.family);
            assert!(FIELDS[..i].iter().all(|y| y.family != x.family));
        }
    }
}
