//! [`PerfabiBuilder`]: where the recorder writes, its capacities and
//! histogram buckets, then [`install`](PerfabiBuilder::install).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use perfabi_shm::directory;
use perfabi_shm::writer::{Config, CreateError, Writer};

use crate::PerfabiRecorder;
use perfabi::GaugeMode;

/// What the builder sets for single metrics, by exact name.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerMetric {
    /// Explicit histogram bounds, in the metric's described unit.
    pub buckets: HashMap<String, Vec<f64>>,
    /// Gauges' merge modes.
    pub gauge_modes: HashMap<String, GaugeMode>,
}

/// Why a recorder could not be built or installed.
#[derive(Debug)]
pub enum BuildError {
    /// The segment could not be created.
    Create(CreateError),
    /// The recorder's own family could not be registered in it.
    Segment(perfabi::Error),
    /// Buckets given to [`PerfabiBuilder::buckets_for_metric`] that perfabi
    /// cannot hold.
    Buckets(String),
    /// A recorder is installed already in this process.
    AlreadyInstalled,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Create(e) => write!(f, "cannot create the perfabi segment: {e}"),
            BuildError::Segment(e) => write!(
                f,
                "cannot register the recorder's family in the segment: {e}; give it family tables (Config::max_families)"
            ),
            BuildError::Buckets(why) => write!(f, "bad histogram buckets: {why}"),
            BuildError::AlreadyInstalled => write!(
                f,
                "a metrics recorder is installed already in this process; install one only"
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Create(e) => Some(e),
            BuildError::Segment(e) => Some(e),
            _ => None,
        }
    }
}

/// Builds a [`PerfabiRecorder`]: where its segment is, how large, and the
/// buckets of histograms that should not have the default ones.
///
/// ```no_run
/// perfabi_metrics::PerfabiBuilder::new()
///     .name("myapp") // /dev/shm/perfabi-<euid>/myapp.<pid>.<nonce>.perfabi
///     .buckets_for_metric("http.latency", &[0.001, 0.01, 0.1, 1.0])?
///     .install()?;
/// metrics::counter!("http.requests").increment(1);
/// # Ok::<(), perfabi_metrics::BuildError>(())
/// ```
#[derive(Clone, Debug)]
pub struct PerfabiBuilder {
    place: Place,
    config: Config,
    per_metric: PerMetric,
}

/// Where the segment is written.
#[derive(Clone, Debug)]
enum Place {
    /// A file of its own name in a segment directory (`None`: the default
    /// one), named after the writer `name` (`None`: the program's name).
    Directory(Option<PathBuf>, Option<String>),
    /// One path.
    Path(PathBuf),
}

impl Default for PerfabiBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PerfabiBuilder {
    /// A builder with the defaults: a segment of its own in the default
    /// segment directory ([`directory::default_dir`]: `$PERFABI_DIR`, else
    /// `/dev/shm/perfabi-<euid>`), named after the program
    /// (`<program>.<pid>.<nonce>.perfabi`), so that one reader sees every
    /// process of the user's; room for 256 families, 1,024 series and
    /// 8,192 values (a histogram series takes 34), one block per possible
    /// CPU, a heartbeat each second kept by the writer's own thread, no
    /// DAMON ring.
    pub fn new() -> Self {
        Self {
            place: Place::Directory(None, None),
            config: Config {
                max_instances: 8192,
                max_families: 256,
                max_members: 1024,
                damon_capacity: 0,
                heartbeat_interval: Duration::from_secs(1),
                ..Config::default()
            },
            per_metric: PerMetric::default(),
        }
    }

    /// Writes the segment in the segment directory `dir` instead of the
    /// default one (created if absent, refused if another user could
    /// replace its files: [`Writer::create_in`]).
    pub fn directory(mut self, dir: impl Into<PathBuf>) -> Self {
        let name = match self.place {
            Place::Directory(_, name) => name,
            Place::Path(_) => None,
        };
        self.place = Place::Directory(Some(dir.into()), name);
        self
    }

