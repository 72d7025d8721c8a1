//! `devices`: a kernel writer's totals (the kernel sources module's, or the
//! eBPF writer's) against the guest's own
//! `/proc`, after a controlled workload on the guest's virtio devices, and
//! what reading them costs through perfabi against reading and parsing
//! `/proc`.
//!
//! The guest (see `kmod/test/run`) has a virtio disk (`vda`) and two
//! virtio network devices on one qemu hub, so what one sends the other
//! receives and nothing leaves the guest. The workload: a known number of
//! `O_DIRECT` reads and writes of the disk (some `O_DSYNC`: a write and a
//! cache flush each), and a known number of raw
//! Ethernet frames (a local experimental ethertype) sent from one device to
//! the other. Before and after it, the module's values and `/proc`'s are
//! read back to back, `/proc` once the devices are quiet (the network
//! drivers count a sent frame when the device has taken it); the deltas must
//! be equal where both count the same events:
//!
//! * `disk.dev.{read,write}{,_bytes}` and `disk.dev.flush` of `vda` =
//!   `/proc/diskstats`: both count a request once, when it completes (the
//!   tracepoint `block_rq_complete` and the accounting of
//!   `blk_account_io_done`), a write of a flush sequence once;
//! * `network.interface.{out,in}.{packets,bytes}` of the sender and the
//!   receiver = `/proc/net/dev`: the frames are not merged (no GRO for an
//!   unknown ethertype), so one `net_dev_xmit` / `netif_receive_skb` is one
//!   driver-counted packet;
//! * `kernel.interrupts.count` per IRQ line = `/proc/interrupts` within a
//!   tolerance: `/proc/interrupts` counts every interrupt the flow handler
//!   accounts, including ones no handler runs for (spurious, or arriving
//!   while the line is disabled), and the two are read a moment apart while
//!   interrupts keep coming; each line's deltas may differ by at most
//!   2 + 1% (README, "Families out of the box").

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use perfabi::Reading;
use perfabi_exportd::procfs;
use perfabi_reader::Segment;

use crate::{open, open_path, verdict};

/// Direct reads and writes the workload does, and their sizes.
const READS: u64 = 64;
const READ_SIZE: u64 = 4096;
const WRITES: u64 = 32;
const WRITE_SIZE: u64 = 8192;
/// Writes with `O_DSYNC` too: each one a write and a cache flush (qemu's
/// virtio disk has a write-back cache and no FUA), the write completing
/// twice in the block layer's flush sequence and counted once.
const DSYNC_WRITES: u64 = 8;
/// Frames sent, and their length (Ethernet header included).
const FRAMES: u64 = 200;
const FRAME_LEN: usize = 100;
/// The local experimental ethertype of IEEE 802 (nobody handles it).
const ETHERTYPE: u16 = 0x88b5;

/// The network device with MAC address `mac`.
fn interface(mac: &str) -> Result<String, String> {
    for e in fs::read_dir("/sys/class/net").map_err(|e| e.to_string())? {
        let e = e.map_err(|e| e.to_string())?;
        let addr = fs::read_to_string(e.path().join("address")).unwrap_or_default();
        if addr.trim() == mac {
            return Ok(e.file_name().to_string_lossy().into_owned());
        }
    }
    Err(format!("no network device has address {mac}"))
}

fn mac_bytes(mac: &str) -> [u8; 6] {
    let mut b = [0u8; 6];
    for (o, h) in b.iter_mut().zip(mac.split(':')) {
        *o = u8::from_str_radix(h, 16).unwrap_or(0);
    }
    b
}

