//! perfabi-cat: print the metric families, counters and DAMON regions of a
//! perfabi segment.

mod damon;
mod human;
mod json;
mod live;
mod rates;
mod render;
mod screen;
mod source;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use perfabi_reader::directory::{
    check_writer_label, Directory, DirectoryOptions, DEFAULT_MAX_SEGMENTS,
};
use perfabi_reader::view::Families;
use perfabi_reader::{Error, Options, Segment, Snapshot, Trust};
use perfabi_shm::safe_open::escape_path;

use source::{Read, Source};

const EXIT_HELP: &str = "\
Exit status:
  0  success
  1  an I/O error (permission, a file that cannot be mapped, read or written)
  2  bad command line, or DAMON ranges and choices the data does not fit (an
     address or time range outside it, no such --monitor or --target)
  3  no segment at PATH (is the exporter running?), or no --from record
  4  the segment or --from record is malformed, of an unknown ABI, or refused
     (a symbolic link, not a regular file or the module's device, writable by
     others, owned by an untrusted user, with holes, or larger than --max-size
     or --max-record-size)
  5  the segment is busy, its writer is gone, or it was truncated or changed
     under the reader, or no DAMON aggregation came in --duration: retry later
     (--watch skips a sample of a busy, truncated or re-created segment and
     goes on)

PATH defaults to $PERFABI_SEGMENT, else /dev/perfabi (kernel module), else
/sys/fs/bpf/perfabi/kernel (perfabi-bpfd, the eBPF writer), else
/dev/shm/perfabi.seg (perfabi-exportd) if it exists, else the default
segment directory ($PERFABI_DIR, else /dev/shm/perfabi-<euid>) if it
exists. A segment is read only if it belongs to this user or root (see
--trust-uid), and symbolic links are not followed.

A directory: PATH may name a directory of segments (spec/PERFABI.md section
15), read as one: families of one name merged (counters and histograms
summed, dead writers' counts kept; gauges of live writers by the family's
mode), each series a total (no per-CPU values). The table, --json,
--openmetrics and --watch work on it; --writer-label keeps writers apart.
A file refused, a family whose metadata differ between two files (refused
whole, naming both) or --max-segments reached is left out and said on
stderr (in --json, under \"problems\"), and the rest is printed. With
--watch, a merged total that fell (a writer's file left the merge, a
conflict appeared) shows \"(fell)\" for that interval, never a negative
rate. --cpu, --damon, --info, --record and the DAMON views over time do not
apply to a directory.";

/// Longest --watch interval: a day.
const MAX_WATCH_SECS: f64 = 86_400.0;

/// `--watch SECS`: a number of seconds from 0.01 to a day.
fn parse_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if v.is_finite() && (0.01..=MAX_WATCH_SECS).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{s} must be between 0.01 and {MAX_WATCH_SECS} seconds"
        ))
    }
}

/// `--max-size SIZE`: bytes, or with a binary suffix K, M, G or T.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim_end_matches(['B', 'b']).trim_end_matches(['i', 'I']);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        Some((i, 't' | 'T')) => (&t[..i], 40),
        _ => (t, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n >= 4096)
        .ok_or_else(|| format!("{s:?} is not a size of at least 4096 bytes (such as 8G)"))
}

/// A `--writer-label KEY` ([`check_writer_label`]).
fn parse_label(s: &str) -> Result<String, String> {
    check_writer_label(s).map(|()| s.to_string())
}

