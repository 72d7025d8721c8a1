//! Is the writer still there? Heartbeat age, process existence, flags.

use std::time::Duration;

use perfabi::layout::{FLAG_CLOSED, FLAG_KERNEL};
use perfabi::Info;

/// What a reader knows about its writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Liveness {
    /// Heartbeat fresh and process present (or the kernel module).
    Alive,
    /// The kernel module writes this segment.
    Kernel,
    /// The writer closed the segment cleanly.
    Closed,
    /// No heartbeat for longer than the allowed silence.
    Silent {
        /// Time since the last heartbeat.
        #[serde(serialize_with = "secs")]
        silent_for: Duration,
    },
    /// The writer's process is gone (or its pid now names another process).
    Dead {
        /// Time since the last heartbeat.
        #[serde(serialize_with = "secs")]
        silent_for: Duration,
    },
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Judges the writer from the header. `max_silence` is the longest gap
/// between heartbeats accepted (at least 3 promised intervals are allowed).
pub fn assess(info: &Info, max_silence: Duration) -> Liveness {
    if info.flags & FLAG_CLOSED != 0 {
        return Liveness::Closed;
    }
    if info.flags & FLAG_KERNEL != 0 {
        return Liveness::Kernel;
    }
    let silent_for =
        Duration::from_nanos(perfabi::host::boottime_ns().saturating_sub(info.heartbeat_ns));
    if info.writer_pid != 0 && !process_is(info.writer_pid, info.writer_start_ns) {
        return Liveness::Dead { silent_for };
    }
    if info.heartbeat_interval_ns > 0 {
        let allowed = max_silence.max(Duration::from_nanos(
            info.heartbeat_interval_ns.saturating_mul(3),
        ));
        if silent_for > allowed {
            return Liveness::Silent { silent_for };
        }
    }
    Liveness::Alive
}

/// Whether `pid` exists and started at `start_ns` (`CLOCK_BOOTTIME`), give
/// or take a second: a reused pid names another process.
fn process_is(pid: u64, start_ns: u64) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks existence and permission.
    let r = unsafe { libc::kill(raw, 0) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    if r != 0 && errno == Some(libc::ESRCH) {
        return false;
    }
    match perfabi::host::process_start_ns(Some(pid)) {
        Some(started) => started.abs_diff(start_ns) < 1_000_000_000,
        // No /proc: existence (or EPERM: another user's process) is all we know.
        None => r == 0 || errno == Some(libc::EPERM),
    }
}
