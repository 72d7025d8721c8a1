//! Three collectors of `/proc`'s CPU and memory counters, each a source
//! of its own:
//!
//! * `cpu` ([`CpuSource`]): per-CPU times and context switches from
//!   `/proc/stat`;
//! * `softirqs` ([`SoftirqSource`]): per-CPU softirq counts from
//!   `/proc/softirqs`;
//! * `vmstat` ([`VmstatSource`]): selected `/proc/vmstat` values.
//!
//! The kinds of softirq and the vmstat values are fixed at start; each
//! file is read once per refresh, into a buffer kept from one refresh to
//! the next.

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_families::table;
use perfabi_shm::writer::{MemberId, Writer};

use crate::collectors::{Collector, Source};
use crate::follow::Room;
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::{self, ProcFile};

/// The vmstat values published when none are configured.
pub const DEFAULT_VMSTAT: &[&str] = &[
    "pgfault",
    "pgmajfault",
    "pgpgin",
    "pgpgout",
    "pswpin",
    "pswpout",
    "nr_free_pages",
    "nr_dirty",
    "nr_writeback",
];

/// The `cpu` collector.
pub const CPU: Collector = Collector {
    name: "cpu",
    default: true,
    help: "kernel.cpu.time and kernel.all.pswitch, from /proc/stat",
    need: |ctx| {
        ProcFile::new(ctx.paths.proc("stat")).read()?;
        Ok(Need {
            families: 2,
            members: procfs::CPU_FIELDS.len() + 1,
        })
    },
    start: |w, ctx| Ok(Box::new(CpuSource::new(w, &ctx.paths)?)),
};

/// The `softirqs` collector.
pub const SOFTIRQS: Collector = Collector {
    name: "softirqs",
    default: true,
    help: "kernel.softirqs, from /proc/softirqs",
    need: |ctx| {
        Ok(Need {
            families: 1,
            members: softirq_kinds(&ctx.paths)?.len(),
        })
    },
    start: |w, ctx| Ok(Box::new(SoftirqSource::new(w, &ctx.paths)?)),
};

/// The `vmstat` collector.
pub const VMSTAT: Collector = Collector {
    name: "vmstat",
    default: true,
    help: "mem.vmstat.<name>, from /proc/vmstat (--vmstat NAME)",
    need: |ctx| {
        ProcFile::new(ctx.paths.proc("vmstat")).read()?;
        Ok(Need {
            families: ctx.vmstat.len(),
            members: ctx.vmstat.len(),
        })
    },
    start: |w, ctx| Ok(Box::new(VmstatSource::new(w, &ctx.paths, &ctx.vmstat)?)),
};

fn read(p: &std::path::Path) -> Result<String, SourceError> {
    std::fs::read_to_string(p).map_err(|e| SourceError::Read(p.to_path_buf(), e))
}

/// Checks the `--vmstat` names against this host before anything is
/// created: none given twice, every one in `/proc/vmstat`.
pub fn check(paths: &Paths, vmstat: &[String]) -> Result<(), SourceError> {
    if let Some((_, n)) = vmstat
        .iter()
        .enumerate()
        .find(|(i, n)| vmstat[..*i].contains(n))
    {
        return Err(SourceError::DuplicateVmstat(n.to_string()));
    }
    if vmstat.is_empty() {
        return Ok(());
    }
    let present = procfs::vmstat(&read(&paths.proc("vmstat"))?);
    match vmstat.iter().find(|n| !present.contains_key(n.as_str())) {
        Some(n) => Err(SourceError::UnknownVmstat(n.clone())),
        None => Ok(()),
    }
}

/// The names of `/proc/softirqs` rows that are valid instance strings,
/// lower case.
fn softirq_kinds(paths: &Paths) -> std::io::Result<Vec<String>> {
    let mut f = ProcFile::new(paths.proc("softirqs"));
    let text = f.read()?;
    Ok(procfs::cpu_rows(&text, &mut Vec::new())
        .map(|r| r.label.to_ascii_lowercase())
        .filter(|n| perfabi::name::check_instance(n).is_ok())
        .collect())
}

/// The `cpu` collector's source.
pub struct CpuSource {
    stat: ProcFile,
    us_per_tick: u64,
    cpu: Vec<MemberId>,
    pswitch: MemberId,
    /// Per-CPU times of the last `/proc/stat`, by CPU.
    times: Vec<[u64; 10]>,
    values: Vec<u64>,
}

impl CpuSource {
    /// Registers `kernel.cpu.time` and `kernel.all.pswitch` in `w`.
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let mut stat = ProcFile::new(paths.proc("stat"));
        stat.read().map_err(SourceError::Io)?;
        let abi = SourceError::Abi;
        let hz = rustix::param::clock_ticks_per_second().max(1);
        let time = w
            .add_family(&FamilySpec::new(
                "kernel.cpu.time",
                "CPU time by mode, from /proc/stat",
                "mode",
                Kind::Counter,
                Unit::US,
            ))
            .map_err(abi)?;
        let cpu = procfs::CPU_FIELDS
            .iter()
            .map(|f| w.add_external_member(time, f, &[]))
            .collect::<Result<_, _>>()
            .map_err(abi)?;
        let ctxt = w.add_family(&table::SCHED_PSWITCH.spec()).map_err(abi)?;
        let pswitch = w.add_external_member(ctxt, "", &[]).map_err(abi)?;
        let nr_cpus = w.layout().nr_cpus;
        Ok(Self {
            stat,
            us_per_tick: 1_000_000 / hz,
            cpu,
            pswitch,
            times: vec![[0; 10]; nr_cpus],
            values: vec![0; nr_cpus],
        })
    }
}

