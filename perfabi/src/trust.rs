//! What a reader may believe about a segment's writer (`spec/PERFABI.md`
//! §11.3): the header's claims are only as good as the file they are in.
//!
//! Anyone who can create a file can write `FLAG_KERNEL` or any `writer_pid`
//! into it. The kernel flag is therefore believed only from the kernel
//! module's own device (a character device owned by root) and from a frozen
//! BPF map pinned by root on bpffs (the eBPF writer's); everywhere else a
//! writer is a process that the reader checks exists, started when the
//! header says and runs as the file's owner.

use crate::layout::FLAG_KERNEL;
use crate::view::Info;

/// Where a reader found the segment, as far as trust goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A character device owned by root and not writable by others: the
    /// kernel module's `/dev/perfabi`.
    KernelDevice,
    /// A frozen `BPF_F_MMAPABLE` array map pinned on a bpffs mount, the pin
    /// owned by root: the eBPF writer's segment (§9.1). No process can
    /// write it; only BPF programs, which only root could load.
    KernelMap,
    /// A file (tmpfs, memfd, any other filesystem; a pin of another owner
    /// than root).
    File,
}

/// Who the header says writes the segment, after the rules of §11.3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriterClaim {
    /// The kernel: `FLAG_KERNEL` on the kernel module's device, or with
    /// `writer_pid` 0 in a root's frozen pinned BPF map. There is no
    /// process to check: the module's device is alive while it exists, a
    /// BPF writer by its heartbeat.
    Kernel,
    /// A process, to be checked: it exists, started at `start_ns`
    /// (`CLOCK_BOOTTIME`, within a second) and runs as the file's owner.
    Process {
        /// `writer_pid`.
        pid: u64,
        /// `writer_start_ns`.
        start_ns: u64,
    },
    /// Nothing checkable: `writer_pid` 0 outside the kernel device (a file
    /// claiming `FLAG_KERNEL` is such a case). Readers treat the writer as
    /// gone.
    Unverifiable,
}

impl WriterClaim {
    /// The claim `info` makes, read from a segment found at `origin`.
    pub fn of(info: &Info, origin: Origin) -> Self {
        match origin {
            Origin::KernelDevice if info.flags & FLAG_KERNEL != 0 => Self::Kernel,
            // A BPF writer has no device whose existence says it runs: its
            // heartbeat does, so one that promises none is unverifiable.
            Origin::KernelMap
                if info.flags & FLAG_KERNEL != 0
                    && info.writer_pid == 0
                    && info.heartbeat_interval_ns > 0 =>
            {
                Self::Kernel
            }
            _ if info.writer_pid == 0 => Self::Unverifiable,
            _ => Self::Process {
                pid: info.writer_pid,
                start_ns: info.writer_start_ns,
            },
        }
    }

    /// Lower-case text, as in the test vectors.
    pub fn describe(&self) -> alloc::string::String {
        match self {
            Self::Kernel => "kernel".into(),
            Self::Process { pid, start_ns } => alloc::format!("process {pid} started {start_ns}"),
            Self::Unverifiable => "unverifiable".into(),
        }
    }
}
