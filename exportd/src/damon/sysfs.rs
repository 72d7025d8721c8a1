//! The DAMON sysfs source, for a host where the daemon may own DAMON: it
//! creates its own kdamond (a vaddr target for a pid, or paddr), with one
//! `stat` scheme matching every region, and after each aggregation asks
//! for the scheme's `tried_regions` (`update_schemes_tried_regions`), which
//! then hold every region of that aggregation.
//!
//! It changes nothing that is not its own: if any kdamond exists — in
//! DAMON sysfs or as a thread of another DAMON user (DAMON_RECLAIM, …) — it
//! refuses before writing anything. On exit it turns its kdamond off and
//! removes it.

use std::path::{Path, PathBuf};

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi_shm::safe_open::escape_path;
use perfabi_shm::writer::Writer;

use super::DamonCounters;

/// DAMON sysfs' admin folder.
pub const ADMIN: &str = "/sys/kernel/mm/damon/admin";

/// What the kdamond monitors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// One process's virtual address space.
    Vaddr(u32),
    /// The physical address space.
    Paddr,
}

/// The kdamond's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// What to monitor.
    pub target: Target,
    /// Sampling and aggregation intervals.
    pub intervals: Intervals,
    /// Bounds on the number of regions.
    pub min_regions: u32,
    /// Upper bound on the number of regions.
    pub max_regions: u32,
}

/// kdamond threads running now, from /proc (pid, comm): DAMON sysfs' and
/// any other DAMON user's.
pub fn running_kdamonds() -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(u32, String)> = dir
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            let comm = comm.trim();
            comm.starts_with("kdamond").then(|| (pid, comm.to_string()))
        })
        .collect();
    out.sort();
    out
}

fn read(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{}: {e}", escape_path(p)))
}

fn write(p: &Path, v: &str) -> Result<(), String> {
    std::fs::write(p, v).map_err(|e| format!("writing {v:?} to {}: {e}", escape_path(p)))
}

/// Whether the source could run here, and if not, why (nothing is changed).
pub fn check(admin: &Path) -> Result<(), String> {
    let kd = admin.join("kdamonds");
    let n: u32 = read(&kd.join("nr_kdamonds"))
        .map_err(|e| format!("DAMON sysfs is not available ({e})"))?
        .parse()
        .map_err(|_| format!("{}: not a number", escape_path(&kd.join("nr_kdamonds"))))?;
    if n > 0 {
        let each: Vec<String> = (0..n)
            .map(|i| {
                let d = kd.join(i.to_string());
                format!(
                    "kdamond {i} is {} (pid {})",
                    read(&d.join("state")).unwrap_or_else(|_| "?".into()),
                    read(&d.join("pid")).unwrap_or_else(|_| "?".into())
                )
            })
            .collect();
        return Err(format!(
            "DAMON sysfs already has {n} kdamond(s) that this daemon did not create ({}): \
             refusing to change them; use --source tracepoint to publish what they find",
            each.join(", ")
        ));
    }
    let threads = running_kdamonds();
    if !threads.is_empty() {
        let list: Vec<String> = threads
            .iter()
            .map(|(p, c)| format!("{c} (pid {p})"))
            .collect();
        return Err(format!(
            "kdamond threads of another DAMON user run ({}): refusing to start another; \
             use --source tracepoint to publish what they find",
            list.join(", ")
        ));
    }
    Ok(())
}

/// The kdamond this daemon created; turned off and removed when dropped.
pub struct OwnKdamond {
    kdamonds: PathBuf,
    dir: PathBuf,
    /// The kdamond's thread id (the monitor id published).
    pub pid: u64,
    intervals: Intervals,
}

impl OwnKdamond {
    /// Checks (see [`check`]), then creates and starts the kdamond.
    pub fn start(admin: &Path, o: &Options) -> Result<OwnKdamond, String> {
        check(admin)?;
        let kdamonds = admin.join("kdamonds");
        write(&kdamonds.join("nr_kdamonds"), "1")?;
        let mut own = OwnKdamond {
            dir: kdamonds.join("0"),
            kdamonds,
            pid: 0,
            intervals: o.intervals,
        };
        // From here on, dropping `own` removes what was created.
        own.configure(o)?;
        write(&own.dir.join("state"), "on").map_err(|e| format!("starting the kdamond: {e}"))?;
        own.pid = read(&own.dir.join("pid"))?
            .parse()
            .map_err(|_| "the kdamond's pid is not a number".to_string())?;
        Ok(own)
    }