impl Source for CpuSource {
    /// Reads `/proc/stat` once and publishes every value.
    fn refresh(&mut self, w: &Writer, _: &mut Room) -> std::io::Result<()> {
        let stat = self.stat.read()?;
        for t in &mut self.times {
            *t = [0; 10];
        }
        for (cpu, v) in procfs::stat_cpus(&stat) {
            if let Some(slot) = self.times.get_mut(cpu) {
                *slot = v;
            }
        }
        if let Some(ctxt) = procfs::stat_ctxt(&stat) {
            // A machine-wide value: all of it on CPU 0, so the sum is right.
            let _ = w.publish_member_per_cpu(&self.pswitch, &[ctxt]);
        }
        for (f, id) in self.cpu.iter().enumerate() {
            for (v, t) in self.values.iter_mut().zip(&self.times) {
                *v = t[f].wrapping_mul(self.us_per_tick);
            }
            let _ = w.publish_member_per_cpu(id, &self.values);
        }
        Ok(())
    }
}

/// The `softirqs` collector's source.
pub struct SoftirqSource {
    softirqs: ProcFile,
    /// Softirq kinds (lower case) and their members.
    softirq: Vec<(String, MemberId)>,
    cpus: Vec<usize>,
    /// One softirq row's counts in column order (reused).
    counts: Vec<u64>,
    values: Vec<u64>,
}

impl SoftirqSource {
    /// Registers `kernel.softirqs` and its kinds in `w`.
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let kinds = softirq_kinds(paths).map_err(SourceError::Io)?;
        let abi = SourceError::Abi;
        let softirqs = w
            .add_family(&FamilySpec::new(
                "kernel.softirqs",
                "Softirqs handled, by kind, from /proc/softirqs",
                "kind",
                Kind::Counter,
                Unit::COUNT,
            ))
            .map_err(abi)?;
        let softirq = kinds
            .into_iter()
            .map(|n| Ok((n.clone(), w.add_external_member(softirqs, &n, &[])?)))
            .collect::<Result<_, perfabi::Error>>()
            .map_err(abi)?;
        Ok(Self {
            softirqs: ProcFile::new(paths.proc("softirqs")),
            softirq,
            cpus: Vec::new(),
            counts: Vec::new(),
            values: vec![0; w.layout().nr_cpus],
        })
    }
}

impl Source for SoftirqSource {
    /// Reads `/proc/softirqs` once and publishes every kind's counts.
    fn refresh(&mut self, w: &Writer, _: &mut Room) -> std::io::Result<()> {
        let sirq = self.softirqs.read()?;
        let (softirq, values) = (&self.softirq, &mut self.values);
        procfs::for_each_cpu_row(
            &sirq,
            &mut self.cpus,
            &mut self.counts,
            |row, cpus, counts| {
                let Some((_, id)) = softirq
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(row.label))
                else {
                    return;
                };
                values.fill(0);
                for (&cpu, &v) in cpus.iter().zip(counts) {
                    if let Some(slot) = values.get_mut(cpu) {
                        *slot = v;
                    }
                }
                let _ = w.publish_member_per_cpu(id, values);
            },
        );
        Ok(())
    }
}

/// The `vmstat` collector's source.
pub struct VmstatSource {
    vmstat: ProcFile,
    vm: std::collections::HashMap<String, MemberId>,
}

impl VmstatSource {
    /// Registers a family per name of `vmstat` in `w`.
    pub fn new(w: &Writer, paths: &Paths, vmstat: &[String]) -> Result<Self, SourceError> {
        check(paths, vmstat)?;
        let vm = vmstat
            .iter()
            .map(|n| {
                let (kind, unit, what) = if n.starts_with("nr_") {
                    (Kind::Gauge, Unit::PAGES, "Pages")
                } else {
                    (Kind::Counter, Unit::COUNT, "Events")
                };
                let help = format!("{what}: {n} of /proc/vmstat");
                let f = w.add_family(&FamilySpec::new(
                    &format!("mem.vmstat.{n}"),
                    &help,
                    "",
                    kind,
                    unit,
                ))?;
                Ok((n.clone(), w.add_external_member(f, "", &[])?))
            })
            .collect::<Result<_, perfabi::Error>>()
            .map_err(SourceError::Abi)?;
        Ok(Self {
            vmstat: ProcFile::new(paths.proc("vmstat")),
            vm,
        })
    }
}

impl Source for VmstatSource {
    /// Reads `/proc/vmstat` once and publishes the selected values.
    fn refresh(&mut self, w: &Writer, _: &mut Room) -> std::io::Result<()> {
        let vm = self.vmstat.read()?;
        for (name, v) in procfs::vmstat_values(&vm) {
            if let Some(id) = self.vm.get(name) {
                let _ = w.publish_member_per_cpu(id, &[v]);
            }
        }
        Ok(())
    }
}
