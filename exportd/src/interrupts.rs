//! The interrupts source, from `/proc/interrupts`, per CPU by its header's
//! columns:
//!
//! * `kernel.interrupts.count`: a numbered row per IRQ, instance
//!   `N:actions` ([`irq_instance`]: the IRQ's action names from
//!   `/sys/kernel/irq/N/actions`). An IRQ whose actions file is missing or
//!   empty is `N:`; when its actions change (a driver bound or unbound),
//!   the IRQ becomes a new instance and the old one goes. The actions file
//!   is read when an IRQ first appears and again only when the row's text
//!   after the counts (chip, trigger and action names) changes.
//! * `kernel.interrupts.other`: a named row (`NMI`, `LOC`, …) per kind,
//!   named as the file names it; a row with fewer counts than CPUs
//!   (`ERR`, `MIS`: machine-wide) has them on its first columns' CPUs.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_families::table;
use perfabi_shm::writer::Writer;

use crate::collectors::{Collector, Source};
use crate::follow::{Follow, Room};
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{self, ProcFile};

/// The instance string of IRQ `irq` whose actions file holds `actions`
/// (comma-joined names, as `/sys/kernel/irq/N/actions` has them), into
/// `out`: `N:` and the names, bytes other than printable ASCII, space,
/// `"` and `\` replaced by `_`, cut to 63 bytes (the README's rule, which
/// the kernel module follows too).
///
/// ```
/// let mut s = String::new();
/// perfabi_exportd::interrupts::irq_instance(24, b"virtio0-input.0\n", &mut s);
/// assert_eq!(s, "24:virtio0-input.0");
/// perfabi_exportd::interrupts::irq_instance(9, b"acpi, my \"dev\"\xff\n", &mut s);
/// assert_eq!(s, "9:acpi,_my__dev__");
/// perfabi_exportd::interrupts::irq_instance(27, b"", &mut s);
/// assert_eq!(s, "27:");
/// ```
pub fn irq_instance(irq: u32, actions: &[u8], out: &mut String) {
    out.clear();
    let _ = write!(out, "{irq}:");
    let names = actions.strip_suffix(b"\n").unwrap_or(actions);
    for &b in names {
        if out.len() >= perfabi::layout::INSTANCE_LEN - 1 {
            break;
        }
        let keep = b.is_ascii_graphic() && b != b'"' && b != b'\\';
        out.push(if keep { b as char } else { '_' });
    }
}

/// The `interrupts` collector.
pub const COLLECTOR: Collector = Collector {
    name: "interrupts",
    default: true,
    help: "kernel.interrupts.*, from /proc/interrupts",
    need: |ctx| need(&ctx.paths),
    start: |w, ctx| Ok(Box::new(InterruptSource::new(w, &ctx.paths)?)),
};

/// The families and members [`InterruptSource::new`] registers here now.
pub fn need(paths: &Paths) -> std::io::Result<Need> {
    let mut f = ProcFile::new(paths.proc("interrupts"));
    let mut cpus = Vec::new();
    let rows = procfs::cpu_rows(&f.read()?, &mut cpus).count();
    Ok(Need {
        families: 2,
        members: rows,
    })
}

/// The instance strings of the numbered rows, each kept while its row's
/// tail stays the same.
struct IrqNames {
    sys: std::path::PathBuf,
    names: HashMap<u32, IrqName>,
    pass: u64,
    path: String,
    actions: Vec<u8>,
}

/// One numbered row's instance string and the tail it was made for.
struct IrqName {
    tail: String,
    instance: String,
    seen: u64,
}

impl IrqNames {
    /// The instance string of IRQ `irq` whose row's tail is `tail`,
    /// reading its actions file if the IRQ is new or its tail changed.
    fn get(&mut self, irq: u32, tail: &str) -> &str {
        let n = self.names.entry(irq).or_insert_with(|| IrqName {
            tail: String::new(),
            instance: String::new(),
            seen: 0,
        });
        n.seen = self.pass;
        if n.instance.is_empty() || n.tail != tail {
            self.path.clear();
            // not raw: builds the path to open, not a message
            let _ = write!(self.path, "{}/kernel/irq/{irq}/actions", self.sys.display());
            self.actions.clear();
            if let Ok(f) = std::fs::File::open(&self.path) {
                let _ = f.take(4096).read_to_end(&mut self.actions);
            }
            irq_instance(irq, &self.actions, &mut n.instance);
            n.tail.clear();
            n.tail.push_str(tail);
        }
        &n.instance
    }

    /// Forgets the IRQs not seen since the last `end`.
    fn end(&mut self) {
        let pass = self.pass;
        self.names.retain(|_, n| n.seen == pass);
        self.pass += 1;
    }
}

/// The interrupts source.
pub struct InterruptSource {
    file: ProcFile,
    count: Follow,
    other: Follow,
    cpus: Vec<usize>,
    /// One row's counts in column order (reused).
    counts: Vec<u64>,
    values: Vec<u64>,
    names: IrqNames,
}

impl InterruptSource {
    /// Registers the two families in `w`; the IRQs come at the first
    /// [`refresh`](Self::refresh).
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let mut file = ProcFile::new(paths.proc("interrupts"));
        file.read().map_err(SourceError::Io)?;
        let count = w
            .add_family(&table::IRQ_COUNT.spec())
            .map_err(SourceError::Abi)?;
        let other = w
            .add_family(&FamilySpec::new(
                "kernel.interrupts.other",
                "Other interrupts by kind (NMI, LOC, ...), from /proc/interrupts",
                "kind",
                Kind::Counter,
                Unit::COUNT,
            ))
            .map_err(SourceError::Abi)?;
        Ok(Self {
            file,
            count: Follow::new("irq", vec![count]),
            other: Follow::new("interrupt kind", vec![other]),
            cpus: Vec::new(),
            counts: Vec::new(),
            values: vec![0; w.layout().nr_cpus],
            names: IrqNames {
                sys: paths.sys.clone(),
                names: HashMap::new(),
                pass: 1,
                path: String::new(),
                actions: Vec::new(),
            },
        })
    }
}

impl Source for InterruptSource {
    /// Reads `/proc/interrupts` once, follows the IRQs and kinds and
    /// publishes their per-CPU counts.
    fn refresh(&mut self, w: &Writer, room: &mut Room) -> std::io::Result<()> {
        let text = self.file.read()?;
        self.count.begin();
        self.other.begin();
        let (count, other, names, values) = (
            &mut self.count,
            &mut self.other,
            &mut self.names,
            &mut self.values,
        );
        procfs::for_each_cpu_row(
            &text,
            &mut self.cpus,
            &mut self.counts,
            |row, cpus, counts| {
                let (follow, instance) = match row.irq() {
                    Some(irq) => (&mut *count, names.get(irq, row.tail)),
                    None => (&mut *other, row.label),
                };
                // An offline CPU has no column: it keeps the count it had (the
                // kernel keeps it too), so no total goes back while it is off.
                match follow.last(instance) {
                    Some(last) if last.len() == values.len() => values.copy_from_slice(last),
                    _ => values.fill(0),
                }
                for (&cpu, &v) in cpus.iter().zip(counts) {
                    if let Some(slot) = values.get_mut(cpu) {
                        *slot = v;
                    }
                }
                for m in follow.see(w, room, instance, values).into_iter().flatten() {
                    let _ = w.publish_member_per_cpu(m, values);
                }
            },
        );
        self.count.end(w, room);
        self.other.end(w, room);
        self.names.end();
        Ok(())
    }
}
