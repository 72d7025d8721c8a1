//! The network group's instances: the devices of one network namespace,
//! the one the writer starts in (the initial namespace for a daemon started
//! on the host, which is the one `perfabi_sources.ko` covers; `nsenter
//! --net=/run/netns/NS perfabi-bpfd` covers NS), each keyed by
//! (namespace inode, ifindex) in the BPF map `net_devs` (`net.bpf.h`) and
//! named by its device name, as the module names it.
//!
//! The namespace is fixed when [`Interfaces::here`] runs: it opens that
//! namespace's `/proc/thread-self/net/dev` (a `/proc/net` file keeps the
//! namespace of its opener) and a socket (which keeps its creator's), so a
//! scan lists that namespace's devices from whichever thread it runs on.
//! The devices' names come from the file, their ifindex from the socket
//! (`SIOCGIFINDEX`); a device renamed or gone between the two is found as
//! it is at the next scan.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;

use perfabi_families::table::Group;

use crate::error::Error;
use crate::groups::{Found, Source};

/// The device list of the calling thread's network namespace.
const NET_DEV: &str = "/proc/thread-self/net/dev";
/// The calling thread's network namespace (its inode number is the
/// kernel's `ns.inum`).
const NET_NS: &str = "/proc/thread-self/ns/net";

/// A device's key in `net_devs` (`struct net_key` of `net.bpf.h`): its
/// namespace's inode number (`ns.inum`), then its ifindex.
pub fn net_key(netns: u32, ifindex: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(8);
    k.extend_from_slice(&netns.to_ne_bytes());
    k.extend_from_slice(&ifindex.to_ne_bytes());
    k
}

/// The device names of a `/proc/net/dev` text: each line after the two
/// heading lines is `NAME: counts`, the name right-aligned (a device name
/// holds no `:` and no white space).
pub fn dev_names(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| b == b'\n').skip(2).filter_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        let name = line[..colon].trim_ascii();
        (!name.is_empty()).then_some(name)
    })
}

/// What a scan reads, opened in the namespace covered.
#[derive(Debug)]
struct Opened {
    dev: File,
    sock: OwnedFd,
    netns: u32,
}

impl Opened {
    fn here() -> Result<Self, (String, std::io::Error)> {
        let netns = std::fs::metadata(NET_NS)
            .map_err(|e| (format!("cannot read {NET_NS}"), e))?
            .ino();
        let netns = u32::try_from(netns).map_err(|_| {
            (
                format!("{NET_NS}: inode {netns} is no namespace's"),
                std::io::ErrorKind::InvalidData.into(),
            )
        })?;
        let dev = File::open(NET_DEV).map_err(|e| (format!("cannot open {NET_DEV}"), e))?;
        let sock = rustix::net::socket(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::DGRAM,
            None,
        )
        .map_err(|e| {
            (
                "cannot make a socket to look devices up".to_string(),
                e.into(),
            )
        })?;
        Ok(Self { dev, sock, netns })
    }
}

/// The devices of the network namespace [`Interfaces::here`] ran in.
#[derive(Debug)]
pub struct Interfaces {
    /// What a scan reads, or why it could not be opened (each scan says
    /// so: the writer does not start).
    opened: Result<Opened, (String, Option<i32>)>,
    text: Vec<u8>,
    unnamed: Vec<Vec<u8>>,
}

impl Interfaces {
    /// The devices of the calling thread's network namespace.
    pub fn here() -> Self {
        Self {
            opened: Opened::here().map_err(|(what, e)| (what, e.raw_os_error())),
            text: Vec::new(),
            unnamed: Vec::new(),
        }
    }

    /// The namespace's inode number (the first half of every key), if its
    /// files could be opened.
    pub fn netns(&self) -> Option<u32> {
        self.opened.as_ref().ok().map(|o| o.netns)
    }
}

impl Source for Interfaces {
    fn group(&self) -> Group {
        Group::Net
    }

    fn map_name(&self) -> &'static str {
        "net_devs"
    }

    fn scan(&mut self) -> Result<Vec<Found>, Error> {
        let o = self.opened.as_mut().map_err(|(what, errno)| {
            let e = errno.map_or(
                std::io::ErrorKind::Other.into(),
                std::io::Error::from_raw_os_error,
            );
            Error::Io(what.clone(), e)
        })?;
        self.text.clear();
        o.dev
            .seek(SeekFrom::Start(0))
            .and_then(|_| o.dev.read_to_end(&mut self.text))
            .map_err(|e| Error::Io(format!("cannot read {NET_DEV}"), e))?;
        let mut found: Vec<Found> = Vec::new();
        for name in dev_names(&self.text) {
            // SIOCGIFINDEX takes the name as text: a name that is not
            // UTF-8 cannot be looked up (said once per name).
            let Ok(text) = std::str::from_utf8(name) else {
                if !self.unnamed.iter().any(|n| n == name) {
                    eprintln!(
                        "perfabi-bpfd: network device \"{}\" not counted: its name is not UTF-8",
                        perfabi::text::escape(name)
                    );
                    self.unnamed.push(name.to_vec());
                }
                continue;
            };
            // Gone or renamed since the file was read: the next scan
            // finds it as it is then.
            let Ok(ifindex) = rustix::net::netdevice::name_to_index(&o.sock, text) else {
                continue;
            };
            let key = net_key(o.netns, ifindex);
            if found.iter().any(|f| f.key == key) {
                continue;
            }
            found.push(Found {
                key,
                instance: perfabi::name::instance_from(name),
            });
        }
        found.sort_by(|a, b| a.instance.cmp(&b.instance));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_from_the_lines_after_the_headings() {
        let text = b"Inter-|   Receive                            |  Transmit\n \
face |bytes    packets errs drop fifo frame compressed multicast|bytes\n    \
lo: 1234      10    0    0    0     0          0         0     1234\n\
veth-a:       0       0    0    0    0     0          0         0        0\n\
\n";
        let names: Vec<&[u8]> = dev_names(text).collect();
        assert_eq!(names, [&b"lo"[..], b"veth-a"]);
        assert_eq!(dev_names(b"").count(), 0);
        assert_eq!(dev_names(b"a\nb\n:\nno colon\n").count(), 0);
    }

    #[test]
    fn keys_are_the_namespace_then_the_ifindex() {
        let k = net_key(4026531840, 7);
        assert_eq!(&k[..4], &4026531840u32.to_ne_bytes());
        assert_eq!(&k[4..], &7u32.to_ne_bytes());
    }

    /// The namespace's loopback device is always there, keyed by its
    /// ifindex (1 in every namespace).
    #[test]
    fn a_scan_finds_loopback_with_its_ifindex() {
        let mut i = Interfaces::here();
        let found = i.scan().unwrap();
        let lo = found.iter().find(|f| f.instance == "lo").expect("lo");
        assert_eq!(lo.key, net_key(i.netns().unwrap(), 1));
        assert_eq!(i.group(), Group::Net);
    }
}
