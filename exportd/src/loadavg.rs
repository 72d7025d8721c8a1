//! The `loadavg` collector: `/proc/loadavg`'s load averages and task
//! counts, gauges on CPU 0, named as PCP's Linux agent names them.
//!
//! * `kernel.all.load`, one instance per `interval` (`1min`, `5min`,
//!   `15min`), in thousandths (unit count × 10^-3: a load of 0.52 is 520),
//!   exactly as the kernel prints it with two decimals;
//! * `kernel.all.runnable`: tasks running or runnable now (the numerator
//!   of the fourth field);
//! * `kernel.all.nprocs`: tasks (threads) that exist (its denominator).

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{MemberId, Writer};

use crate::collectors::{Collector, Source};
use crate::follow::Room;
use crate::proc_source::{Need, Paths, SourceError};
use crate::procfs::ProcFile;

/// The `loadavg` collector.
pub const COLLECTOR: Collector = Collector {
    name: "loadavg",
    default: true,
    help: "kernel.all.load, kernel.all.runnable and kernel.all.nprocs, from /proc/loadavg",
    need: |ctx| {
        ProcFile::new(ctx.paths.proc("loadavg")).read()?;
        Ok(Need {
            families: 3,
            members: 5,
        })
    },
    start: |w, ctx| Ok(Box::new(LoadSource::new(w, &ctx.paths)?)),
};

/// The load averages' unit: thousandths of a count.
pub const LOAD_UNIT: Unit = Unit::new(0, 0, 1, 0, 0, -3, 0);

/// The load averages' instances, in the file's order.
pub const INTERVALS: [&str; 3] = ["1min", "5min", "15min"];

/// What one `/proc/loadavg` says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadAvg {
    /// The 1, 5 and 15 minute averages in thousandths; `None` where the
    /// field is missing or not a number.
    pub load: [Option<u64>; 3],
    /// Running or runnable tasks.
    pub runnable: Option<u64>,
    /// Tasks that exist.
    pub total: Option<u64>,
}

/// A decimal `12.34` (at most three decimals are kept) in thousandths;
/// `None` for anything else.
fn thousandths(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut milli = 0u64;
    for (i, b) in frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .enumerate()
    {
        milli += u64::from(b - b'0') * [100, 10, 1][i];
    }
    int.parse::<u64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(milli)
}

/// Parses `/proc/loadavg` (`0.52 0.58 0.59 2/467 12345`); a field that is
/// missing or not a number is `None`, the rest is kept.
pub fn parse(text: &str) -> LoadAvg {
    let mut f = text.lines().next().unwrap_or("").split_ascii_whitespace();
    let mut out = LoadAvg::default();
    for slot in &mut out.load {
        *slot = f.next().and_then(thousandths);
    }
    if let Some((run, total)) = f.next().and_then(|t| t.split_once('/')) {
        out.runnable = run.parse().ok();
        out.total = total.parse().ok();
    }
    out
}

/// The `loadavg` collector's source.
pub struct LoadSource {
    file: ProcFile,
    load: [MemberId; 3],
    runnable: MemberId,
    nprocs: MemberId,
}

impl LoadSource {
    /// Registers the three families in `w`.
    pub fn new(w: &Writer, paths: &Paths) -> Result<Self, SourceError> {
        let mut file = ProcFile::new(paths.proc("loadavg"));
        file.read().map_err(SourceError::Io)?;
        let add = move || -> Result<Self, perfabi::Error> {
            let load = w.add_family(&FamilySpec::new(
                "kernel.all.load",
                "Load average over the interval, from /proc/loadavg",
                "interval",
                Kind::Gauge,
                LOAD_UNIT,
            ))?;
            let one = |name: &str, help: &str| -> Result<MemberId, perfabi::Error> {
                let f = w.add_family(&FamilySpec::new(name, help, "", Kind::Gauge, Unit::COUNT))?;
                w.add_external_member(f, "", &[])
            };
            Ok(Self {
                file,
                load: [
                    w.add_external_member(load, INTERVALS[0], &[])?,
                    w.add_external_member(load, INTERVALS[1], &[])?,
                    w.add_external_member(load, INTERVALS[2], &[])?,
                ],
                runnable: one(
                    "kernel.all.runnable",
                    "Tasks running or runnable, from /proc/loadavg",
                )?,
                nprocs: one("kernel.all.nprocs", "Tasks that exist, from /proc/loadavg")?,
            })
        };
        add().map_err(SourceError::Abi)
    }
}

impl Source for LoadSource {
    /// Reads `/proc/loadavg` once and publishes what it has.
    fn refresh(&mut self, w: &Writer, _: &mut Room) -> std::io::Result<()> {
        let l = parse(&self.file.read()?);
        for (m, v) in self.load.iter().zip(l.load) {
            if let Some(v) = v {
                let _ = w.publish_member_per_cpu(m, &[v]);
            }
        }
        for (m, v) in [(&self.runnable, l.runnable), (&self.nprocs, l.total)] {
            if let Some(v) = v {
                let _ = w.publish_member_per_cpu(m, &[v]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_line_and_broken_ones() {
        let l = parse("0.52 10.08 123.40 2/467 12345\n");
        assert_eq!(l.load, [Some(520), Some(10_080), Some(123_400)]);
        assert_eq!((l.runnable, l.total), (Some(2), Some(467)));
        // Missing fields, junk, a negative, a second line.
        let l = parse("1.5 x\n9 9 9 9/9\n");
        assert_eq!(l.load, [Some(1500), None, None]);
        assert_eq!((l.runnable, l.total), (None, None));
        let l = parse("-1.00 1.2345 .5 3/x");
        assert_eq!(l.load, [None, Some(1234), None]);
        assert_eq!((l.runnable, l.total), (Some(3), None));
        assert_eq!(parse(""), LoadAvg::default());
        assert_eq!(thousandths("99999999999999999999.0"), None);
        assert_eq!(thousandths("7"), Some(7000));
    }

    #[test]
    fn the_unit_is_valid() {
        assert!(LOAD_UNIT.check());
    }
}