/// Print the metric families, counters and DAMON regions of a perfabi
/// segment. The table shows values in human units (bytes with KiB, MiB...;
/// times in ns, µs, ms, s; counts exactly); --json and --openmetrics show
/// them exactly.
#[derive(Parser, Debug)]
#[command(name = "perfabi-cat", version, after_help = EXIT_HELP)]
struct Args {
    /// Segment file (see below for the default).
    path: Option<PathBuf>,
    /// Show per-CPU values (table and OpenMetrics).
    #[arg(long)]
    cpu: bool,
    /// Print JSON (with --heatmap or --wss: the grid, the series and the
    /// percentiles as raw numbers).
    #[arg(long, conflicts_with = "openmetrics")]
    json: bool,
    /// Print OpenMetrics (Prometheus) text exposition.
    #[arg(long)]
    openmetrics: bool,
    /// Show per-second rates every SECS seconds (0.01 to 86400) until
    /// interrupted: on a terminal, a screen redrawn in place (keys: q quit,
    /// s sort, / filter, c per-CPU, p pause); otherwise, and with --count,
    /// one block of lines per interval. With --heatmap or --wss: those
    /// views every SECS, of a rolling --window of aggregations (redrawn in
    /// place where the live view would be, q quits).
    #[arg(long, value_name = "SECS", value_parser = parse_secs, conflicts_with = "openmetrics")]
    watch: Option<f64>,
    /// With --watch or --record: stop after this many intervals (1 or more;
    /// with --heatmap or --wss, reports).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Show DAMON regions: a table and a heatmap of access frequency.
    #[arg(long, conflicts_with_all = ["openmetrics", "watch"])]
    damon: bool,
    /// Heatmap width in characters (8 to 4096).
    #[arg(long, default_value_t = 64, value_name = "COLS",
          value_parser = clap::value_parser!(u16).range(8..=4096))]
    width: u16,
    /// Show the header: ABI, epoch, generation, writer, liveness.
    #[arg(long, conflicts_with_all = ["openmetrics", "watch", "damon"])]
    info: bool,
    /// Append a timestamped snapshot (counters and DAMON aggregations, one
    /// JSON line) to FILE every --watch SECS (default 1) until interrupted
    /// or --count; perfabi-exportd --replay reads it back.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["openmetrics", "damon", "info"])]
    record: Option<PathBuf>,
    /// Print the last values of a writer that is gone (closed, dead or
    /// silent) instead of failing with exit 5.
    #[arg(long)]
    allow_stale: bool,
    /// A directory: keep each writer's series apart under the label KEY
    /// (default `writer`; its value: `<name>.<pid>` of the segment file)
    /// instead of merging them.
    #[arg(long, value_name = "KEY", num_args = 0..=1, require_equals = true,
          default_missing_value = perfabi_reader::directory::WRITER_LABEL,
          value_parser = parse_label)]
    writer_label: Option<String>,
    /// A directory: most segment files read (default 10000; the rest are
    /// left out, and said).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_segments: Option<u32>,
    /// Also read segments owned by this uid (repeatable); by default only
    /// this user's and root's are read.
    #[arg(long, value_name = "UID")]
    trust_uid: Vec<u32>,
    /// Read segments of any owner (their writer must still run as the
    /// file's owner to count as alive).
    #[arg(long, conflicts_with = "trust_uid")]
    trust_anyone: bool,
    /// Refuse segments larger than SIZE (bytes, or with K, M, G, T).
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = parse_size)]
    max_size: u64,
    /// DAMON over time.
    #[command(flatten)]
    over_time: damon::options::OverTime,
}

fn exit_code(e: &Error) -> u8 {
    match e {
        Error::NotFound(_) => 3,
        Error::Abi(_)
        | Error::Symlink(_)
        | Error::ForeignLink { .. }
        | Error::NotASegmentFile(..)
        | Error::Writable(..)
        | Error::WritablePin(..)
        | Error::Untrusted { .. }
        | Error::Sparse { .. }
        | Error::TooLarge { .. } => 4,
        Error::Busy(_)
        | Error::Stale { .. }
        | Error::Closed
        | Error::Truncated(_)
        | Error::HeaderChanged(_)
        | Error::Raced(_) => 5,
        _ => 1,
    }
}

/// An error of perfabi-cat itself: a reader error, stdout closed early, a
/// --record file refused, DAMON views over time that cannot be drawn, or
/// options that do not apply to what PATH is.
enum Failure {
    Read(Error),
    Usage(String),
    Output(io::Error),
    Record(perfabi_shm::safe_open::PathError),
    Damon(damon::problem::Problem),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::Read(e)
    }
}
impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Self::Output(e)
    }
}

fn main() -> ExitCode {
    perfabi_man::print_if_asked(perfabi_man::Page::of::<Args>);
    let args = Args::parse();
    match run(&args) {
        // A view a signal ended: 128 + the signal, as in line mode.
        Ok(()) => screen::exit_status().map_or(ExitCode::SUCCESS, ExitCode::from),
        // `perfabi-cat | head`: the reader of our output is done; so are we.
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            eprintln!("perfabi-cat: cannot write output: {e}");
            ExitCode::from(1)
        }
        Err(Failure::Read(e)) => {
            eprintln!("perfabi-cat: {e}");
            ExitCode::from(exit_code(&e))
        }
        Err(Failure::Usage(why)) => {
            eprintln!("perfabi-cat: {why}");
            ExitCode::from(2)
        }
        Err(Failure::Record(e)) => {
            // perfabi-shm's message escapes the path itself.
            eprintln!("perfabi-cat: --record {e}");
            ExitCode::from(if e.io().is_some() { 1 } else { 2 })
        }
        Err(Failure::Damon(p)) => {
            eprintln!("perfabi-cat: {p}");
            ExitCode::from(p.exit_code())
        }
    }
}

