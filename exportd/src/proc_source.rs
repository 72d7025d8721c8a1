//! What every `/proc` source shares (one home, so that the sources and
//! [`crate::sources`], which runs them all, import it and not each
//! other): where the files are ([`Paths`]), the room a source takes in the
//! segment ([`Need`]) and why one cannot start ([`SourceError`]).

use std::path::PathBuf;

use perfabi_shm::safe_open::escape_path;

/// Where the sources read: the roots of procfs and sysfs (other folders
/// in tests).
#[derive(Clone, Debug)]
pub struct Paths {
    /// procfs: `/proc`.
    pub proc: PathBuf,
    /// sysfs: `/sys` (`block/NAME/size`, `kernel/irq/N/actions`).
    pub sys: PathBuf,
}

impl Default for Paths {
    fn default() -> Self {
        Self {
            proc: "/proc".into(),
            sys: "/sys".into(),
        }
    }
}

impl Paths {
    /// `rel` under the procfs root (`"diskstats"`: `/proc/diskstats`).
    pub fn proc(&self, rel: &str) -> PathBuf {
        self.proc.join(rel)
    }
}

/// Room a source takes in the segment's tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Need {
    /// Family table entries.
    pub families: usize,
    /// Member table entries, and as many value slots.
    pub members: usize,
}

impl std::ops::Add for Need {
    type Output = Need;
    fn add(self, o: Need) -> Need {
        Need {
            families: self.families + o.families,
            members: self.members + o.members,
        }
    }
}

/// Why the sources cannot start.
#[derive(Debug)]
pub enum SourceError {
    /// A `/proc` file cannot be read.
    Read(PathBuf, std::io::Error),
    /// A `/proc` file cannot be read (the error names it).
    Io(std::io::Error),
    /// A configured vmstat name is not in this kernel's `/proc/vmstat`.
    UnknownVmstat(String),
    /// A vmstat name is given twice.
    DuplicateVmstat(String),
    /// Registering a family or an instance failed.
    Abi(perfabi::Error),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read(p, e) => write!(f, "cannot read {}: {e}", escape_path(p)),
            Self::Io(e) => write!(f, "cannot read {e}"),
            Self::UnknownVmstat(n) => write!(f, "--vmstat {n}: no such counter in /proc/vmstat"),
            Self::DuplicateVmstat(n) => write!(f, "--vmstat {n} is given twice"),
            Self::Abi(e) => write!(f, "cannot register host statistics: {e}"),
        }
    }
}
