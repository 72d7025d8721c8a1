//! Parsers of the `/proc` text the exporter publishes, one file each, and
//! [`ProcFile`], which reads a file again and again into one buffer.
//!
//! Every parser takes the text as it is and never panics: a truncated line,
//! a number too large for `u64`, a missing column or a line of junk is
//! skipped (or ends the row, for per-CPU tables), never guessed. The
//! row-by-row parsers are iterators borrowing from the text, so a refresh
//! allocates nothing for them, and each reads at most [`MAX_LINES`] lines:
//! a hostile or broken file of a million rows costs no more than that.
//! They are public so that other tools (the kernel module's guest checks)
//! compute `/proc` deltas exactly as the exporter does.
//!
//! | file | parser | what |
//! |---|---|---|
//! | `/proc/stat` | [`stat_times`], [`stat_cpus`], [`stat_ctxt`] | per-CPU times in ticks; context switches |
//! | `/proc/softirqs`, `/proc/interrupts` | [`cpu_rows`] (and [`softirqs`]) | per-CPU counts by row, columns by the header's CPU numbers |
//! | `/proc/vmstat` | [`vmstat`], [`vmstat_values`] | name and value |
//! | `/proc/meminfo` | [`meminfo`] | name and value (kB) |
//! | `/proc/diskstats` | [`diskstats`] | per device: reads, writes, discards, flushes and their sectors |
//! | `/proc/partitions` | [`partitions`] | the devices with a size, and the size |
//! | `/proc/net/dev` | [`net_dev`] | per interface: received and sent bytes and packets |
//! | `/proc/pressure/*` | [`pressure`] | `some` and `full` totals (µs) |

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use perfabi_shm::safe_open::escape_path;

/// The most lines a parser reads of one file; the rest is ignored. Far
/// more than any real file has (one line per device, IRQ, CPU or value).
pub const MAX_LINES: usize = 65_536;

/// The most CPU columns read from a per-CPU table's header (the kernel's
/// largest `NR_CPUS`).
pub const MAX_CPU_COLUMNS: usize = 8192;

/// The most bytes [`ProcFile`] reads of a file: a partial last line past
/// it is dropped. `/proc/interrupts` of a machine with thousands of CPUs
/// is a few MiB.
pub const MAX_FILE_BYTES: usize = 64 << 20;

/// One file read again at every refresh into the same buffer, so that
/// after the first reads a refresh allocates nothing for it. The file
/// stays open between reads and is read with `pread` from offset 0 (a
/// `/proc` file is generated again when read from its start), with no
/// seek: the text and one read that finds its end. If reading it fails,
/// it is opened again once.
#[derive(Debug)]
pub struct ProcFile {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Zeroed beyond `len` when grown; never shrinks.
    buf: Vec<u8>,
    /// The bytes of the last read.
    len: usize,
}

impl ProcFile {
    /// The file at `path`, not opened yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            file: None,
            buf: Vec::new(),
            len: 0,
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file from its start into the buffer: at most
    /// [`MAX_FILE_BYTES`] + 1 bytes. A `/proc` file longer than a page
    /// comes in several reads (a seq_file gives one page at a time), so a
    /// short read is not its end: only a read of 0 bytes is.
    fn fill(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.len = 0;
        let f = match self.file.take() {
            Some(f) => f,
            None => std::fs::File::open(&self.path)?,
        };
        let limit = MAX_FILE_BYTES + 1;
        while self.len < limit {
            if self.len == self.buf.len() {
                // Room for more than any read so far (once: then the
                // buffer fits the file and the read of its end).
                let grown = (2 * self.buf.len()).clamp(4096, limit);
                self.buf.resize(grown, 0);
            }
            match f.read_at(&mut self.buf[self.len..], self.len as u64) {
                Ok(0) => break,
                Ok(n) => self.len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.file = Some(f);
        Ok(())
    }

    /// Reads the whole file (at most [`MAX_FILE_BYTES`], cut after its
    /// last whole line) and returns its text; bytes that are not UTF-8
    /// become U+FFFD (then that text is a copy). An error's message names
    /// the file.
    pub fn read(&mut self) -> std::io::Result<Cow<'_, str>> {
        let reopened = self.file.is_none();
        if let Err(e) = self.fill() {
            // A file kept open may have gone stale (replaced, or a device
            // gone): open it again, once.
            if reopened || self.fill().is_err() {
                self.file = None;
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", escape_path(&self.path)),
                ));
            }
        }
        if self.len > MAX_FILE_BYTES {
            self.len = self.buf[..MAX_FILE_BYTES]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
        }
        let bytes = &self.buf[..self.len];
        // std's from_utf8 checks long ASCII runs many bytes at a time; the
        // lossy conversion goes byte by byte (ten times slower here).
        Ok(match std::str::from_utf8(bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(bytes),
        })
    }
}

