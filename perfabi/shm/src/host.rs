//! Facts about the host that writers and readers both need: the clock of
//! heartbeats, process start times (to tell a writer from a process reusing
//! its pid) and the number of possible CPUs.

/// `CLOCK_BOOTTIME` in nanoseconds (the clock of `heartbeat_ns`).
pub fn boottime_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// `CLOCK_BOOTTIME` nanoseconds at which process `pid` (`None`: this one)
/// started: field 22 of `/proc/PID/stat`, in clock ticks. `None` if the
/// process or `/proc` is not there.
pub fn process_start_ns(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    let ticks = stat_field(&stat, 22)?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Some(ticks.saturating_mul(1_000_000_000 / hz))
}

/// Field `n` (numbered from 1 as in proc(5), `n >= 3`) of the text of a
/// `/proc/PID/stat` file, as a number. The command name (field 2) may
/// hold spaces and parentheses: fields are counted after its last `)`.
pub fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace()
        .nth(n.checked_sub(3)?)?
        .parse()
        .ok()
}

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`: the highest
/// id + 1), or `None` if it cannot be read.
pub fn possible_cpus() -> Option<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
    let last = s
        .trim()
        .split([',', '-'])
        .filter_map(|x| x.parse::<usize>().ok())
        .max()?;
    Some(last + 1)
}
