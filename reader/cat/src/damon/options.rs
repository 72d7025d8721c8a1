//! The command line of the DAMON views over time (`--heatmap`, `--wss`):
//! its options, flattened into perfabi-cat's, and their check into a
//! [`Config`] (every value a person typed, parsed, or a one-line reason).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use perfabi_reader::Intervals;

use super::plot::{self, Format};
use super::range;
use super::term::Colour;
use super::wss::Threshold;

/// Seconds of aggregations collected from a segment without `--duration`.
pub const DEFAULT_DURATION_SECS: f64 = 10.0;

/// The options of the DAMON views over time.
#[derive(clap::Args, Debug)]
#[command(
    next_help_heading = "DAMON over time (--heatmap, --wss)",
    group(clap::ArgGroup::new("views").multiple(true))
)]
pub struct OverTime {
    /// Show DAMON's access frequency over time: a heatmap of time (across)
    /// by address (up), one per monitor and target, from a window of
    /// aggregations (collected from the segment for --duration, or read
    /// with --from).
    #[arg(long, group = "views", conflicts_with_all = ["openmetrics", "info", "record", "damon"])]
    pub heatmap: bool,
    /// Show the working set size over time and its percentiles (as damo
    /// report wss: the bytes of the regions accessed in each aggregation).
    #[arg(long, group = "views", conflicts_with_all = ["openmetrics", "info", "record", "damon"])]
    pub wss: bool,
    /// Read the aggregations from FILE instead of a segment: trace text of
    /// damon_aggregated events (ftrace or perf script), a damo record
    /// (json or json_compressed), or a perfabi-cat --record recording.
    #[arg(long, requires = "views", value_name = "FILE",
          conflicts_with_all = ["path", "watch", "duration", "window"])]
    pub from: Option<PathBuf>,
    /// Refuse --from records larger than SIZE, read or decompressed
    /// (bytes, or with K, M, G, T).
    #[arg(long, requires = "from", value_name = "SIZE", default_value = "64M",
          value_parser = crate::parse_size)]
    pub max_record_size: u64,
    /// DAMON's sampling interval of --from records that do not say it (a
    /// damo record), microseconds.
    #[arg(long, requires = "from", value_name = "US", default_value_t = 5000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub damon_sample_us: u32,
    /// DAMON's aggregation interval of --from records that do not say it,
    /// microseconds.
    #[arg(long, requires = "from", value_name = "US", default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub damon_aggr_us: u32,
    /// Collect aggregations from the segment for SECS seconds before
    /// drawing them (default 10).
    #[arg(long, requires = "views", value_name = "SECS", value_parser = crate::parse_secs, conflicts_with = "watch")]
    pub duration: Option<f64>,
    /// Keep the latest N aggregations of each monitor and target (with
    /// --watch, a rolling window; 3000 are 5 minutes of DAMON's default
    /// 100 ms aggregations).
    #[arg(long, requires = "views", value_name = "N", default_value_t = 3000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub window: u32,
    /// Draw addresses START to END (hexadecimal 0x… or decimal, with K, M,
    /// G, T; END may be +SIZE); default: the heatmap the busiest run of
    /// regions, the working set the whole address space.
    #[arg(long, requires = "views", num_args = 2, value_names = ["START", "END"])]
    pub address_range: Option<Vec<String>>,
    /// Draw times START to END, seconds since the window's first
    /// aggregation (or with ns, us, ms, s, m; END may be "end"); default:
    /// the whole window.
    #[arg(long, requires = "views", num_args = 2, value_names = ["START", "END"])]
    pub time_range: Option<Vec<String>>,
    /// Only this monitor (kdamond); default: every one, a section each.
    #[arg(long, requires = "views", value_name = "ID")]
    pub monitor: Option<u64>,
    /// Only this target of the monitor; default: every one, a section each.
    #[arg(long, requires = "views", value_name = "ID")]
    pub target: Option<u64>,
    /// Heatmap rows (address bins; the WSS chart is a third as high, 3 to
    /// 8 lines, or all of them with --wss alone); default: what fits the
    /// terminal, else 24 (an --output image: 128).
    #[arg(long, requires = "views", value_name = "N", value_parser = clap::value_parser!(u16).range(2..=4096))]
    pub rows: Option<u16>,
    /// Columns (time bins) of the heatmap and the WSS chart; default: what
    /// fits the terminal, else 72 (an --output image: 256).
    #[arg(long, requires = "views", value_name = "N", value_parser = clap::value_parser!(u16).range(2..=4096))]
    pub cols: Option<u16>,
    /// Colour the heatmap: auto (on a terminal, unless NO_COLOR is set),
    /// always or never (characters from ' ' to '@' instead).
    #[arg(long, requires = "views", value_name = "WHEN", value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// The percentiles of the working set size to show (0 to 100).
    #[arg(long, requires = "views", value_name = "P,…", value_delimiter = ',', default_value = "0,25,50,75,100",
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub percentiles: Vec<u32>,
    /// Count as working set the regions accessed in at least N samples of
    /// an aggregation (damo's --thres).
    #[arg(long, requires = "views", value_name = "N", default_value_t = 1)]
    pub wss_min_accesses: u32,
    /// Count as working set only regions of at least SIZE bytes (damo's
    /// --sz_thres; with K, M, G, T).
    #[arg(long, requires = "views", value_name = "SIZE", default_value = "1", value_parser = range::size)]
    pub wss_min_size: u64,
    /// Write the heatmap or the working set size to FILE as an image (SVG
    /// or PNG, from the name's .svg or .png) instead of drawing it as text.
    #[arg(long, requires = "views", value_name = "FILE", conflicts_with_all = ["json", "watch"])]
    pub output: Option<PathBuf>,
}

