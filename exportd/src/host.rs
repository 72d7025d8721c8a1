//! The host-statistics source: per-CPU times and context switches from
//! `/proc/stat`, per-CPU softirq counts from `/proc/softirqs`, and
//! selected `/proc/vmstat` values. The kinds of softirq and the vmstat
//! values are fixed at start; each file is read once per refresh, into a
//! buffer kept from one refresh to the next.

use std::collections::HashMap;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_families::table;
use perfabi_shm::writer::{MemberId, Writer};

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

/// Registered instances and the buffers of one refresh.
pub struct HostSource {
    stat: ProcFile,
    softirqs: ProcFile,
    vmstat: ProcFile,
    us_per_tick: u64,
    cpu: Vec<MemberId>,
    pswitch: MemberId,
    /// Softirq kinds (lower case) and their members.
    softirq: Vec<(String, MemberId)>,
    vm: HashMap<String, MemberId>,
    /// Per-CPU times of the last `/proc/stat`, by CPU.
    times: Vec<[u64; 10]>,
    cpus: Vec<usize>,
    /// One softirq row's counts in column order (reused).
    counts: Vec<u64>,
    values: Vec<u64>,
}

fn read(p: &std::path::Path) -> Result<String, SourceError> {
    std::fs::read_to_string(p).map_err(|e| SourceError::Read(p.to_path_buf(), e))
}

/// Checks the configuration against this host before anything is created:
/// every file readable, every vmstat name present.
pub fn check(paths: &Paths, vmstat: &[String]) -> Result<(), SourceError> {
    read(&paths.proc("stat"))?;
    read(&paths.proc("softirqs"))?;
    if let Some((_, n)) = vmstat
        .iter()
        .enumerate()
        .find(|(i, n)| vmstat[..*i].contains(n))
    {
        return Err(SourceError::DuplicateVmstat(n.to_string()));
    }
    let present = procfs::vmstat(&read(&paths.proc("vmstat"))?);
    match vmstat.iter().find(|n| !present.contains_key(n.as_str())) {
        Some(n) => Err(SourceError::UnknownVmstat(n.clone())),
        None => Ok(()),
    }
}

/// The names of `/proc/softirqs` rows that are valid instance strings,
/// lower case.
fn softirq_kinds(paths: &Paths) -> Result<Vec<String>, SourceError> {
    let text = read(&paths.proc("softirqs"))?;
    Ok(procfs::cpu_rows(&text, &mut Vec::new())
        .map(|r| r.label.to_ascii_lowercase())
        .filter(|n| perfabi::name::check_instance(n).is_ok())
        .collect())
}

/// The families and members [`HostSource::new`] registers on this host.
pub fn need(paths: &Paths, vmstat: &[String]) -> Result<Need, SourceError> {
    let softirqs = softirq_kinds(paths)?.len();
    Ok(Need {
        families: 3 + vmstat.len(),
        members: procfs::CPU_FIELDS.len() + softirqs + 1 + vmstat.len(),
    })
}

impl HostSource {
    /// Registers the instances in `w`.
    pub fn new(w: &Writer, paths: &Paths, vmstat: &[String]) -> Result<Self, SourceError> {
        check(paths, vmstat)?;
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
        let softirqs = w
            .add_family(&FamilySpec::new(
                "kernel.softirqs",
                "Softirqs handled, by kind, from /proc/softirqs",
                "kind",
                Kind::Counter,
                Unit::COUNT,
            ))
            .map_err(abi)?;
        let softirq = softirq_kinds(paths)?
            .into_iter()
            .map(|n| Ok((n.clone(), w.add_external_member(softirqs, &n, &[])?)))
            .collect::<Result<_, perfabi::Error>>()
            .map_err(abi)?;
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
            .map_err(abi)?;
        let nr_cpus = w.layout().nr_cpus;
        Ok(Self {
            stat: ProcFile::new(paths.proc("stat")),
            softirqs: ProcFile::new(paths.proc("softirqs")),
            vmstat: ProcFile::new(paths.proc("vmstat")),
            us_per_tick: 1_000_000 / hz,
            cpu,
            pswitch,
            softirq,
            vm,
            times: vec![[0; 10]; nr_cpus],
            cpus: Vec::new(),
            counts: Vec::new(),
            values: vec![0; nr_cpus],
        })
    }

    /// Reads the three files once each and publishes every value.
    pub fn refresh(&mut self, w: &Writer) -> std::io::Result<()> {
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
        let vm = self.vmstat.read()?;
        for (name, v) in procfs::vmstat_values(&vm) {
            if let Some(id) = self.vm.get(name) {
                let _ = w.publish_member_per_cpu(id, &[v]);
            }
        }
        Ok(())
    }
}