/// At most [`MAX_LINES`] lines of `text`.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().take(MAX_LINES)
}

/// The per-CPU time fields of `/proc/stat`, in its order.
pub const CPU_FIELDS: [&str; 10] = [
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
];

/// The per-CPU lines of `/proc/stat` (`cpuN …`, not the aggregate `cpu`
/// line): CPU number and its times in clock ticks (`USER_HZ`), in the
/// order of [`CPU_FIELDS`]; fields the line lacks, or that are not
/// numbers, are 0. CPUs missing from the text (offline) are absent.
pub fn stat_cpus(text: &str) -> impl Iterator<Item = (usize, [u64; 10])> + '_ {
    lines(text).filter_map(|line| {
        let rest = line
            .strip_prefix("cpu")
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))?;
        let mut fields = rest.split_ascii_whitespace();
        let cpu = fields.next()?.parse::<usize>().ok()?;
        let mut v = [0u64; 10];
        for (slot, f) in v.iter_mut().zip(fields) {
            *slot = f.parse().unwrap_or(0);
        }
        Some((cpu, v))
    })
}

/// Per-CPU times of `/proc/stat`: `times[cpu][field]` in clock ticks, as
/// [`stat_cpus`] reads them.
pub fn stat_times(text: &str) -> BTreeMap<usize, [u64; 10]> {
    stat_cpus(text).collect()
}

/// The `ctxt` line of `/proc/stat`: context switches since boot.
pub fn stat_ctxt(text: &str) -> Option<u64> {
    lines(text).find_map(|l| l.strip_prefix("ctxt ")?.trim().parse().ok())
}

/// One row of a per-CPU table, `/proc/interrupts` or `/proc/softirqs`:
/// `label: count count … tail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuRow<'a> {
    /// Before the colon, trimmed: an IRQ number (`24`), a named row of
    /// `/proc/interrupts` (`NMI`, `LOC`, `ERR`) or a softirq (`NET_RX`).
    pub label: &'a str,
    /// How many count columns the row has: at most the header's CPU
    /// columns, fewer for rows such as `ERR` and `MIS` (one machine-wide
    /// count, in the first column).
    pub columns: usize,
    /// What follows the counts, trimmed: the chip, hardware IRQ, trigger
    /// and action names of a numbered row, the description of a named one.
    pub tail: &'a str,
    /// The counts' text.
    counts: &'a str,
}

impl<'a> CpuRow<'a> {
    /// The IRQ number of a numbered row (`24:`); `None` for a named row.
    pub fn irq(&self) -> Option<u32> {
        self.label.parse().ok()
    }

    /// The row's counts in column order: column `i` belongs to the CPU
    /// whose number is the header's `i`th (see [`cpu_rows`]).
    pub fn counts(&self) -> impl Iterator<Item = u64> + 'a {
        // Every token here parsed when the row was read.
        let (text, mut pos) = (self.counts.as_bytes(), 0);
        std::iter::from_fn(move || {
            let (stop, v) = token(text, pos)?;
            pos = stop;
            Some(v.unwrap_or(0))
        })
    }
}

/// The CPU numbers of a per-CPU table's header line (`CPU0 CPU1 CPU3`:
/// `[0, 1, 3]`, the order of the count columns; offline CPUs have no
/// column), into `out` (cleared first; at most [`MAX_CPU_COLUMNS`]).
pub fn cpu_columns(header: &str, out: &mut Vec<usize>) {
    out.clear();
    out.extend(
        header
            .split_ascii_whitespace()
            .map_while(|c| c.strip_prefix("CPU").and_then(|n| n.parse::<usize>().ok()))
            .take(MAX_CPU_COLUMNS),
    );
}