    fn configure(&self, o: &Options) -> Result<(), String> {
        let ctx = self.dir.join("contexts/0");
        write(&self.dir.join("contexts/nr_contexts"), "1")?;
        let ops = match o.target {
            Target::Vaddr(_) => "vaddr",
            Target::Paddr => "paddr",
        };
        write(&ctx.join("operations"), ops)
            .map_err(|e| format!("{e} (does this kernel have DAMON_{}?)", ops.to_uppercase()))?;
        let attrs = ctx.join("monitoring_attrs");
        write(
            &attrs.join("intervals/sample_us"),
            &o.intervals.sample_us.to_string(),
        )?;
        write(
            &attrs.join("intervals/aggr_us"),
            &o.intervals.aggr_us.to_string(),
        )?;
        // Ranges are written max first so min never exceeds max.
        write(&attrs.join("nr_regions/max"), &o.max_regions.to_string())?;
        write(&attrs.join("nr_regions/min"), &o.min_regions.to_string())?;
        write(&ctx.join("targets/nr_targets"), "1")?;
        if let Target::Vaddr(pid) = o.target {
            write(&ctx.join("targets/0/pid_target"), &pid.to_string())?;
        }
        write(&ctx.join("schemes/nr_schemes"), "1")?;
        let scheme = ctx.join("schemes/0");
        write(&scheme.join("action"), "stat")?;
        // Match every region: the tried regions are then the aggregation.
        let pattern = scheme.join("access_pattern");
        for (k, max) in [
            ("sz", u64::MAX),
            ("nr_accesses", u64::from(u32::MAX)),
            ("age", u64::from(u32::MAX)),
        ] {
            write(&pattern.join(k).join("max"), &max.to_string())?;
            write(&pattern.join(k).join("min"), "0")?;
        }
        Ok(())
    }

    /// Waits for the next aggregation and returns its regions.
    pub fn collect(&self) -> Result<Vec<Region>, String> {
        write(&self.dir.join("state"), "update_schemes_tried_regions")?;
        let tried = self.dir.join("contexts/0/schemes/0/tried_regions");
        let mut idx: Vec<u32> = std::fs::read_dir(&tried)
            .map_err(|e| format!("{}: {e}", escape_path(&tried)))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        idx.sort_unstable();
        let mut regions = Vec::with_capacity(idx.len());
        for i in idx {
            let d = tried.join(i.to_string());
            let num = |k: &str| -> Result<u64, String> {
                read(&d.join(k))?
                    .parse()
                    .map_err(|_| format!("{}: not a number", escape_path(&d.join(k))))
            };
            regions.push(Region {
                start: num("start")?,
                end: num("end")?,
                nr_accesses: num("nr_accesses")? as u32,
                age: num("age")? as u32,
            });
        }
        Ok(regions)
    }

    /// Publishes every aggregation into `w` until `stop` says so.
    pub fn run(
        &self,
        w: &Writer,
        counters: &DamonCounters,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        let mut last: Option<Vec<Region>> = None;
        while !stop() {
            let regions = self.collect()?;
            if self.state()? != "on" {
                return Err("the kdamond stopped (its target exited?)".into());
            }
            // No new aggregation came (the kdamond had not applied its
            // scheme again yet): nothing to publish.
            if regions.is_empty() || last.as_ref() == Some(&regions) {
                std::thread::sleep(std::time::Duration::from_micros(
                    u64::from(self.intervals.aggr_us) / 4,
                ));
                continue;
            }
            let a = Aggregation {
                monitor_id: self.pid,
                target_id: 0,
                aggregation: 0,
                intervals: self.intervals,
                regions,
            };
            counters.publish(w, &a);
            last = Some(a.regions);
        }
        Ok(())
    }

    fn state(&self) -> Result<String, String> {
        read(&self.dir.join("state"))
    }
}

impl Drop for OwnKdamond {
    fn drop(&mut self) {
        let _ = write(&self.dir.join("state"), "off");
        if let Err(e) = write(&self.kdamonds.join("nr_kdamonds"), "0") {
            eprintln!("perfabi-exportd: removing its kdamond: {e}");
        }
    }
}
