//! The collector registry's types, and which collectors run.
//!
//! Each source module declares its collector(s) as a [`Collector`]: a
//! name, whether it is on by default, one line of help, what it needs of
//! the segment and how it starts. [`crate::sources::ALL`] lists them, and
//! the command line's `--collector.NAME`, `--no-collector.NAME` and
//! `--collector.disable-defaults` are generated from that list
//! ([`flags`], [`Selection::from_matches`]), as node_exporter's
//! `registerCollector` table generates its flags.

use std::time::Duration;

use perfabi_shm::writer::Writer;

use crate::filter::Filter;
use crate::follow::Room;
use crate::proc_source::{Need, Paths, SourceError};
use crate::statfs::StatFn;

/// One refresh of a running collector.
pub trait Source {
    /// Reads its files once and publishes every value; on an error its
    /// values stay as they were (the error is logged by the caller).
    fn refresh(&mut self, w: &Writer, room: &mut Room) -> std::io::Result<()>;
}

/// A collector: what `--collector.NAME` turns on.
pub struct Collector {
    /// Its name in the flags (`diskstats`: `--collector.diskstats`).
    pub name: &'static str,
    /// Whether it runs when not named.
    pub default: bool,
    /// What it publishes, one line (in `--help`).
    pub help: &'static str,
    /// The families and members it registers on this host now; an error
    /// reading its files needs nothing (it will be left out).
    pub need: fn(&Context) -> std::io::Result<Need>,
    /// Registers its families in the segment. An [`SourceError::Io`]
    /// leaves it out with one log line; any other error stops the daemon.
    pub start: Start,
}

/// How a collector starts: its source, registered in the segment.
pub type Start = fn(&Writer, &Context) -> Result<Box<dyn Source>, SourceError>;

/// Everything a collector is configured with.
#[derive(Clone, Debug)]
pub struct Context {
    /// Where the files are.
    pub paths: Paths,
    /// The `/proc/vmstat` values of the vmstat collector.
    pub vmstat: Vec<String>,
    /// Which disks the diskstats collector publishes.
    pub disks: Filter,
    /// Which interfaces the netdev collector publishes.
    pub interfaces: Filter,
    /// The filesystem collector's options.
    pub filesystem: FsOptions,
    /// The cgroups collector's options.
    pub cgroups: CgroupOptions,
}

impl Context {
    /// The defaults, with the files under `paths` (tests).
    pub fn new(paths: Paths) -> Self {
        Self {
            paths,
            vmstat: Vec::new(),
            disks: Filter::default(),
            interfaces: Filter::default(),
            filesystem: FsOptions::default(),
            cgroups: CgroupOptions::default(),
        }
    }
}

/// The filesystem collector's options.
#[derive(Clone)]
pub struct FsOptions {
    /// Mount points left out (by their path).
    pub mount_points: Filter,
    /// Filesystem types left out.
    pub fs_types: Filter,
    /// How long one `statfs` may take before its mount is marked stuck.
    pub timeout: Duration,
    /// The call that asks ([`crate::statfs::statvfs`]; another in tests).
    pub stat: StatFn,
}

impl std::fmt::Debug for FsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsOptions")
            .field("mount_points", &self.mount_points)
            .field("fs_types", &self.fs_types)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Default for FsOptions {
    /// No pattern, a timeout of 0.5 s, `statvfs`.
    fn default() -> Self {
        Self {
            mount_points: Filter::default(),
            fs_types: Filter::default(),
            timeout: Duration::from_millis(500),
            stat: std::sync::Arc::new(crate::statfs::statvfs),
        }
    }
}

/// The cgroups collector's options.
#[derive(Clone, Debug)]
pub struct CgroupOptions {
    /// The cgroup v2 hierarchy's root; `None`: the first `cgroup2` mount
    /// of `/proc/self/mountinfo`.
    pub root: Option<std::path::PathBuf>,
    /// The most cgroups published; the others are counted as dropped.
    pub max: usize,
    /// How deep below the root cgroups are published (the root is 0).
    pub depth: usize,
}

impl Default for CgroupOptions {
    fn default() -> Self {
        Self {
            root: None,
            max: 1000,
            depth: 2,
        }
    }
}

/// The id of a generated flag.
fn on_id(name: &str) -> String {
    format!("collector.{name}")
}

fn off_id(name: &str) -> String {
    format!("no-collector.{name}")
}

/// `--collector.disable-defaults`'s id.
const DISABLE_DEFAULTS: &str = "collector.disable-defaults";

/// `cmd` with `--collector.NAME` and `--no-collector.NAME` for each of
/// `all`, and `--collector.disable-defaults`.
pub fn flags(mut cmd: clap::Command, all: &[Collector]) -> clap::Command {
    use clap::{Arg, ArgAction};
    cmd = cmd.arg(
        Arg::new(DISABLE_DEFAULTS)
            .long(DISABLE_DEFAULTS)
            .action(ArgAction::SetTrue)
            .help("Run only the collectors enabled by name (--collector.NAME)"),
    );
    for c in all {
        let state = if c.default { "enabled" } else { "disabled" };
        cmd = cmd
            .arg(
                Arg::new(on_id(c.name))
                    .long(on_id(c.name))
                    .action(ArgAction::SetTrue)
                    .overrides_with(on_id(c.name))
                    .help(format!(
                        "Enable the {} collector [default: {state}]: {}",
                        c.name, c.help
                    )),
            )
            .arg(
                Arg::new(off_id(c.name))
                    .long(off_id(c.name))
                    .action(ArgAction::SetTrue)
                    .overrides_with(off_id(c.name))
                    .help(format!("Disable the {} collector", c.name)),
            );
    }
    cmd
}

/// Which collectors run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    on: Vec<&'static str>,
}

impl Selection {
    /// The defaults of `all`.
    pub fn defaults(all: &[Collector]) -> Self {
        Self {
            on: all.iter().filter(|c| c.default).map(|c| c.name).collect(),
        }
    }

    /// Exactly the collectors named `names` (of `all`).
    pub fn only(all: &[Collector], names: &[&str]) -> Self {
        Self {
            on: all
                .iter()
                .filter(|c| names.contains(&c.name))
                .map(|c| c.name)
                .collect(),
        }
    }

    /// From the flags [`flags`] added: each collector's default (none
    /// with `--collector.disable-defaults`), then `--collector.NAME` or
    /// `--no-collector.NAME`, the later of the two winning when both are
    /// given (as node_exporter's flags do).
    pub fn from_matches(all: &[Collector], m: &clap::ArgMatches) -> Self {
        let none = m.get_flag(DISABLE_DEFAULTS);
        let last = |id: &str| {
            (m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
                .then(|| m.index_of(id))
                .flatten()
        };
        let on = all
            .iter()
            .filter(|c| match (last(&on_id(c.name)), last(&off_id(c.name))) {
                (Some(a), Some(b)) => a > b,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => c.default && !none,
            })
            .map(|c| c.name)
            .collect();
        Self { on }
    }

    /// Whether `name` runs.
    pub fn runs(&self, name: &str) -> bool {
        self.on.contains(&name)
    }

    /// The collectors that run, in the registry's order.
    pub fn names(&self) -> &[&'static str] {
        &self.on
    }
}