/// The rows of `/proc/interrupts` or `/proc/softirqs`: the header's CPU
/// numbers go into `cpus` (see [`cpu_columns`]) and the rows follow. A
/// row's counts are its leading numbers, at most one per CPU column;
/// the first token that is not a number (or is too large for `u64`)
/// starts its tail. A line without a label and a colon is skipped.
pub fn cpu_rows<'a>(text: &'a str, cpus: &mut Vec<usize>) -> impl Iterator<Item = CpuRow<'a>> {
    let mut it = lines(text);
    cpu_columns(it.next().unwrap_or(""), cpus);
    let columns = cpus.len();
    it.filter_map(move |line| cpu_row(line, columns, |_| {}))
}

/// [`cpu_rows`] with each row's counts read once, in the same pass that
/// finds where they end: `f` gets the row, the header's CPU numbers (the
/// columns' CPUs) and the counts in column order. The exporter reads
/// `/proc/interrupts` this way, hundreds of thousands of counts on a large
/// machine, where [`CpuRow::counts`] would read each a second time.
pub fn for_each_cpu_row<'a>(
    text: &'a str,
    cpus: &mut Vec<usize>,
    counts: &mut Vec<u64>,
    mut f: impl FnMut(CpuRow<'a>, &[usize], &[u64]),
) {
    let mut it = lines(text);
    cpu_columns(it.next().unwrap_or(""), cpus);
    for line in it {
        counts.clear();
        if let Some(row) = cpu_row(line, cpus.len(), |v| counts.push(v)) {
            f(row, cpus, counts);
        }
    }
}

/// The token of `text` at or after `pos` (runs of ASCII whitespace
/// separate tokens, as [`str::split_ascii_whitespace`] splits them): where
/// it ends, and its value if it is a `u64` as `str::parse` reads one (an
/// optional `+`, then decimal digits, no overflow); `None` past the last
/// token. A per-CPU table of a large machine has hundreds of thousands of
/// counts: the digits are summed without overflow checks (19 digits never
/// overflow a `u64`; only a longer number is checked).
fn token(text: &[u8], pos: usize) -> Option<(usize, Option<u64>)> {
    let n = text.len();
    let mut i = pos;
    while i < n && text[i].is_ascii_whitespace() {
        i += 1;
    }
    if i >= n {
        return None;
    }
    let digits = i + usize::from(text[i] == b'+');
    let mut end = digits;
    let mut value = 0u64;
    while end < n {
        let d = text[end].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        value = value.wrapping_mul(10).wrapping_add(u64::from(d));
        end += 1;
    }
    let number = end > digits && (end == n || text[end].is_ascii_whitespace());
    if !number {
        // Not a number: the token ends at the next whitespace.
        while end < n && !text[end].is_ascii_whitespace() {
            end += 1;
        }
        return Some((end, None));
    }
    if end - digits > 19 {
        // Maybe too large (or leading zeros): as std reads it.
        let t = std::str::from_utf8(&text[digits..end]).unwrap_or("x");
        return Some((end, t.parse().ok()));
    }
    Some((end, Some(value)))
}

/// One row of a per-CPU table, each count also given to `count`.
#[inline(always)]
fn cpu_row(line: &str, max_columns: usize, mut count: impl FnMut(u64)) -> Option<CpuRow<'_>> {
    let (label, rest) = line.split_once(':')?;
    let label = label.trim();
    if label.is_empty() || label.contains(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let mut columns = 0;
    let mut end = 0; // byte offset in `rest` after the last count
    while columns < max_columns {
        let Some((stop, Some(v))) = token(rest.as_bytes(), end) else {
            break;
        };
        count(v);
        columns += 1;
        end = stop;
    }
    Some(CpuRow {
        label,
        columns,
        tail: rest[end..].trim(),
        counts: &rest[..end],
    })
}