/// Sends `FRAMES` raw frames from `from` (address `src`) to `dst`.
fn send_frames(from: &str, src: &str, dst: &str) -> Result<(), String> {
    let name = std::ffi::CString::new(from).map_err(|e| e.to_string())?;
    // SAFETY: if_nametoindex reads the NUL-terminated name only.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(format!("{from}: {}", std::io::Error::last_os_error()));
    }
    let mut frame = [0u8; FRAME_LEN];
    frame[..6].copy_from_slice(&mac_bytes(dst));
    frame[6..12].copy_from_slice(&mac_bytes(src));
    frame[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    frame[14..].fill(0x5a);
    // SAFETY: plain system calls on a socket this function owns and closes;
    // the address and the frame are live locals of the sizes passed.
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
        if fd < 0 {
            return Err(format!(
                "AF_PACKET socket: {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut addr: libc::sockaddr_ll = std::mem::zeroed();
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ETHERTYPE.to_be();
        addr.sll_ifindex = ifindex as i32;
        addr.sll_halen = 6;
        addr.sll_addr[..6].copy_from_slice(&mac_bytes(dst));
        let mut res = Ok(());
        for _ in 0..FRAMES {
            let n = libc::sendto(
                fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            if n != frame.len() as isize {
                res = Err(format!("sendto: {}", std::io::Error::last_os_error()));
                break;
            }
        }
        libc::close(fd);
        res
    }
}

/// `O_DIRECT` reads and writes of the disk `/dev/NAME`, one request each.
fn disk_io(name: &str) -> Result<(), String> {
    let path = format!("/dev/{name}");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .map_err(|e| format!("{path}: {e}"))?;
    let mut buf = Box::new(AlignedBuf([0; WRITE_SIZE as usize]));
    for i in 0..READS {
        f.read_exact_at(&mut buf.0[..READ_SIZE as usize], i * 2 * READ_SIZE)
            .map_err(|e| format!("read {path}: {e}"))?;
    }
    buf.0.fill(0xa5);
    for i in 0..WRITES {
        f.write_all_at(&buf.0, (1 << 20) + i * 2 * WRITE_SIZE)
            .map_err(|e| format!("write {path}: {e}"))?;
    }
    let sync = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(&path)
        .map_err(|e| format!("{path}: {e}"))?;
    for i in 0..DSYNC_WRITES {
        sync.write_all_at(&buf.0, (2 << 20) + i * 2 * WRITE_SIZE)
            .map_err(|e| format!("O_DSYNC write {path}: {e}"))?;
    }
    Ok(())
}

/// A buffer aligned for `O_DIRECT` (a page), as large as a write.
#[repr(C, align(4096))]
struct AlignedBuf([u8; WRITE_SIZE as usize]);

/// The counter families compared exactly, and the one compared within the
/// interrupt tolerance.
const EXACT: [&str; 9] = [
    "disk.dev.read",
    "disk.dev.write",
    "disk.dev.flush",
    "disk.dev.read_bytes",
    "disk.dev.write_bytes",
    "network.interface.out.packets",
    "network.interface.out.bytes",
    "network.interface.in.packets",
    "network.interface.in.bytes",
];
const INTERRUPTS: &str = "kernel.interrupts.count";

/// Every instance's total of each family, from one segment.
type Totals = BTreeMap<(&'static str, String), u64>;

/// Every instance's total of the compared families, from one snapshot (one
/// generation) of `seg`.
fn read_totals(seg: &mut Segment) -> Result<Totals, String> {
    let snap = seg.snapshot().map_err(|e| e.to_string())?;
    let mut out = Totals::new();
    for name in EXACT.iter().chain([&INTERRUPTS]) {
        let f = snap
            .family(name)
            .ok_or_else(|| format!("the segment has no family {name}"))?;
        for m in &f.members {
            let v = match snap.reading(f, m) {
                Reading::Unsigned(v) => v,
                _ => 0,
            };
            out.insert((name, m.instance.clone()), v);
        }
    }
    Ok(out)
}

/// Reads both segments until neither has changed for `quiet` (the devices
/// are idle and the exporter has published `/proc` as it now is), at most
/// 10 s; interrupt lines keep counting, so they are left out of the test.
fn settled(
    kmod: &mut Segment,
    exp: &mut Segment,
    quiet: Duration,
) -> Result<(Totals, Totals), String> {
    let exact = |t: &Totals| -> Totals {
        t.iter()
            .filter(|((f, _), _)| *f != INTERRUPTS)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    let t0 = Instant::now();
    let mut last = (read_totals(kmod)?, read_totals(exp)?);
    let mut since = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        let now = (read_totals(kmod)?, read_totals(exp)?);
        if exact(&now.0) != exact(&last.0) || exact(&now.1) != exact(&last.1) {
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return Ok(now);
        }
        last = now;
    }
    Err("the devices never went quiet for long enough in 10 s".into())
}

fn delta(after: &Totals, before: &Totals, key: &(&'static str, String)) -> Option<u64> {
    Some(
        after
            .get(key)?
            .wrapping_sub(before.get(key).copied().unwrap_or(0)),
    )
}

/// The whole check on the kernel writer's `segment`, reported as `name`:
/// see the top. `exported` is the segment of a
/// `perfabi-exportd` running in the guest (its values are `/proc`'s, read
/// every 0.1 s), `disk` the virtio disk, `tx_mac`/`rx_mac` the addresses
/// of the sending and the receiving network device.
pub fn devices(
    segment: &str,
    name: &str,
    exported: &str,
    disk: &str,
    tx_mac: &str,
    rx_mac: &str,
) -> bool {
    let run = || -> Result<Vec<String>, String> {
        let (tx, rx) = (interface(tx_mac)?, interface(rx_mac)?);
        let mut kmod = open_path(segment);
        let mut exp = open_path(exported);
        let quiet = Duration::from_millis(400);
        let (k0, e0) = settled(&mut kmod, &mut exp, quiet)?;
        disk_io(disk)?;
        send_frames(&tx, tx_mac, rx_mac)?;
        let (k1, e1) = settled(&mut kmod, &mut exp, quiet)?;
        let mut fails = Vec::new();
        let mut lines = Vec::new();
        // At least: flushes of concurrent writes may be merged into one.
        let expect: [(&'static str, &str, u64); 9] = [
            ("disk.dev.read", disk, READS),
            ("disk.dev.write", disk, WRITES + DSYNC_WRITES),
            ("disk.dev.flush", disk, 1),
            ("disk.dev.read_bytes", disk, READS * READ_SIZE),
            (
                "disk.dev.write_bytes",
                disk,
                (WRITES + DSYNC_WRITES) * WRITE_SIZE,
            ),
            ("network.interface.out.packets", &tx, FRAMES),
            (
                "network.interface.out.bytes",
                &tx,
                FRAMES * FRAME_LEN as u64,
            ),
            ("network.interface.in.packets", &rx, FRAMES),
            ("network.interface.in.bytes", &rx, FRAMES * FRAME_LEN as u64),
        ];
        for (f, inst, workload) in expect {
            let key = (f, inst.to_string());
            let (Some(k), Some(e)) = (delta(&k1, &k0, &key), delta(&e1, &e0, &key)) else {
                fails.push(format!("{f} [{inst}] missing from a segment"));
                continue;
            };
            lines.push(format!(
                "{f} [{inst}] kernel writer {k} /proc {e} (workload at least {workload})"
            ));
            if k != e || k < workload {
                fails.push(format!(
                    "{f} [{inst}]: kernel writer {k}, /proc {e}, workload {workload}"
                ));
            }
        }
        // Interrupt lines, within the tolerance of the top.
        let mut lines_compared = 0;
        for key in k1.keys().filter(|(f, _)| *f == INTERRUPTS) {
            let (Some(k), Some(e)) = (delta(&k1, &k0, key), delta(&e1, &e0, key)) else {
                continue;
            };
            if k == 0 && e == 0 {
                continue;
            }
            lines_compared += 1;
            let allowed = 2 + k.max(e) / 100;
            lines.push(format!(
                "{INTERRUPTS} [{}] kernel writer {k} /proc {e} (allowed difference {allowed})",
                key.1
            ));
            if k.abs_diff(e) > allowed {
                fails.push(format!(
                    "{INTERRUPTS} [{}]: kernel writer {k}, /proc {e}",
                    key.1
                ));
            }
        }
        if lines_compared == 0 {
            fails.push("no interrupt line counted anything during the workload".into());
        }
        if fails.is_empty() {
            Ok(lines)
        } else {
            Err(format!(
                "{}; compared: {}",
                fails.join("; "),
                lines.join("; ")
            ))
        }
    };
    match run() {
        Ok(lines) => {
            for l in &lines {
                println!("PERFABI-DEVICES {l}");
            }
            verdict(name, true, &format!("{} values compared", lines.len()))
        }
        Err(e) => verdict(name, false, &e),
    }
}

/// Mean time of `f` over `n` calls, in ns (after one warm-up call).
fn mean_ns(n: u32, mut f: impl FnMut() -> u64) -> (f64, u64) {
    let mut sink = f();
    let t = Instant::now();
    for _ in 0..n {
        sink = sink.wrapping_add(f());
    }
    (t.elapsed().as_nanos() as f64 / f64::from(n), sink)
}

/// Reads every per-CPU value of `families` through perfabi (one
/// [`FamilyHandle`](perfabi_reader::FamilyHandle) each, read again and
/// again) and returns their sum (so nothing is optimised away). Each
/// family must be there with an instance, and read once before.
fn perfabi_read<'a>(
    seg: &'a mut Segment,
    families: &[&str],
) -> Result<impl FnMut() -> u64 + 'a, String> {
    let mut handles = families
        .iter()
        .map(|f| seg.family_handle(f).map_err(|e| format!("{f}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut values = perfabi_reader::FamilyValues::default();
    for (h, f) in handles.iter_mut().zip(families) {
        seg.read_family(h, &mut values)
            .map_err(|e| format!("{f}: {e}"))?;
        if values.is_empty() {
            return Err(format!("{f} has no instance"));
        }
    }
    Ok(move || {
        let mut sum = 0u64;
        for h in &mut handles {
            if seg.read_family(h, &mut values).is_ok() {
                for m in 0..values.len() {
                    for cpu in 0..values.nr_cpus() {
                        sum = sum.wrapping_add(values.words(m, cpu)[0]);
                    }
                }
            }
        }
        sum
    })
}

/// `read-cost`: what a reader pays for every interrupt counter of every
/// CPU, and for every disk counter, through perfabi against reading and
/// parsing `/proc/interrupts` and `/proc/diskstats` (the exporter's own
/// parsers), side by side in one run. Prints `PERFABI-MEASURE`; passes if
/// every family is there and reads.
pub fn read_cost() -> bool {
    let run = || -> Result<String, String> {
        let mut seg = open();
        let n = 2000;
        let (irq_abi, _) = mean_ns(n, perfabi_read(&mut seg, &[INTERRUPTS])?);
        let mut cpus = Vec::new();
        let (irq_proc, _) = mean_ns(n, || {
            let text = fs::read_to_string("/proc/interrupts").unwrap_or_default();
            procfs::cpu_rows(&text, &mut cpus)
                .filter(|r| r.irq().is_some())
                .flat_map(|r| r.counts())
                .fold(0u64, u64::wrapping_add)
        });
        let disk_families = [
            "disk.dev.read",
            "disk.dev.write",
            "disk.dev.discard",
            "disk.dev.flush",
            "disk.dev.read_bytes",
            "disk.dev.write_bytes",
            "disk.dev.discard_bytes",
        ];
        let (disk_abi, _) = mean_ns(n, perfabi_read(&mut seg, &disk_families)?);
        let (disk_proc, _) = mean_ns(n, || {
            let text = fs::read_to_string("/proc/diskstats").unwrap_or_default();
            procfs::diskstats(&text)
                .map(|d| d.reads.wrapping_add(d.writes).wrapping_add(d.read_sectors))
                .fold(0u64, u64::wrapping_add)
        });
        let irqs = seg
            .family(INTERRUPTS)
            .map_err(|e| e.to_string())?
            .members
            .len();
        let disks = seg
            .family("disk.dev.read")
            .map_err(|e| e.to_string())?
            .members
            .len();
        println!(
            "PERFABI-MEASURE read_interrupts_ns={irq_abi:.0} proc_interrupts_ns={irq_proc:.0} ratio={:.1} ({irqs} IRQ lines x {} CPUs: perfabi family read vs read + parse /proc/interrupts, mean of {n})",
            irq_proc / irq_abi,
            seg.nr_cpus()
        );
        println!(
            "PERFABI-MEASURE read_disks_ns={disk_abi:.0} proc_diskstats_ns={disk_proc:.0} ratio={:.1} ({disks} disks x 7 counters: perfabi family reads vs read + parse /proc/diskstats, mean of {n})",
            disk_proc / disk_abi
        );
        Ok(format!("{irqs} IRQ lines, {disks} disks"))
    };
    match run() {
        Ok(l) => verdict("sources-read-cost", true, &l),
        Err(e) => verdict("sources-read-cost", false, &e),
    }
}