    /// Names the segment's file in its directory after `name` (1 to 64
    /// ASCII letters, digits, `_` or `-`) instead of the program's name.
    pub fn name(mut self, name: &str) -> Self {
        let dir = match self.place {
            Place::Directory(dir, _) => dir,
            Place::Path(_) => None,
        };
        self.place = Place::Directory(dir, Some(name.to_string()));
        self
    }

    /// Writes the segment at `path` (replacing a segment there), not in a
    /// segment directory.
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.place = Place::Path(path.into());
        self
    }

    /// The writer's configuration (capacities, heartbeat), instead of the
    /// defaults of [`new`](Self::new).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Explicit bucket bounds for the histogram `name` (its exact name),
    /// in its described unit (`0.001` is a millisecond in a histogram
    /// described in seconds): 1 to 31 finite, non-negative, strictly
    /// increasing values; a last `+Inf` bucket follows them. Other
    /// histograms have `LOG2` buckets. Bounds that stop increasing once
    /// scaled to integers in the stored unit (nanoseconds, bytes, …) are
    /// refused when the histogram is registered (reason `buckets`).
    pub fn buckets_for_metric(mut self, name: &str, bounds: &[f64]) -> Result<Self, BuildError> {
        let max = perfabi::layout::MAX_BUCKETS as usize - 1;
        if bounds.is_empty() || bounds.len() > max {
            return Err(BuildError::Buckets(format!(
                "{}: {} bounds, not 1 to {max}",
                name.escape_debug(),
                bounds.len()
            )));
        }
        if bounds.iter().any(|b| !b.is_finite() || *b < 0.0)
            || bounds.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(BuildError::Buckets(format!(
                "{}: {bounds:?} are not finite, non-negative and strictly increasing",
                name.escape_debug()
            )));
        }
        self.per_metric
            .buckets
            .insert(name.to_string(), bounds.to_vec());
        Ok(self)
    }

    /// How the gauge `name` (its exact name) merges across the writers of
    /// a segment directory (spec §15.4): [`GaugeMode::Sum`] by default,
    /// or the largest or smallest live writer's value, or one series per
    /// writer. It applies when `name` is registered as a gauge; a counter
    /// or histogram of that name ignores it.
    pub fn gauge_mode_for_metric(mut self, name: &str, mode: GaugeMode) -> Self {
        self.per_metric.gauge_modes.insert(name.to_string(), mode);
        self
    }

    /// Creates the segment and the recorder, without installing it (for
    /// `metrics::with_local_recorder`, or a recorder layered by hand).
    ///
    /// The segment's writer lives as long as the process: `metrics`'
    /// handles must be `'static`, so it is never dropped, and readers see
    /// the segment's writer gone when the process exits.
    pub fn build(self) -> Result<PerfabiRecorder, BuildError> {
        let writer = match &self.place {
            Place::Path(path) => Writer::create(path, &self.config),
            Place::Directory(dir, name) => Writer::create_in(
                dir.clone().unwrap_or_else(directory::default_dir),
                name.as_deref().unwrap_or(&directory::program_name()),
                &self.config,
            ),
        }
        .map_err(BuildError::Create)?;
        let writer: &'static Writer = Box::leak(Box::new(writer));
        PerfabiRecorder::new(writer, self.per_metric).map_err(BuildError::Segment)
    }

    /// Builds the recorder and installs it as the process's global
    /// `metrics` recorder; returns its writer (its path, its health). If a
    /// recorder is installed already, the new segment is removed again and
    /// the error says so.
    ///
    /// Install in the process that updates the metrics: a child made by
    /// `fork()` after the install writes into its parent's segment with
    /// the parent's process-private update state, which perfabi's writer
    /// does not share across processes (install in each worker after it
    /// forks; each then has a segment of its own in the directory).
    pub fn install(self) -> Result<&'static Writer, BuildError> {
        let recorder = self.build()?;
        let writer = recorder.writer();
        if metrics::set_global_recorder(recorder).is_err() {
            // A segment made for nothing: no reader should find it.
            if let Some(p) = writer.path() {
                let _ = std::fs::remove_file(p);
            }
            return Err(BuildError::AlreadyInstalled);
        }
        Ok(writer)
    }
}