/// Per-CPU softirq counts of `/proc/softirqs`: name (lower case) to
/// `counts[cpu]`, as [`cpu_rows`] reads them.
pub fn softirqs(text: &str) -> BTreeMap<String, BTreeMap<usize, u64>> {
    let mut cpus = Vec::new();
    let rows: Vec<CpuRow> = cpu_rows(text, &mut cpus).collect();
    rows.into_iter()
        .map(|r| {
            let per = cpus.iter().copied().zip(r.counts()).collect();
            (r.label.to_ascii_lowercase(), per)
        })
        .collect()
}

/// The lines of `/proc/vmstat` (`name value`): name and value; lines
/// whose value is not a `u64` are skipped.
pub fn vmstat_values(text: &str) -> impl Iterator<Item = (&str, u64)> {
    lines(text).filter_map(|l| {
        let (k, v) = l.split_once(' ')?;
        Some((k, v.trim().parse().ok()?))
    })
}

/// `/proc/vmstat`: name to value.
pub fn vmstat(text: &str) -> BTreeMap<String, u64> {
    vmstat_values(text)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The lines of `/proc/meminfo` (`MemTotal:  16384 kB`): name and value,
/// in kB for the lines that end in `kB` (every one the exporter
/// publishes), a plain count for the others (`HugePages_Total`). Lines
/// whose value is not a `u64` are skipped.
pub fn meminfo(text: &str) -> impl Iterator<Item = (&str, u64)> {
    lines(text).filter_map(|l| {
        let (k, v) = l.split_once(':')?;
        let v = v.split_ascii_whitespace().next()?.parse().ok()?;
        Some((k.trim(), v))
    })
}

/// One line of `/proc/diskstats`: a block device (whole disk or
/// partition) and the fields the exporter publishes. Field numbers are
/// the kernel's (`Documentation/admin-guide/iostats.rst`, 1-based, the
/// major and minor numbers and the name being fields 1–3); sectors are
/// 512 bytes whatever the device's sector size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskStats<'a> {
    /// The device's name (field 3): `vda`, `loop0`, `nvme0n1p1`.
    pub name: &'a str,
    /// Reads completed (field 4).
    pub reads: u64,
    /// Sectors read (field 6).
    pub read_sectors: u64,
    /// Writes completed (field 8).
    pub writes: u64,
    /// Sectors written (field 10).
    pub write_sectors: u64,
    /// Discards completed (field 15); `None` before Linux 4.18 (14 fields).
    pub discards: Option<u64>,
    /// Sectors discarded (field 17); `None` before Linux 4.18.
    pub discard_sectors: Option<u64>,
    /// Flush requests completed (field 19); `None` before Linux 5.5 (18
    /// fields).
    pub flushes: Option<u64>,
}

/// The devices of `/proc/diskstats` (kernels with 14, 18, 20 or more
/// fields). A line with fewer than 14 fields, a major or minor that is not
/// a number, or a published field that is not a `u64` is skipped.
pub fn diskstats(text: &str) -> impl Iterator<Item = DiskStats<'_>> {
    lines(text).filter_map(|line| {
        let mut f = [""; 20];
        let mut n = 0;
        for (slot, t) in f.iter_mut().zip(line.split_ascii_whitespace()) {
            *slot = t;
            n += 1;
        }
        if n < 14 || f[0].parse::<u32>().is_err() || f[1].parse::<u32>().is_err() {
            return None;
        }
        // `field(k)`: the kernel's 1-based field k; `since(n0, k)`: field k
        // of a format of at least n0 fields, `None` in an older one.
        let field = |k: usize| f[k - 1].parse::<u64>().ok();
        let since = |n0: usize, k: usize| match n >= n0 {
            true => field(k).map(Some),
            false => Some(None),
        };
        Some(DiskStats {
            name: f[2],
            reads: field(4)?,
            read_sectors: field(6)?,
            writes: field(8)?,
            write_sectors: field(10)?,
            discards: since(18, 15)?,
            discard_sectors: since(18, 17)?,
            flushes: since(20, 19)?,
        })
    })
}