/// `--color`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour on a terminal unless `NO_COLOR` is set (and not empty).
    Auto,
    /// Colour wherever the output goes.
    Always,
    /// No colour.
    Never,
}

/// Where the aggregations come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A record file.
    Record {
        /// The file.
        path: PathBuf,
        /// `--max-record-size`: the most bytes read or decompressed.
        limit: u64,
        /// The intervals of aggregations the record does not give them.
        intervals: Intervals,
    },
    /// The segment, sampled live.
    Segment {
        /// How long to collect before a report (without `--watch`).
        duration: Duration,
    },
}

/// The views asked for, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Draw the heatmap.
    pub heatmap: bool,
    /// Show the working set size.
    pub wss: bool,
    /// Where the aggregations come from.
    pub source: Source,
    /// The latest aggregations kept per monitor and target.
    pub window: usize,
    /// `--address-range`, if given.
    pub address: Option<(u64, u64)>,
    /// `--time-range`, if given: ns from the window's start, and the end
    /// (`None`: the window's end).
    pub time: Option<(u64, Option<u64>)>,
    /// `--monitor`, if given.
    pub monitor: Option<u64>,
    /// `--target`, if given.
    pub target: Option<u64>,
    /// `--rows`, if given.
    pub rows: Option<usize>,
    /// `--cols`, if given.
    pub cols: Option<usize>,
    /// How the heatmap's cells are drawn.
    pub colour: Colour,
    /// The percentiles of the working set size.
    pub percentiles: Vec<u32>,
    /// What counts as working set.
    pub threshold: Threshold,
    /// `--output`: the image file, and its format.
    pub output: Option<(PathBuf, Format)>,
    /// `--json`: raw numbers.
    pub json: bool,
    /// `--watch`: a report every period, from a rolling window.
    pub watch: Option<Duration>,
    /// `--count`: stop after this many reports.
    pub count: Option<u64>,
}

impl OverTime {
    /// Whether a view over time was asked for.
    pub fn asked(&self) -> bool {
        self.heatmap || self.wss
    }

