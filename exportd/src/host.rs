//! The host-statistics source: per-CPU times from `/proc/stat`, per-CPU
//! softirq counts from `/proc/softirqs`, and selected `/proc/vmstat` values,
//! published as metric families of external per-CPU members so that any
//! number of agents read them at memory speed instead of each parsing
//! `/proc`:
//!
//! | family | kind | unit | dimension | source |
//! |---|---|---|---|---|
//! | `kernel.cpu.time` | counter | µs | `mode` (`user`, `nice`, `system`, …) | `/proc/stat` `cpuN` lines |
//! | `kernel.softirqs` | counter | count | `kind` (`timer`, `net_rx`, …, lower case) | `/proc/softirqs` |
//! | `mem.vmstat.<name>` | counter (gauge for `nr_*`) | count (pages for `nr_*`) | none | `/proc/vmstat` |

use std::path::PathBuf;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{MemberId, Writer};

use crate::procfs;

/// The files the source reads.
#[derive(Clone, Debug)]
pub struct ProcPaths {
    /// `/proc/stat`.
    pub stat: PathBuf,
    /// `/proc/softirqs`.
    pub softirqs: PathBuf,
    /// `/proc/vmstat`.
    pub vmstat: PathBuf,
}

impl Default for ProcPaths {
    fn default() -> Self {
        Self {
            stat: "/proc/stat".into(),
            softirqs: "/proc/softirqs".into(),
            vmstat: "/proc/vmstat".into(),
        }
    }
}

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
    paths: ProcPaths,
    us_per_tick: u64,
    cpu: Vec<MemberId>,
    softirq: Vec<(String, MemberId)>,
    vmstat: Vec<(String, MemberId)>,
    values: Vec<u64>,
}

/// Why the source cannot start.
#[derive(Debug)]
pub enum HostError {
    /// A `/proc` file cannot be read.
    Read(PathBuf, std::io::Error),
    /// A configured vmstat name is not in this kernel's `/proc/vmstat`.
    UnknownVmstat(String),
    /// A vmstat name is given twice.
    DuplicateVmstat(String),
    /// Registering an instance failed.
    Abi(perfabi::Error),
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            Self::UnknownVmstat(n) => write!(f, "--vmstat {n}: no such counter in /proc/vmstat"),
            Self::DuplicateVmstat(n) => write!(f, "--vmstat {n} is given twice"),
            Self::Abi(e) => write!(f, "cannot register host statistics: {e}"),
        }
    }
}

fn read(p: &PathBuf) -> Result<String, HostError> {
    std::fs::read_to_string(p).map_err(|e| HostError::Read(p.clone(), e))
}

/// Checks the configuration against this host before anything is created:
/// every file readable, every vmstat name present.
pub fn check(paths: &ProcPaths, vmstat: &[String]) -> Result<(), HostError> {
    read(&paths.stat)?;
    read(&paths.softirqs)?;
    if let Some((_, n)) = vmstat
        .iter()
        .enumerate()
        .find(|(i, n)| vmstat[..*i].contains(n))
    {
        return Err(HostError::DuplicateVmstat(n.to_string()));
    }
    let present = procfs::vmstat(&read(&paths.vmstat)?);
    match vmstat.iter().find(|n| !present.contains_key(n.as_str())) {
        Some(n) => Err(HostError::UnknownVmstat(n.clone())),
        None => Ok(()),
    }
}

/// The names of `/proc/softirqs` rows that are valid instance strings.
fn softirq_kinds(paths: &ProcPaths) -> Result<Vec<String>, HostError> {
    Ok(procfs::softirqs(&read(&paths.softirqs)?)
        .into_keys()
        .filter(|n| !n.is_empty() && perfabi::name::check_instance(n).is_ok())
        .collect())
}

/// How many value slots (one per member) and families
/// [`HostSource::new`] registers on this host.
pub fn instances(paths: &ProcPaths, vmstat: &[String]) -> Result<(usize, usize), HostError> {
    let softirqs = softirq_kinds(paths)?.len();
    Ok((
        procfs::CPU_FIELDS.len() + softirqs + vmstat.len(),
        2 + vmstat.len(),
    ))
}

impl HostSource {
    /// Registers the instances in `w` and publishes a first refresh.
    pub fn new(w: &Writer, paths: ProcPaths, vmstat: &[String]) -> Result<Self, HostError> {
        check(&paths, vmstat)?;
        let abi = HostError::Abi;
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
        let softirqs = w
            .add_family(&FamilySpec::new(
                "kernel.softirqs",
                "Softirqs handled, by kind, from /proc/softirqs",
                "kind",
                Kind::Counter,
                Unit::COUNT,
            ))
            .map_err(abi)?;
        let softirq = softirq_kinds(&paths)?
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
        let mut s = Self {
            paths,
            us_per_tick: 1_000_000 / hz,
            cpu,
            softirq,
            vmstat: vm,
            values: vec![0; w.layout().nr_cpus],
        };
        s.refresh(w)?;
        Ok(s)
    }

    /// Reads the three files once and publishes every value.
    pub fn refresh(&mut self, w: &Writer) -> Result<(), HostError> {
        let times = procfs::stat_times(&read(&self.paths.stat)?);
        for (f, id) in self.cpu.iter().enumerate() {
            self.values.fill(0);
            for (&cpu, v) in &times {
                if let Some(slot) = self.values.get_mut(cpu) {
                    *slot = v[f] * self.us_per_tick;
                }
            }
            w.publish_member_per_cpu(id, &self.values)
                .map_err(HostError::Abi)?;
        }
        let sirq = procfs::softirqs(&read(&self.paths.softirqs)?);
        for (name, id) in &self.softirq {
            self.values.fill(0);
            for (&cpu, &v) in sirq.get(name).into_iter().flatten() {
                if let Some(slot) = self.values.get_mut(cpu) {
                    *slot = v;
                }
            }
            w.publish_member_per_cpu(id, &self.values)
                .map_err(HostError::Abi)?;
        }
        let vm = procfs::vmstat(&read(&self.paths.vmstat)?);
        for (name, id) in &self.vmstat {
            // A machine-wide value: all of it on CPU 0, so the sum is right.
            w.publish_member_per_cpu(id, &[vm.get(name).copied().unwrap_or(0)])
                .map_err(HostError::Abi)?;
        }
        Ok(())
    }
}