/// The devices `/proc/partitions` lists (`major minor #blocks name`):
/// name and size in KiB. The kernel lists whole disks and partitions with
/// a non-zero size only, and leaves out removable disks that cannot hold
/// partitions (CD drives). The header and blank lines are skipped.
pub fn partitions(text: &str) -> impl Iterator<Item = (&str, u64)> {
    lines(text).filter_map(|line| {
        let mut t = line.split_ascii_whitespace();
        t.next()?.parse::<u32>().ok()?;
        t.next()?.parse::<u32>().ok()?;
        let kib = t.next()?.parse().ok()?;
        Some((t.next()?, kib))
    })
}

/// One interface of `/proc/net/dev`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetDev<'a> {
    /// The interface's name (`eth0`).
    pub name: &'a str,
    /// Bytes received (the first receive column).
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes sent (the first transmit column, the 9th number).
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
}

/// The interfaces of `/proc/net/dev` (`name: 8 receive and 8 transmit
/// numbers`). The two header lines have no colon and are skipped, as is a
/// line with fewer than 10 numbers or one of those 10 not a `u64`.
pub fn net_dev(text: &str) -> impl Iterator<Item = NetDev<'_>> {
    lines(text).filter_map(|line| {
        let (name, rest) = line.split_once(':')?;
        let name = name.trim();
        if name.is_empty() || name.contains(|c: char| c.is_ascii_whitespace()) {
            return None;
        }
        let mut v = [0u64; 10];
        let mut n = 0;
        for (slot, t) in v.iter_mut().zip(rest.split_ascii_whitespace()) {
            *slot = t.parse().ok()?;
            n += 1;
        }
        (n == 10).then_some(NetDev {
            name,
            rx_bytes: v[0],
            rx_packets: v[1],
            tx_bytes: v[8],
            tx_packets: v[9],
        })
    })
}

/// The totals of a `/proc/pressure` file: microseconds during which some
/// (or all) non-idle tasks were stalled on the resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pressure {
    /// `some … total=N`; `None` if the file has no such line.
    pub some: Option<u64>,
    /// `full … total=N`; `None` if the file has no such line (`cpu` before
    /// Linux 5.13).
    pub full: Option<u64>,
}