    /// The checked [`Config`], with perfabi-cat's `--json`, `--watch` and
    /// `--count`; or why not, in one line.
    pub fn config(
        &self,
        json: bool,
        watch: Option<f64>,
        count: Option<u64>,
    ) -> Result<Config, String> {
        if count.is_some() && watch.is_none() {
            return Err("--count counts --watch reports: give --watch SECS".into());
        }
        let output = match &self.output {
            Some(_) if self.heatmap && self.wss => {
                return Err("--output writes one image: give --heatmap or --wss, not both".into())
            }
            Some(path) => Some((path.clone(), plot::format_of(path)?)),
            None => None,
        };
        if self.damon_aggr_us < self.damon_sample_us {
            return Err(format!(
                "--damon-aggr-us {} is shorter than --damon-sample-us {}",
                self.damon_aggr_us, self.damon_sample_us
            ));
        }
        let source = match &self.from {
            Some(path) => Source::Record {
                path: path.clone(),
                limit: self.max_record_size,
                intervals: Intervals {
                    sample_us: self.damon_sample_us,
                    aggr_us: self.damon_aggr_us,
                },
            },
            None => Source::Segment {
                duration: Duration::from_secs_f64(self.duration.unwrap_or(DEFAULT_DURATION_SECS)),
            },
        };
        let mut percentiles = self.percentiles.clone();
        percentiles.sort_unstable();
        percentiles.dedup();
        Ok(Config {
            heatmap: self.heatmap,
            wss: self.wss,
            source,
            window: self.window as usize,
            address: self
                .address_range
                .as_deref()
                .map(range::address_range)
                .transpose()?,
            time: self
                .time_range
                .as_deref()
                .map(range::time_range)
                .transpose()?,
            monitor: self.monitor,
            target: self.target,
            rows: self.rows.map(usize::from),
            cols: self.cols.map(usize::from),
            colour: colour(
                self.color,
                std::io::stdout().is_terminal(),
                std::env::var("NO_COLOR").ok().as_deref(),
                std::env::var("COLORTERM").ok().as_deref(),
            ),
            percentiles,
            threshold: Threshold {
                min_accesses: self.wss_min_accesses,
                min_size: self.wss_min_size,
            },
            output,
            json,
            watch: watch.map(Duration::from_secs_f64),
            count,
        })
    }
}

/// The colour of `choice` for an output that is a terminal or not
/// (`tty`), with the environment's `NO_COLOR` and `COLORTERM`: 24-bit where
/// the terminal says it has it, else the 256-colour palette.
fn colour(
    choice: ColorChoice,
    tty: bool,
    no_color: Option<&str>,
    colorterm: Option<&str>,
) -> Colour {
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => tty && no_color.is_none_or(str::is_empty),
    };
    match (on, colorterm) {
        (false, _) => Colour::Off,
        (true, Some("truecolor" | "24bit")) => Colour::Rgb,
        (true, _) => Colour::Indexed,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Both views of a segment, every other choice the default, drawn
    /// without colour: for the tests of the modules that take a config.
    pub fn config() -> Config {
        Config {
            heatmap: true,
            wss: true,
            source: Source::Segment {
                duration: Duration::from_secs(1),
            },
            window: 100,
            address: None,
            time: None,
            monitor: None,
            target: None,
            rows: None,
            cols: None,
            colour: Colour::Off,
            percentiles: vec![0, 25, 50, 75, 100],
            threshold: Threshold::default(),
            output: None,
            json: false,
            watch: None,
            count: None,
        }
    }

    #[test]
    fn colour_on_a_terminal_only_unless_asked_and_never_against_no_color() {
        use ColorChoice::*;
        assert_eq!(colour(Auto, true, None, None), Colour::Indexed);
        assert_eq!(colour(Auto, true, None, Some("truecolor")), Colour::Rgb);
        assert_eq!(colour(Auto, false, None, Some("truecolor")), Colour::Off);
        assert_eq!(colour(Auto, true, Some("1"), None), Colour::Off);
        // An empty NO_COLOR does not count (no-color.org).
        assert_eq!(colour(Auto, true, Some(""), None), Colour::Indexed);
        assert_eq!(colour(Always, false, Some("1"), Some("24bit")), Colour::Rgb);
        assert_eq!(colour(Never, true, None, Some("truecolor")), Colour::Off);
    }
}
