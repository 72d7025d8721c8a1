//! Is the writer still there? Heartbeat age, process existence and owner,
//! flags — believing only what the segment's origin allows
//! (`spec/PERFABI.md` §10, §11.3).

use std::time::Duration;

use perfabi::layout::FLAG_CLOSED;
use perfabi::trust::{Origin, WriterClaim};
use perfabi::Info;
use rustix::io::Errno;
use rustix::process::{test_kill_current_process_group, test_kill_process, Pid, RawPid};

/// What a reader knows about its writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Liveness {
    /// The writer's process is present (its pid, start time and owner are
    /// the header's) and, if it promised a heartbeat, the last one is
    /// within the allowed silence.
    Alive,
    /// The kernel writes this segment: the kernel module (`FLAG_KERNEL` on
    /// its device), or the eBPF writer (`FLAG_KERNEL` and `writer_pid` 0 in
    /// a root's frozen pinned map) with a heartbeat within the allowed
    /// silence.
    Kernel,
    /// The writer closed the segment cleanly.
    Closed,
    /// No heartbeat for longer than the allowed silence.
    Silent {
        /// Time since the last heartbeat.
        #[serde(serialize_with = "secs")]
        silent_for: Duration,
    },
    /// The writer's process is gone, its pid now names another process (or
    /// one of another user than the segment's owner), or the header names
    /// no process that could be checked.
    Dead {
        /// Time since the last heartbeat.
        #[serde(serialize_with = "secs")]
        silent_for: Duration,
    },
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Judges the writer from the header of a segment found at `origin` and
/// owned by `owner`. `max_silence` is the longest gap between heartbeats
/// accepted (at least 3 promised intervals are allowed). `lock`: what the
/// writer's liveness lock says (`perfabi_shm::writer::live_lock::alive`;
/// `None` if it promised none): held, or not to be asked about (the
/// writer is unknown, never gone), the process is there whatever its pid
/// says (it may run in another pid namespace); not held, it is dead.
pub fn assess(
    info: &Info,
    origin: Origin,
    owner: u32,
    max_silence: Duration,
    lock: Option<bool>,
) -> Liveness {
    if info.flags & FLAG_CLOSED != 0 {
        return Liveness::Closed;
    }
    let claim = WriterClaim::of(info, origin);
    if claim == WriterClaim::Kernel && origin == Origin::KernelDevice {
        return Liveness::Kernel;
    }
    let silent_for =
        Duration::from_nanos(perfabi_shm::host::boottime_ns().saturating_sub(info.heartbeat_ns));
    let allowed = max_silence.max(Duration::from_nanos(
        info.heartbeat_interval_ns.saturating_mul(3),
    ));
    // The eBPF writer: alive while its programs run, which refresh the
    // heartbeat; silent once they are detached (its loader stopped or
    // killed), whatever the map still holds.
    if claim == WriterClaim::Kernel {
        return if silent_for > allowed {
            Liveness::Silent { silent_for }
        } else {
            Liveness::Kernel
        };
    }
    match (lock, claim) {
        (Some(true), WriterClaim::Process { .. }) => {}
        (None, WriterClaim::Process { pid, start_ns }) if process_is(pid, start_ns, owner) => {}
        _ => return Liveness::Dead { silent_for },
    }
    if info.heartbeat_interval_ns > 0 && silent_for > allowed {
        return Liveness::Silent { silent_for };
    }
    Liveness::Alive
}

/// Whether `pid` exists, started at `start_ns` (`CLOCK_BOOTTIME`) give or
/// take a second — a reused pid names another process — and runs as
/// `owner` (one of its real, effective, saved or filesystem uids): a file
/// cannot lend its owner another user's process.
fn process_is(pid: u64, start_ns: u64, owner: u32) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    let Ok(raw) = RawPid::try_from(pid) else {
        return false;
    };
    // Signal 0: existence and permission only. rustix's `Pid` is never 0;
    // kill(2) reads pid 0 as this process group, and so does this check.
    let r = match Pid::from_raw(raw) {
        Some(p) => test_kill_process(p),
        None => test_kill_current_process_group(),
    };
    if r == Err(Errno::SRCH) {
        return false;
    }
    match (
        perfabi_shm::host::process_start_ns(Some(pid)),
        process_uids(pid),
    ) {
        (Some(started), Some(uids)) => {
            started.abs_diff(start_ns) < 1_000_000_000 && uids.contains(&owner)
        }
        // /proc does not tell (not mounted, or hidepid): the claim cannot be
        // checked, unless the writer is ours — kill(2) succeeded on a pid of
        // a file we own. Another user's process (EPERM) proves nothing.
        _ => r.is_ok() && owner == perfabi_shm::safe_open::euid(),
    }
}

/// The real, effective, saved and filesystem uids of `pid` (`/proc/PID/status`).
fn process_uids(pid: u32) -> Option<[u32; 4]> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut ids = line.split_ascii_whitespace().map(|v| v.parse().ok());
    Some([ids.next()??, ids.next()??, ids.next()??, ids.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::layout::FLAG_KERNEL;

    fn kernel_info(heartbeat_ns: u64, interval_ns: u64) -> Info {
        Info {
            abi_major: 1,
            abi_minor: 1,
            epoch: 1,
            generation: 0,
            metadata_busy: false,
            writer_pid: 0,
            writer_start_ns: 0,
            heartbeat_ns,
            heartbeat_interval_ns: interval_ns,
            flags: FLAG_KERNEL,
            nr_cpus: 1,
            max_instances: 1,
            damon_capacity: 0,
            segment_size: 3 * 4096,
        }
    }

    /// A root's frozen pinned map with the kernel flag: the kernel while
    /// its heartbeat is fresh, silent once it is older than the allowed
    /// silence, unverifiable without a promise; the module's device needs
    /// no heartbeat; a file is never believed (spec §11.3).
    #[test]
    fn a_kernel_map_is_alive_by_its_heartbeat_only() {
        let now = perfabi_shm::host::boottime_ns();
        let second = 1_000_000_000;
        let silence = Duration::from_secs(5);
        let fresh = kernel_info(now, second);
        assert_eq!(
            assess(&fresh, Origin::KernelMap, 0, silence, None),
            Liveness::Kernel
        );
        let old = kernel_info(now.saturating_sub(6 * second), second);
        assert!(matches!(
            assess(&old, Origin::KernelMap, 0, silence, None),
            Liveness::Silent { .. }
        ));
        assert_eq!(
            assess(&old, Origin::KernelDevice, 0, silence, None),
            Liveness::Kernel
        );
        assert!(matches!(
            assess(&fresh, Origin::File, 0, silence, None),
            Liveness::Dead { .. }
        ));
        let no_promise = kernel_info(now, 0);
        assert!(matches!(
            assess(&no_promise, Origin::KernelMap, 0, silence, None),
            Liveness::Dead { .. }
        ));
    }
}