/// Parses a `/proc/pressure` file (`cpu`, `memory`, `io`, `irq`). The
/// averages (`avg10=` …) are ignored.
pub fn pressure(text: &str) -> Pressure {
    let mut p = Pressure::default();
    for line in lines(text) {
        let mut t = line.split_ascii_whitespace();
        let slot = match t.next() {
            Some("some") => &mut p.some,
            Some("full") => &mut p.full,
            _ => continue,
        };
        if let Some(v) = t.find_map(|f| f.strip_prefix("total=")?.parse().ok()) {
            *slot = Some(v);
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_softirqs_and_vmstat() {
        let stat = "cpu  10 0 5 100 1 0 2 0 0 0\ncpu0 4 0 2 50 1 0 1 0 0 0\ncpu1 6 0 3 50 0 0 1 0 0 0\nintr 99\nctxt 39024509\nbtime 1\n";
        let t = stat_times(stat);
        assert_eq!(t.len(), 2);
        assert_eq!(t[&1][0], 6);
        assert_eq!(t[&0][3], 50);
        assert_eq!(stat_ctxt(stat), Some(39_024_509));
        assert_eq!(stat_ctxt("cpu 1\nctxt\n"), None);
        assert_eq!(stat_ctxt("ctxt 99999999999999999999999\n"), None);
        let sirq = "                    CPU0       CPU1\n          HI:          1          2\n      NET_RX:         30         40\n";
        let s = softirqs(sirq);
        assert_eq!(s["net_rx"][&1], 40);
        assert_eq!(s["hi"][&0], 1);
        let v = vmstat("nr_free_pages 1234\npgfault 99\n");
        assert_eq!(v["pgfault"], 99);
    }

    /// `/proc/interrupts` of this project's 2-CPU VM (x86-64, 6.18),
    /// shortened, with CPU1 offline in the header to show the mapping.
    const INTERRUPTS: &str = "           CPU0       CPU2       \n\
  24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
  38:          0       5837 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
  27:          0          0\n\
 NMI:          0          0   Non-maskable interrupts\n\
 LOC:    8411964    8916593   Local timer interrupts\n\
 ERR:          0\n\
 MIS:          7\n";

    #[test]
    fn interrupts_map_columns_to_the_headers_cpus() {
        let mut cpus = Vec::new();
        let rows: Vec<_> = cpu_rows(INTERRUPTS, &mut cpus).collect();
        assert_eq!(cpus, [0, 2]);
        assert_eq!(rows.len(), 7);
        assert_eq!(rows[0].irq(), Some(24));
        assert_eq!(rows[0].tail, "IO-APIC   5-edge      ACPI:Ged");
        assert_eq!(rows[1].counts().collect::<Vec<_>>(), [0, 5837]);
        assert_eq!((rows[2].columns, rows[2].tail), (2, ""));
        assert_eq!(rows[3].irq(), None);
        assert_eq!(rows[3].label, "NMI");
        assert_eq!(rows[4].counts().collect::<Vec<_>>(), [8_411_964, 8_916_593]);
        assert_eq!(rows[4].tail, "Local timer interrupts");
        // ERR and MIS: one machine-wide count, in the first column.
        assert_eq!((rows[6].columns, rows[6].counts().sum::<u64>()), (1, 7));
    }

    #[test]
    fn a_token_is_a_number_exactly_when_str_parse_says_so() {
        let tokens = [
            "0",
            "7",
            "+5",
            "+",
            "-1",
            "1000003",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
            "00000000000000000000001",
            "12a",
            "a12",
            "1.5",
            "\u{663}",
            "1\u{663}",
            "++1",
        ];
        for t in tokens {
            for (pad, rest) in [("", ""), ("  \t", " x"), ("\x0c", "\r\n")] {
                let text = format!("{pad}{t}{rest}");
                let (end, v) = token(text.as_bytes(), 0).unwrap();
                assert_eq!(v, t.parse::<u64>().ok(), "{text:?}");
                assert_eq!(end, pad.len() + t.len(), "{text:?}");
            }
        }
        assert_eq!(token(b"   ", 0), None);
        assert_eq!(token(b"", 0), None);
        assert_eq!(token(b"1 2", 1), Some((3, Some(2))));
    }

    #[test]
    fn interrupts_survive_hostile_rows() {
        let mut cpus = Vec::new();
        let text = "CPU0 CPU1\n\
 1: 99999999999999999999999 5 chip\n\
 2: 1 2 3 4 5\n\
 3 4: 1\n\
 :5 6\n\
no colon here\n\
 7: 4";
        let rows: Vec<_> = cpu_rows(text, &mut cpus).collect();
        assert_eq!(rows.len(), 3, "{rows:?}");
        // A count too large ends the counts: it is tail, never 0.
        assert_eq!(
            (rows[0].columns, rows[0].tail),
            (0, "99999999999999999999999 5 chip")
        );
        // Never more counts than CPU columns.
        assert_eq!(rows[1].counts().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(rows[1].tail, "3 4 5");
        // A truncated last line keeps what it has.
        assert_eq!(rows[2].counts().collect::<Vec<_>>(), [4]);
        assert_eq!(cpu_rows("", &mut cpus).count(), 0);
        assert!(cpus.is_empty());
        // A header that is not one: no columns, so no counts.
        let rows: Vec<_> = cpu_rows("junk\n 1: 5 6\n", &mut cpus).collect();
        assert_eq!((rows.len(), rows[0].columns), (1, 0));
    }

    #[test]
    fn diskstats_of_14_18_and_20_fields() {
        let text = "\
   8       0 sda 100 2 800 30 50 1 400 20 0 40 50\n\
   8       1 sda1 90 2 700 30 40 1 300 20 0 40 50 7 0 64 3\n\
 254       0 vda 1919379 101085 128998762 4986013 136399 239780 65279216 393585 0 459440 5416146 131722 27 27636208 36204 3810 344\n\
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
   7       1 loop1 1 0 8 0 2 0 16 0 0 0 0 0 0 0 0 0 0 0 99 99\n";
        let d: Vec<_> = diskstats(text).collect();
        let names: Vec<_> = d.iter().map(|s| s.name).collect();
        assert_eq!(names, ["sda", "sda1", "vda", "loop0", "loop1"]);
        // 14 fields (before Linux 4.18): no discards, no flushes.
        let sda = d[0];
        let read_write = |s: DiskStats| (s.reads, s.read_sectors, s.writes, s.write_sectors);
        assert_eq!(read_write(sda), (100, 800, 50, 400));
        assert_eq!(
            (sda.discards, sda.discard_sectors, sda.flushes),
            (None, None, None)
        );
        // 18 fields (4.18 to 5.4): discards, no flushes.
        let sda1 = d[1];
        assert_eq!(read_write(sda1), (90, 700, 40, 300));
        assert_eq!(
            (sda1.discards, sda1.discard_sectors, sda1.flushes),
            (Some(7), Some(64), None)
        );
        // 20 fields (5.5 on), this project's VM.
        let vda = d[2];
        assert_eq!(
            read_write(vda),
            (1_919_379, 128_998_762, 136_399, 65_279_216)
        );
        assert_eq!(
            (vda.discards, vda.discard_sectors, vda.flushes),
            (Some(131_722), Some(27_636_208), Some(3810))
        );
        // More than 20 fields (a future kernel): the first 20 are read.
        assert_eq!(read_write(d[4]), (1, 8, 2, 16));
        assert_eq!(d[4].flushes, Some(0));
    }

    #[test]
    fn diskstats_skip_hostile_lines() {
        let text = "\
 8 0 sda 99999999999999999999999 0 0 0 0 0 0 0 0 0 0\n\
 x 0 sdb 1 0 0 0 0 0 0 0 0 0 0\n\
 8 0 sdc 1 0 0\n\
 8 0 sdd 1 0 2 0 3 0 4 0 0 0 0 x 0 5\n\
\n\
 8 0 sde 1 0 2 0 3 0 4 0 0 0 0";
        let d: Vec<_> = diskstats(text).collect();
        assert_eq!(d.len(), 2, "{d:?}");
        // A bad discard count when the line has 18 fields skips the line;
        // sdd has 17 fields: discards unknown, not junk.
        assert_eq!(
            (d[0].name, d[0].discards, d[0].write_sectors),
            ("sdd", None, 4)
        );
        assert_eq!(d[1].name, "sde");
    }

    #[test]
    fn partitions_lists_sized_devices() {
        let text = "major minor  #blocks  name\n\n 254        0  268435456 vda\n 254        1     1024 vda1\n   7  0 x loop0\n   8\n";
        let p: Vec<_> = partitions(text).collect();
        assert_eq!(p, [("vda", 268_435_456), ("vda1", 1024)]);
    }

    #[test]
    fn net_dev_reads_bytes_and_packets() {
        let text = "\
Inter-|   Receive                                                |  Transmit\n\
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n\
    lo: 1887944308  180271    0    0    0     0          0         0 1887944308  180271    0    0    0     0       0          0\n\
  eth0: 297911858    9952    0    0    0     0          0         0   451983    5778    0    0    0     0       0          0\n\
  eth1:1 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n\
  bad: 1 2 3\n\
  big: 99999999999999999999999 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n\
  trunc: 5 6 0 0 0 0 0 0 7";
        let d: Vec<_> = net_dev(text).collect();
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(
            (
                d[1].name,
                d[1].rx_bytes,
                d[1].rx_packets,
                d[1].tx_bytes,
                d[1].tx_packets
            ),
            ("eth0", 297_911_858, 9952, 451_983, 5778)
        );
        // Old kernels print no space after the colon of a large count.
        assert_eq!((d[2].name, d[2].rx_bytes, d[2].tx_packets), ("eth1", 1, 4));
    }

    #[test]
    fn pressure_meminfo() {
        let cpu = "some avg10=1.65 avg60=1.91 avg300=2.08 total=6972255160\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            pressure(cpu),
            Pressure {
                some: Some(6_972_255_160),
                full: Some(0)
            }
        );
        let irq = "full avg10=0.00 avg60=0.00 avg300=0.00 total=17\n";
        assert_eq!(
            pressure(irq),
            Pressure {
                some: None,
                full: Some(17)
            }
        );
        assert_eq!(
            pressure("some avg10=1 total=x\nfull total=\n"),
            Pressure::default()
        );
        assert_eq!(
            pressure("some total=99999999999999999999999"),
            Pressure::default()
        );
        let mem = "MemTotal:       16384256 kB\nMemFree:  100 kB\nHugePages_Total:       0\nBroken:\nHuge: 99999999999999999999999 kB\n";
        let m: Vec<_> = meminfo(mem).collect();
        assert_eq!(
            m,
            [
                ("MemTotal", 16_384_256),
                ("MemFree", 100),
                ("HugePages_Total", 0)
            ]
        );
    }

    #[test]
    fn a_million_rows_read_at_most_max_lines() {
        let text = " 8 0 sda 1 0 2 0 3 0 4 0 0 0 0\n".repeat(MAX_LINES + 10);
        assert_eq!(diskstats(&text).count(), MAX_LINES);
        let text = format!("CPU0\n{}", " 1: 5\n".repeat(MAX_LINES + 10));
        let mut cpus = Vec::new();
        assert_eq!(cpu_rows(&text, &mut cpus).count(), MAX_LINES - 1);
    }

    /// This machine's own files, whatever its kernel: each parser finds
    /// what every Linux has.
    #[test]
    fn parses_this_hosts_proc() {
        let read = |p: &str| ProcFile::new(p).read().unwrap().into_owned();
        assert!(stat_ctxt(&read("/proc/stat")).is_some());
        assert!(stat_cpus(&read("/proc/stat")).count() >= 1);
        assert!(net_dev(&read("/proc/net/dev")).any(|d| d.name == "lo"));
        assert!(meminfo(&read("/proc/meminfo")).any(|(n, v)| n == "MemTotal" && v > 0));
        let mut cpus = Vec::new();
        let text = read("/proc/interrupts");
        let rows: Vec<_> = cpu_rows(&text, &mut cpus).collect();
        assert!(!cpus.is_empty());
        assert!(rows.iter().all(|r| r.columns <= cpus.len()));
        let text = read("/proc/softirqs");
        assert!(cpu_rows(&text, &mut cpus).any(|r| r.label == "TIMER" && r.columns == cpus.len()));
        // Every line of diskstats is a device (the file may be empty in a
        // container without block devices).
        let text = read("/proc/diskstats");
        assert_eq!(diskstats(&text).count(), text.lines().count());
    }

    #[test]
    fn proc_file_reads_again_into_one_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "a 1\n").unwrap();
        let mut f = ProcFile::new(&p);
        assert_eq!(f.read().unwrap(), "a 1\n");
        std::fs::write(&p, b"b \xff2\n").unwrap();
        assert_eq!(f.read().unwrap(), "b \u{fffd}2\n");
        // A file kept open and replaced: read as it is now... unless the old
        // one still reads, as a regular file does (a /proc file is never
        // replaced).
        std::fs::remove_file(&p).unwrap();
        assert_eq!(f.read().unwrap(), "b \u{fffd}2\n");
        let mut gone = ProcFile::new(&p);
        let e = gone.read().unwrap_err();
        assert!(e.to_string().contains(p.to_str().unwrap()), "{e}");
        assert_eq!(f.path(), p);
    }

    #[test]
    fn proc_file_reads_long_files_whole_and_cuts_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        // Longer than a page and than the first buffer: read whole, again.
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &text).unwrap();
        let mut f = ProcFile::new(&p);
        for _ in 0..2 {
            assert_eq!(f.read().unwrap(), text);
        }
        std::fs::write(&p, "short\n").unwrap();
        assert_eq!(f.read().unwrap(), "short\n");
        // Past MAX_FILE_BYTES (sparse: zeros, no newline after the first
        // line): cut after the last whole line within the limit.
        let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        file.set_len(MAX_FILE_BYTES as u64 + 4096).unwrap();
        assert_eq!(f.read().unwrap(), "short\n");
        // The real multi-page files of this machine parse as a whole.
        let mut maps = ProcFile::new("/proc/self/maps");
        let text = maps.read().unwrap().into_owned();
        assert!(text.ends_with('\n') && text.lines().count() > 5, "{text}");
    }
}