fn run(args: &Args) -> Result<(), Failure> {
    let path = args
        .path
        .clone()
        .unwrap_or_else(perfabi_reader::default_path);
    // The live view, like `top`, outlives its writer (shown stale, a
    // restart followed).
    let live =
        args.watch.is_some() && args.record.is_none() && screen::wanted(args.json, args.count);
    let opts = Options {
        // Values of a writer that is gone are refused, in every mode, unless
        // --allow-stale (--info describes any segment, gone or not) or in
        // the live view.
        require_live: !args.allow_stale && !args.info && !live,
        trust: Trust::from_flags(args.trust_anyone, &args.trust_uid),
        max_segment_bytes: args.max_size,
        ..Options::default()
    };
    // A path that is a directory is read as one (stat follows a link: the
    // directory's own checks refuse one of another user).
    // (--from reads a record, never the default source.)
    if path.is_dir() && args.over_time.from.is_none() {
        return directory(args, &path, opts, live);
    }
    if args.writer_label.is_some() || args.max_segments.is_some() {
        return Err(Failure::Usage(format!(
            "--writer-label and --max-segments apply to a directory of segments, and {} is none",
            escape_path(&path)
        )));
    }
    if args.over_time.asked() {
        let cfg = args
            .over_time
            .config(args.json, args.watch, args.count)
            .map_err(damon::problem::Problem::Usage)?;
        return damon::view::run(&cfg, &path, opts);
    }
    let mut seg = Segment::open_with(&path, opts)?;
    let mut out = io::stdout().lock();
    if args.info {
        let info = seg.info()?;
        if args.json {
            json::line(&mut out, &render::json_info(&info))?;
        } else {
            print_info(&mut out, &info)?;
        }
        return Ok(());
    }
    if args.damon {
        let read = seg.damon()?;
        if args.json {
            let mut buffered = io::BufWriter::with_capacity(1 << 16, out);
            render::write_damon_json(&mut buffered, &read, seg.damon_dropped())?;
            buffered.flush()?;
        } else {
            write!(
                out,
                "{}",
                damon::report(&read.aggregations, usize::from(args.width))
            )?;
            let dropped = seg.damon_dropped();
            if dropped > 0 {
                writeln!(
                    out,
                    "regions dropped by the writer (rings too small): {dropped}"
                )?;
            }
            if !read.busy_cpus.is_empty() {
                writeln!(
                    out,
                    "left out: the rings of CPU {:?}, busy with an update (their regions may be missing or older)",
                    read.busy_cpus
                )?;
            }
        }
        return Ok(());
    }
    if let Some(file) = &args.record {
        return record(&mut seg, file, args);
    }
    if let Some(secs) = args.watch {
        drop(out);
        return watching(&mut Source::Segment(Box::new(seg)), args, secs, live);
    }
    let snap = seg.snapshot()?;
    if args.json {
        let info = seg.info()?;
        // Streamed into a buffer of its own: the page is never whole in
        // memory (stdout's own buffer would write a line, here the
        // document, a KiB at a time).
        let mut buffered = io::BufWriter::with_capacity(1 << 16, out);
        render::write_json(&mut buffered, &info, &snap)?;
        buffered.flush()?;
    } else if args.openmetrics {
        write!(
            out,
            "{}",
            perfabi_reader::exposition::openmetrics(&snap, args.cpu)
        )?;
    } else {
        write!(
            out,
            "{}",
            render::table(&Families::snapshot(&snap), args.cpu)
        )?;
    }
    Ok(())
}

/// `--watch` of `source` every `secs`: on a terminal, a screen redrawn in
/// place (`live`); to a pipe or a file, a dumb terminal, or with --count
/// (for scripts), lines.
fn watching(source: &mut Source, args: &Args, secs: f64, live: bool) -> Result<(), Failure> {
    if live {
        let cfg = live::Config {
            period: Duration::from_secs_f64(secs),
            per_cpu: args.cpu,
        };
        return live::run(source, &cfg);
    }
    watch(source, &mut io::stdout().lock(), args, secs)
}

