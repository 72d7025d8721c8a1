//! The workload the programs run under, at full speed (run the bench at
//! nice 19 on a shared machine): two threads handing a token back and
//! forth (`sched_switch`, `sched_wakeup`), a thread moved from CPU to CPU
//! (`sched_migrate_task`), and direct I/O on a loop device of its own
//! (`block_rq_issue`, `block_rq_complete`: writes, reads, a flush every 32
//! writes), datagrams over loopback (`net_dev_xmit`, `netif_receive_skb`),
//! and a direct read a millisecond from a file of its own on the disk
//! under `/var/tmp` (the disk's interrupts: `irq_handler_entry`,
//! `irq_handler_exit`).

use std::fs::{File, OpenOptions};
use std::net::UdpSocket;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

use crate::{failed, Failure};

/// The loop device's size.
const DISK_BYTES: u64 = 64 << 20;

/// The I/O size, and its alignment for `O_DIRECT`.
const IO_BYTES: usize = 4096;

/// The file read from the disk under `/var/tmp`, and how often.
const IRQ_FILE_BYTES: u64 = 1 << 20;
const IRQ_READ_EVERY: Duration = Duration::from_millis(1);

/// How long the moved thread stays on a CPU.
const MIGRATE_EVERY: Duration = Duration::from_millis(1);

/// A loop device over a file in `/dev/shm`, detached and the file removed
/// when dropped.
pub struct LoopDisk {
    dev: PathBuf,
    _file: tempfile::NamedTempFile,
}

impl LoopDisk {
    /// `losetup -f --show` over a new 64 MiB file.
    pub fn new() -> Result<Self, Failure> {
        let file = tempfile::Builder::new()
            .prefix("perfabi-cost-disk.")
            .tempfile_in("/dev/shm")
            .map_err(|e| failed(format!("cannot make the loop device's file: {e}")))?;
        file.as_file()
            .set_len(DISK_BYTES)
            .map_err(|e| failed(format!("cannot size the loop device's file: {e}")))?;
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(file.path())
            .output()
            .map_err(|e| failed(format!("cannot run losetup (util-linux): {e}")))?;
        if !out.status.success() {
            return Err(failed(format!(
                "losetup -f --show failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        println!(
            "loop device {} over {}",
            dev.display(),
            file.path().display()
        );
        Ok(Self { dev, _file: file })
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

/// What the workload did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Work {
    /// Token round trips between the two threads.
    pub round_trips: u64,
    /// Moves of the moved thread.
    pub moves: u64,
    /// Direct I/Os on the loop device.
    pub ios: u64,
    /// Datagrams sent and received over loopback.
    pub datagrams: u64,
    /// Direct reads from the disk under `/var/tmp`.
    pub disk_reads: u64,
}

/// The workload's threads, running.
pub struct Workload {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    round_trips: Arc<AtomicU64>,
    moves: Arc<AtomicU64>,
    ios: Arc<AtomicU64>,
    datagrams: Arc<AtomicU64>,
    disk_reads: Arc<AtomicU64>,
    // Removed when the workload is dropped (after its threads stopped).
    _irq_file: tempfile::NamedTempFile,
}

/// One page for `O_DIRECT`, aligned as it requires.
#[repr(C, align(4096))]
struct Page([u8; IO_BYTES]);

impl Workload {
    /// Starts every part.
    pub fn start(disk: &LoopDisk) -> Result<Self, Failure> {
        let dev = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&disk.dev)
            .map_err(|e| failed(format!("cannot open {} O_DIRECT: {e}", disk.dev.display())))?;
        let (irq_file, irq_dev) = disk_file()?;
        let mut w = Self {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            round_trips: Arc::new(AtomicU64::new(0)),
            moves: Arc::new(AtomicU64::new(0)),
            ios: Arc::new(AtomicU64::new(0)),
            datagrams: Arc::new(AtomicU64::new(0)),
            disk_reads: Arc::new(AtomicU64::new(0)),
            _irq_file: irq_file,
        };
        let (s, n) = (Arc::clone(&w.stop), Arc::clone(&w.round_trips));
        w.threads
            .push(std::thread::spawn(move || ping_pong(&s, &n)));
        let (s, n) = (Arc::clone(&w.stop), Arc::clone(&w.moves));
        w.threads.push(std::thread::spawn(move || mover(&s, &n)));
        let (s, n) = (Arc::clone(&w.stop), Arc::clone(&w.ios));
        w.threads
            .push(std::thread::spawn(move || direct_io(&dev, &s, &n)));
        let (a, b) = loopback_pair()?;
        let (s, n) = (Arc::clone(&w.stop), Arc::clone(&w.datagrams));
        w.threads
            .push(std::thread::spawn(move || datagrams(&a, &b, &s, &n)));
        let (s, n) = (Arc::clone(&w.stop), Arc::clone(&w.disk_reads));
        w.threads
            .push(std::thread::spawn(move || disk_reads(&irq_dev, &s, &n)));
        Ok(w)
    }

    /// Stops every part and says what it did.
    pub fn stop(mut self) -> Work {
        self.halt();
        Work {
            round_trips: self.round_trips.load(Ordering::Relaxed),
            moves: self.moves.load(Ordering::Relaxed),
            ios: self.ios.load(Ordering::Relaxed),
            datagrams: self.datagrams.load(Ordering::Relaxed),
            disk_reads: self.disk_reads.load(Ordering::Relaxed),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
    }
}

impl Drop for Workload {
    /// Stopped on every way out, a failure's included: no thread left
    /// writing to a loop device being detached.
    fn drop(&mut self) {
        self.halt();
    }
}

/// Two threads handing a token back and forth until `stop`.
fn ping_pong(stop: &AtomicBool, n: &AtomicU64) {
    let (to_b, from_a) = mpsc::channel::<u64>();
    let (to_a, from_b) = mpsc::channel::<u64>();
    let b = std::thread::spawn(move || {
        while let Ok(v) = from_a.recv() {
            if to_a.send(v + 1).is_err() {
                break;
            }
        }
    });
    while !stop.load(Ordering::Relaxed) {
        if to_b.send(0).is_err() || from_b.recv().is_err() {
            break;
        }
        n.fetch_add(1, Ordering::Relaxed);
    }
    drop(to_b);
    let _ = b.join();
}

/// This thread moved to the next CPU it may run on every
/// [`MIGRATE_EVERY`] until `stop` (nothing moves with one CPU).
fn mover(stop: &AtomicBool, n: &AtomicU64) {
    let cpus: Vec<usize> = match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    };
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        if cpus.len() > 1 {
            i = (i + 1) % cpus.len();
            let mut set = CpuSet::new();
            set.set(cpus[i]);
            if sched_setaffinity(None, &set).is_ok() {
                n.fetch_add(1, Ordering::Relaxed);
            }
        }
        std::thread::sleep(MIGRATE_EVERY);
    }
}

/// Direct writes and reads of a page at a time over the disk, a flush
/// every 32 writes, until `stop`.
fn direct_io(dev: &File, stop: &AtomicBool, n: &AtomicU64) {
    let mut page = Box::new(Page([0x5a; IO_BYTES]));
    let pages = DISK_BYTES / IO_BYTES as u64;
    let mut k: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        // A stride that visits every page before repeating (odd, pages a
        // power of two).
        let at = (k.wrapping_mul(7919) % pages) * IO_BYTES as u64;
        let ok = if k.is_multiple_of(2) {
            dev.write_all_at(&page.0, at).is_ok()
        } else {
            dev.read_exact_at(&mut page.0, at).is_ok()
        };
        if !ok {
            // The device went away: nothing more to do.
            break;
        }
        if k.is_multiple_of(64) {
            let _ = dev.sync_data();
        }
        n.fetch_add(1, Ordering::Relaxed);
        k += 1;
    }
}

/// Two UDP sockets on 127.0.0.1, each connected to the other, with a
/// receive timeout (a lost datagram does not stop the loop for good).
fn loopback_pair() -> Result<(UdpSocket, UdpSocket), Failure> {
    let bind = || {
        UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| failed(format!("cannot bind a UDP socket on 127.0.0.1: {e}")))
    };
    let (a, b) = (bind()?, bind()?);
    let addr = |s: &UdpSocket| {
        s.local_addr()
            .map_err(|e| failed(format!("no UDP address: {e}")))
    };
    let (aa, ba) = (addr(&a)?, addr(&b)?);
    for (s, to) in [(&a, ba), (&b, aa)] {
        s.connect(to)
            .map_err(|e| failed(format!("cannot connect a UDP socket to {to}: {e}")))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| failed(format!("cannot set a UDP receive timeout: {e}")))?;
    }
    Ok((a, b))
}

