//! perfabi-cat: print the metric families, counters and DAMON regions of a
//! perfabi segment.

mod damon;
mod human;
mod json;
mod live;
mod rates;
mod render;
mod screen;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use perfabi_reader::{Error, Options, Segment, Snapshot, Trust};
use perfabi_shm::safe_open::escape_path;

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
/dev/shm/perfabi.seg (perfabi-exportd). A segment is read only if it belongs
to this user or root (see --trust-uid), and symbolic links are not followed.";

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
/// --record file refused, or DAMON views over time that cannot be drawn.
enum Failure {
    Read(Error),
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
        // On a terminal, a screen redrawn in place; to a pipe or a file,
        // a dumb terminal, or with --count (for scripts), lines.
        if live {
            drop(out);
            let cfg = live::Config {
                period: Duration::from_secs_f64(secs),
                per_cpu: args.cpu,
            };
            return live::run(&mut seg, &cfg);
        }
        return watch(&mut seg, &mut out, args, secs);
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
        write!(out, "{}", render::table(&snap, args.cpu))?;
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
fn watch(seg: &mut Segment, out: &mut impl Write, args: &Args, secs: f64) -> Result<(), Failure> {
    let period = Duration::from_secs_f64(secs);
    let mut prev = Snapshot::default();
    let mut cur = Snapshot::default();
    let mut n = 0u64;
    if !read_or_skip(seg, &mut prev, out, args, period, &mut n)? {
        return Ok(());
    }
    let mut prev_t = Instant::now();
    loop {
        std::thread::sleep(period.saturating_sub(prev_t.elapsed()));
        if !read_or_skip(seg, &mut cur, out, args, period, &mut n)? {
            return Ok(());
        }
        let now = Instant::now();
        let dt = now.duration_since(prev_t).as_secs_f64();
        let rows = rates::rows(&prev, &cur, dt);
        if args.json {
            rates::write_json(out, &rows, dt, cur.generation)?;
        } else {
            writeln!(out, "--- {:.2} s, generation {} ---", dt, cur.generation)?;
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

/// Reads `snap` for a --watch sample. A busy writer costs a sample, never
/// the watch: the sample is skipped, said so and counted in `n` (toward
/// --count), and the read tried again a period later; false once --count
/// samples are done.
fn read_or_skip(
    seg: &mut Segment,
    snap: &mut Snapshot,
    out: &mut impl Write,
    args: &Args,
    period: Duration,
    n: &mut u64,
) -> Result<bool, Failure> {
    loop {
        match seg.snapshot_into(snap) {
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
/// sample maps it again).
fn passing(e: &Error) -> bool {
    matches!(
        e,
        Error::Busy(_) | Error::Truncated(_) | Error::HeaderChanged(_) | Error::Raced(_)
    )
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