/// Reads the directory `path` as one (see the help's "A directory"): the
/// table, --json, --openmetrics or --watch of its merged families, and
/// what was left out on stderr.
fn directory(
    args: &Args,
    path: &std::path::Path,
    opts: Options,
    live: bool,
) -> Result<(), Failure> {
    let not_here = [
        (args.cpu, "--cpu"),
        (args.damon, "--damon"),
        (args.info, "--info"),
        (args.record.is_some(), "--record"),
        (args.over_time.asked(), "the DAMON views over time"),
    ];
    if let Some((_, flag)) = not_here.iter().find(|(asked, _)| *asked) {
        return Err(Failure::Usage(format!(
            "{flag} does not apply to a directory of segments ({} is one: its merged \
             families have totals only); give one segment file of it instead",
            escape_path(path)
        )));
    }
    let mut dir = Directory::open(
        path,
        DirectoryOptions {
            segment: opts,
            writer_label: args.writer_label.clone(),
            max_segments: args
                .max_segments
                .map_or(DEFAULT_MAX_SEGMENTS, |n| n as usize),
        },
    )?;
    if let Some(secs) = args.watch {
        return watching(&mut Source::Directory(dir), args, secs, live);
    }
    let scrape = dir.read()?;
    let mut out = io::stdout().lock();
    if args.json {
        let mut buffered = io::BufWriter::with_capacity(1 << 16, out);
        render::write_directory_json(&mut buffered, path, &scrape)?;
        buffered.flush()?;
        return Ok(());
    }
    let mut left_out = Vec::new();
    if args.openmetrics {
        let mut page = String::new();
        left_out = perfabi_reader::exposition::render_directory_into(
            &mut page,
            &scrape,
            perfabi_reader::exposition::Format::OpenMetrics,
        );
        write!(out, "{page}")?;
    } else {
        write!(
            out,
            "{}",
            render::table(&Families::merged(&scrape.families), false)
        )?;
    }
    out.flush()?;
    for p in scrape.problems.iter().chain(&left_out) {
        // The reader's message escapes what it quotes.
        eprintln!("perfabi-cat: left out: {p}");
    }
    Ok(())
}