/// A datagram from `a` to `b` and back, until `stop`.
fn datagrams(a: &UdpSocket, b: &UdpSocket, stop: &AtomicBool, n: &AtomicU64) {
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        if a.send(&buf).is_ok()
            && b.recv(&mut buf).is_ok()
            && b.send(&buf).is_ok()
            && a.recv(&mut buf).is_ok()
        {
            n.fetch_add(2, Ordering::Relaxed);
        }
    }
}

/// A file of [`IRQ_FILE_BYTES`] under `/var/tmp` (on a disk, where `/tmp`
/// may be a tmpfs), written and synced, and a descriptor of it opened
/// `O_DIRECT`, so that each read goes to the disk and its interrupt.
fn disk_file() -> Result<(tempfile::NamedTempFile, File), Failure> {
    let f = tempfile::Builder::new()
        .prefix("perfabi-cost-irq.")
        .tempfile_in("/var/tmp")
        .map_err(|e| failed(format!("cannot make a file in /var/tmp: {e}")))?;
    let page = Page([0xa5; IO_BYTES]);
    for k in 0..IRQ_FILE_BYTES / IO_BYTES as u64 {
        f.as_file()
            .write_all_at(&page.0, k * IO_BYTES as u64)
            .map_err(|e| failed(format!("cannot write {}: {e}", f.path().display())))?;
    }
    f.as_file()
        .sync_all()
        .map_err(|e| failed(format!("cannot sync {}: {e}", f.path().display())))?;
    let dev = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(f.path())
        .map_err(|e| failed(format!("cannot open {} O_DIRECT: {e}", f.path().display())))?;
    Ok((f, dev))
}

/// A direct read of a page of `file` every [`IRQ_READ_EVERY`] until
/// `stop`.
fn disk_reads(file: &File, stop: &AtomicBool, n: &AtomicU64) {
    let mut page = Box::new(Page([0; IO_BYTES]));
    let pages = IRQ_FILE_BYTES / IO_BYTES as u64;
    let mut k: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        if file
            .read_exact_at(&mut page.0, (k % pages) * IO_BYTES as u64)
            .is_err()
        {
            break;
        }
        n.fetch_add(1, Ordering::Relaxed);
        k += 1;
        std::thread::sleep(IRQ_READ_EVERY);
    }
}
