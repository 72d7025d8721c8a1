//! The daemon's own CPU use, as the kernel accounts it in
//! `/proc/self/stat`: user and system time of every thread of the process
//! (the refresh loop and the DAMON source's thread), in clock ticks
//! (`sysconf(_SC_CLK_TCK)`, 100 a second on Linux), against wall-clock
//! time. The daemon prints it when it stops, and every `--cpu-report SECS`
//! while it runs, as one line:
//!
//! ```text
//! perfabi-exportd: used 0.08% of a core over 60.0 s (utime 0.03 s, stime 0.02 s, 61 refreshes)
//! ```
//!
//! A tick is 10 ms: over 60 s the figure is exact to about 0.02% of a
//! core.

use std::fmt;
use std::time::{Duration, Instant};

use perfabi_shm::host::stat_field;
use perfabi_shm::safe_open::escape_path;

use crate::procfs::ProcFile;

/// The user and system times of `/proc/PID/stat` (fields 14 and 15), in
/// clock ticks. The command name (field 2) is in parentheses and may hold
/// spaces and parentheses itself, so the fields are counted from the last
/// `)`. `None` if the text is not such a line.
///
/// ```
/// let line = "4242 (perf ab) d) S 1 4242 4242 0 -1 4194560 220 0 0 0 7 3 0 0 20 0 2 0";
/// assert_eq!(perfabi_exportd::cpu::stat_times(line), Some((7, 3)));
/// assert_eq!(perfabi_exportd::cpu::stat_times("4242 (x) S 1 2"), None);
/// ```
pub fn stat_times(text: &str) -> Option<(u64, u64)> {
    // utime is field 14, stime 15.
    Some((stat_field(text, 14)?, stat_field(text, 15)?))
}

/// The process's CPU time at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// User time, clock ticks.
    pub utime: u64,
    /// System time, clock ticks.
    pub stime: u64,
    /// When it was read.
    pub at: Instant,
}

impl Sample {
    /// No CPU time at `at`: the process's start.
    pub fn start(at: Instant) -> Self {
        Self {
            utime: 0,
            stime: 0,
            at,
        }
    }
}

/// Reads this process's `/proc/self/stat` again and again (kept open, into
/// one buffer).
pub struct Clock {
    file: ProcFile,
    hz: u64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// `/proc/self/stat`, not read yet.
    pub fn new() -> Self {
        Self {
            file: ProcFile::new("/proc/self/stat"),
            hz: rustix::param::clock_ticks_per_second().max(1),
        }
    }

    /// The CPU time used so far by every thread of this process.
    pub fn sample(&mut self) -> std::io::Result<Sample> {
        let text = self.file.read()?;
        let (utime, stime) = stat_times(&text).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: no utime and stime", escape_path(self.file.path())),
            )
        })?;
        Ok(Sample {
            utime,
            stime,
            at: Instant::now(),
        })
    }

    /// The CPU use between `from` and `to`.
    pub fn used(&self, from: &Sample, to: &Sample) -> Use {
        Use {
            utime: to.utime.saturating_sub(from.utime),
            stime: to.stime.saturating_sub(from.stime),
            hz: self.hz,
            wall: to.at.saturating_duration_since(from.at),
            refreshes: 0,
            last: false,
        }
    }
}

/// CPU time used over a stretch of wall-clock time; displayed as the
/// daemon's report line (without the `perfabi-exportd: ` prefix).
#[derive(Clone, Copy, Debug)]
pub struct Use {
    /// User time, clock ticks.
    pub utime: u64,
    /// System time, clock ticks.
    pub stime: u64,
    /// Clock ticks per second.
    pub hz: u64,
    /// The wall-clock time it was used over.
    pub wall: Duration,
    /// Refreshes of the host statistics in that time.
    pub refreshes: u64,
    /// Whether it is the last stretch of a periodic report (`over the
    /// last N s`) rather than the whole run (`over N s`).
    pub last: bool,
}

impl Use {
    /// With the refreshes done in the stretch.
    pub fn refreshes(self, n: u64) -> Self {
        Self {
            refreshes: n,
            ..self
        }
    }

    /// Marked as the last stretch of a periodic report.
    pub fn periodic(self) -> Self {
        Self { last: true, ..self }
    }

    /// CPU seconds (user + system).
    pub fn cpu_secs(&self) -> f64 {
        (self.utime + self.stime) as f64 / self.hz as f64
    }

    /// Percent of one core: CPU seconds per wall-clock second × 100; 0
    /// over no time.
    pub fn percent(&self) -> f64 {
        let wall = self.wall.as_secs_f64();
        if wall > 0.0 {
            100.0 * self.cpu_secs() / wall
        } else {
            0.0
        }
    }
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = |t: u64| t as f64 / self.hz as f64;
        write!(
            f,
            "used {:.2}% of a core over {}{:.1} s (utime {:.2} s, stime {:.2} s, {} refresh{})",
            self.percent(),
            if self.last { "the last " } else { "" },
            self.wall.as_secs_f64(),
            secs(self.utime),
            secs(self.stime),
            self.refreshes,
            if self.refreshes == 1 { "" } else { "es" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines_and_refuses_junk() {
        // This machine's own line, twice: the times never go back.
        let mut c = Clock::new();
        let a = c.sample().unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let b = c.sample().unwrap();
        assert!(b.utime + b.stime >= a.utime + a.stime);
        assert!(b.at >= a.at);
        for junk in [
            "",
            "1 (x)",
            "1 x S 1 2 3 4 5 6 7 8 9 10 11 12",
            "1 (x) S 1 2 3 4 5 6 7 8 9 10 -1 12",
            "1 (x) S 1 2 3 4 5 6 7 8 9 10 99999999999999999999999 12",
        ] {
            assert_eq!(stat_times(junk), None, "{junk:?}");
        }
        assert_eq!(
            stat_times("1 (a) b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13"),
            Some((11, 12))
        );
    }

    #[test]
    fn the_report_line() {
        let t0 = Instant::now();
        let u = Use {
            utime: 8,
            stime: 5,
            hz: 100,
            wall: Duration::from_secs(60),
            refreshes: 0,
            last: false,
        }
        .refreshes(60);
        assert_eq!(
            u.to_string(),
            "used 0.22% of a core over 60.0 s (utime 0.08 s, stime 0.05 s, 60 refreshes)"
        );
        assert_eq!(
            u.refreshes(1).periodic().to_string(),
            "used 0.22% of a core over the last 60.0 s (utime 0.08 s, stime 0.05 s, 1 refresh)"
        );
        let c = Clock::new();
        let none = c.used(&Sample::start(t0), &Sample::start(t0));
        assert_eq!(none.percent(), 0.0);
    }
}
