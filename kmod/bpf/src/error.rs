//! Why `perfabi-bpfd` cannot run: one line each, saying what to do, and
//! the exit code of each (`perfabi-bpfd --help` lists them).

use std::fmt;
use std::io;
use std::path::PathBuf;

use perfabi_shm::safe_open::escape_path;

/// A failure to start or run the eBPF writer.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The kernel has no BTF (`/sys/kernel/btf/vmlinux`).
    NoBtf,
    /// The process lacks `CAP_BPF` and `CAP_PERFMON` (and `CAP_SYS_ADMIN`).
    NoCapabilities,
    /// Kernel lockdown forbids what the programs do (reading kernel memory).
    Lockdown(String),
    /// No bpffs where the pin goes, and none could be mounted.
    NoBpffs {
        /// The folder that should be on bpffs.
        path: PathBuf,
        /// Why mounting failed, or that the path is not under `/sys/fs/bpf`.
        why: String,
    },
    /// The pin's folder is unsafe (another user's, or writable by others),
    /// or cannot be made.
    Folder(String),
    /// Another `perfabi-bpfd` writes pins in this folder.
    Running(PathBuf),
    /// The segment could not be laid out.
    Layout(perfabi::Error),
    /// Opening or loading the BPF object failed.
    Load(String),
    /// Attaching a program failed.
    Attach(String),
    /// Filling, freezing, pinning or running the control program failed.
    Map(String),
    /// A system call failed.
    Io(String, io::Error),
    /// An instance could not be published (two of one name in a family).
    Table(String),
    /// No room in the segment for an instance (named): it is not
    /// published; the tables are sized at start from what is there then.
    NoRoom(String),
}

impl Error {
    /// The process exit code for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::NoBtf | Self::NoCapabilities | Self::Lockdown(_) => 3,
            Self::NoBpffs { .. } | Self::Folder(_) | Self::Running(_) => 4,
            Self::Layout(_) | Self::Load(_) | Self::Attach(_) | Self::Map(_) => 5,
            Self::Io(..) => 1,
            Self::Table(_) | Self::NoRoom(_) => 5,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoBtf => f.write_str(
                "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): the eBPF writer \
                 needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (Linux 5.17 or later)",
            ),
            Self::NoCapabilities => f.write_str(
                "perfabi-bpfd needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN): run it as root",
            ),
            Self::Lockdown(mode) => write!(
                f,
                "kernel lockdown is \"{}\": BPF programs may not read kernel memory; boot with \
                 lockdown=integrity or without lockdown to run the eBPF writer",
                perfabi::text::escape(mode.as_bytes())
            ),
            Self::NoBpffs { path, why } => write!(
                f,
                "no bpffs at {} ({}): mount one with `mount -t bpf bpf /sys/fs/bpf`",
                escape_path(path),
                perfabi::text::escape(why.as_bytes())
            ),
            Self::Folder(why) => write!(f, "{}", perfabi::text::escape(why.as_bytes())),
            Self::Running(p) => write!(
                f,
                "another perfabi-bpfd writes pins in {}: stop it first",
                escape_path(p)
            ),
            Self::Layout(e) => write!(f, "cannot lay the segment out: {e}"),
            Self::Load(e) => write!(
                f,
                "cannot load the BPF programs: {}",
                perfabi::text::escape(e.as_bytes())
            ),
            Self::Attach(e) => write!(
                f,
                "cannot attach the BPF programs: {}",
                perfabi::text::escape(e.as_bytes())
            ),
            Self::Map(e) => write!(f, "{}", perfabi::text::escape(e.as_bytes())),
            Self::Table(e) => write!(f, "{}", perfabi::text::escape(e.as_bytes())),
            Self::NoRoom(inst) => write!(
                f,
                "no room in the segment for {}: not published (restart perfabi-bpfd to size \
                 the segment for what is there now)",
                perfabi::text::escape(inst.as_bytes())
            ),
            Self::Io(what, e) => write!(
                f,
                "{}: {}",
                perfabi::text::escape(what.as_bytes()),
                perfabi::text::escape(e.to_string().as_bytes())
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<perfabi::Error> for Error {
    fn from(e: perfabi::Error) -> Self {
        Self::Layout(e)
    }
}