/// Appends one snapshot line per interval to `file` (see perfabi_record).
fn record(seg: &mut Segment, file: &std::path::Path, args: &Args) -> Result<(), Failure> {
    let secs = args.watch.unwrap_or(1.0);
    // Never through a planted link, never into another user's file.
    let (mut f, _) =
        perfabi_shm::safe_open::open_private(file, perfabi_shm::safe_open::Access::Append, 0o644)
            .map_err(Failure::Record)?;
    let period = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut snap = Snapshot::default();
    for n in 1u64.. {
        let taken = seg.snapshot_into(&mut snap).and_then(|()| seg.damon());
        let damon = match taken {
            Ok(d) => d,
            // A busy or re-created segment costs this line, not the recording.
            Err(e) if passing(&e) => {
                eprintln!("perfabi-cat: --record: sample skipped: {e}");
                if args.count.is_some_and(|c| n >= c) {
                    return Ok(());
                }
                std::thread::sleep(period.mul_f64(n as f64).saturating_sub(start.elapsed()));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let counters = render::counter_totals(&snap);
        let line = perfabi_record::Snapshot {
            t_ns: start.elapsed().as_nanos() as u64,
            epoch: format!("{:#018x}", snap.epoch),
            generation: snap.generation,
            counters,
            damon: damon.aggregations,
        };
        writeln!(f, "{}", perfabi_record::to_line(&line))?;
        if args.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        // The next snapshot is due at n periods after the start.
        let due = period.mul_f64(n as f64);
        std::thread::sleep(due.saturating_sub(start.elapsed()));
    }
    Ok(())
}

fn print_info(out: &mut impl Write, info: &perfabi_reader::SegmentInfo) -> io::Result<()> {
    let h = &info.header;
    if let Some(p) = &info.path {
        writeln!(out, "path:               {}", escape_path(p))?;
    }
    writeln!(out, "abi:                {}.{}", h.abi_major, h.abi_minor)?;
    writeln!(out, "epoch:              {:#018x}", h.epoch)?;
    writeln!(
        out,
        "generation:         {}{}",
        h.generation,
        if h.metadata_busy { " (changing)" } else { "" }
    )?;
    writeln!(out, "owner:              uid {}", info.owner)?;
    writeln!(
        out,
        "origin:             {}",
        match info.origin {
            perfabi_reader::Origin::KernelDevice => "kernel module device",
            perfabi_reader::Origin::KernelMap => "kernel BPF map (pinned, frozen)",
            perfabi_reader::Origin::File => "file",
        }
    )?;
    writeln!(out, "writer pid:         {}", h.writer_pid)?;
    writeln!(out, "liveness:           {:?}", info.liveness)?;
    writeln!(
        out,
        "heartbeat interval: {} ms",
        h.heartbeat_interval_ns / 1_000_000
    )?;
    writeln!(out, "flags:              {:#x}", h.flags)?;
    writeln!(out, "cpus:               {}", h.nr_cpus)?;
    writeln!(out, "instance capacity:  {}", h.max_instances)?;
    writeln!(out, "damon ring slots:   {} per CPU", h.damon_capacity)?;
    writeln!(
        out,
        "segment size:       {} bytes ({} mapped)",
        h.segment_size, info.mapped
    )
}

/// Prints per-second rates of every counter (a counter of CPU time as a
/// percentage of one CPU), the level of every gauge and peak, and the
/// observations per second of every histogram (with their mean, p50 and
/// p99) each `secs` seconds.
fn watch(source: &mut Source, out: &mut impl Write, args: &Args, secs: f64) -> Result<(), Failure> {
    let period = Duration::from_secs_f64(secs);
    let mut prev = Read::default();
    let mut cur = Read::default();
    let mut n = 0u64;
    if !read_or_skip(source, &mut prev, out, args, period, &mut n)? {
        return Ok(());
    }
    let mut prev_t = Instant::now();
    loop {
        std::thread::sleep(period.saturating_sub(prev_t.elapsed()));
        if !read_or_skip(source, &mut cur, out, args, period, &mut n)? {
            return Ok(());
        }
        let now = Instant::now();
        let dt = now.duration_since(prev_t).as_secs_f64();
        let rows = rates::rows(&prev, &cur, dt);
        if args.json {
            rates::write_json(out, &rows, dt, &cur)?;
        } else {
            writeln!(out, "--- {:.2} s, {} ---", dt, cur.stamp())?;
            let width = rows
                .iter()
                .map(|r| r.name().chars().count())
                .max()
                .unwrap_or(0)
                .max(32);
            // The same text as the live view's, each column as wide as its
            // widest cell in this sample.
            let texts: Vec<String> = rows.iter().map(|r| r.text(dt)).collect();
            let vwidth = texts.iter().map(|t| t.chars().count()).max().unwrap_or(0);
            for (r, t) in rows.iter().zip(&texts) {
                writeln!(out, "{:<width$}  {t:>vwidth$}", r.name())?;
            }
            // What a directory's read left out, when it changed.
            if let Some(s) = &cur.scrape {
                let before = prev.scrape.as_ref().map(|p| &p.problems);
                if before != Some(&s.problems) {
                    for p in &s.problems {
                        writeln!(out, "left out: {p}")?;
                    }
                }
            }
        }
        out.flush()?;
        std::mem::swap(&mut prev, &mut cur);
        prev_t = now;
        n += 1;
        if args.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
    }
}

/// Reads `into` for a --watch sample. A busy writer costs a sample, never
/// the watch: the sample is skipped, said so and counted in `n` (toward
/// --count), and the read tried again a period later; false once --count
/// samples are done.
fn read_or_skip(
    source: &mut Source,
    into: &mut Read,
    out: &mut impl Write,
    args: &Args,
    period: Duration,
    n: &mut u64,
) -> Result<bool, Failure> {
    loop {
        match source.read_into(into) {
            Ok(()) => return Ok(true),
            Err(e) if passing(&e) => {
                skipped(out, args, &e)?;
                *n += 1;
                if args.count.is_some_and(|c| *n >= c) {
                    return Ok(false);
                }
                std::thread::sleep(period);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Conditions that cost a --watch sample, not the watch: a busy writer, a
/// segment truncated, re-created or replaced under the reader (the next
/// sample maps it again), a directory's fold running longer than a read
/// waits for it.
fn passing(e: &Error) -> bool {
    match e {
        Error::Busy(_) | Error::Truncated(_) | Error::HeaderChanged(_) | Error::Raced(_) => true,
        // A directory's fold held its lock longer than the reader waits.
        Error::Io(_, io) => io.kind() == io::ErrorKind::WouldBlock,
        _ => false,
    }
}

/// Says that a --watch sample was skipped, and why.
fn skipped(out: &mut impl Write, args: &Args, e: &Error) -> io::Result<()> {
    if args.json {
        json::line(out, &serde_json::json!({ "skipped": e.to_string() }))?;
    } else {
        writeln!(out, "--- sample skipped: {e} ---")?;
    }
    out.flush()
}
