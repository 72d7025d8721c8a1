//! perfabi-prometheus: serve a perfabi segment's metric families (or a
//! directory of segments' merged families) to Prometheus over HTTP
//! (`/metrics`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use perfabi_prometheus::activation::{self, Origin};
use perfabi_prometheus::{
    connections_within, raise_open_file_limit, serve_with, Endpoint, Limits, Web, MAX_CONNECTIONS,
    MAX_PAGE_BYTES, MAX_REQUESTS,
};
use perfabi_reader::directory::{check_writer_label, DirectoryOptions, DEFAULT_MAX_SEGMENTS};
use perfabi_reader::{Options, Trust};
use perfabi_shm::safe_open::escape_path;

const AFTER_HELP: &str = "\
GET /metrics answers one consistent snapshot per scrape, in OpenMetrics
1.0.0 if the Accept header asks for it (Prometheus does), as the protobuf
exposition with native histograms if it asks for that (Prometheus with
--enable-feature=native-histograms), else in the Prometheus text format
0.0.4; 503 with a one-line reason when the segment
cannot be read (no writer, busy, gone, truncated, untrusted). GET / is a
short index. HEAD is answered wherever GET is (the same head, no body);
another method is 405, another path 404. Connections are kept alive.

Deadlines: a request head must arrive whole within --read-timeout of its
first byte, an answer must be sent whole within --write-timeout of the
request, and a connection may sit idle (before a request, between two) for
--idle-timeout; past its deadline a connection is closed. At
--max-connections open, a new connection closes the one that has waited on
its client the longest: idle, trickling its head, or not reading its answer
(if none is, it waits its turn in the listen queue). At start the
soft limit on open files is raised to the hard one; --max-connections is
lowered (and says so) if that limit cannot hold them.

Scrapes: each holds its page until the page is sent. A scrape beyond
--max-requests in flight, or whose page (the size of the last one) would
take the pages in flight past --max-page-memory, closes the scrape whose
client has stopped reading the longest and takes its place; if none has,
it waits in line for room (first come, first served; the first in line
closes a scrape as soon as one stalls). It waits at most half
--write-timeout, then is answered 503 saying which bound.

SEGMENT defaults to $PERFABI_SEGMENT, else /dev/perfabi (kernel module),
else /sys/fs/bpf/perfabi/kernel (perfabi-bpfd, the eBPF writer), else
/dev/shm/perfabi.seg (perfabi-exportd) if it exists, else the default
segment directory ($PERFABI_DIR, else /dev/shm/perfabi-<euid>: programs
writing with the C, Python, Rust or metrics writers) if it exists. A
segment is read only if it belongs to this user or root (see --trust-uid).

A directory: SEGMENT may name a directory of segments (spec/PERFABI.md
section 15), read as one at every scrape: families of one name merged
(counters and histograms summed, dead writers' counts kept; gauges of live
writers by the family's mode), new writers appearing and gone ones
leaving. --writer-label keeps each writer's series apart. A file that is
refused (another user's, a link, truncated...), a family whose metadata
differ between two files (refused whole, naming both), or --max-segments
reached is left out of the page, never a failed scrape: it is logged once
while it lasts and counted in the gauge perfabi_directory_problems{code};
perfabi_directory_segments is the files merged. Only a directory refused
as a whole (another user's, writable by others without the sticky bit) is
a 503. --cpu does not apply (only totals merge).

Web configuration: --web.config.file FILE reads Prometheus
exporter-toolkit's web-config.yml (as node_exporter does) at start: TLS
(tls_server_config: cert_file, key_file, client_auth_type, client_ca_file,
min_version, max_version, cipher_suites, curve_preferences), basic
authentication (basic_auth_users, bcrypt hashes: 401 without a user's
credentials) and answer headers (http_server_config.headers). A field it
cannot honour is refused, naming it (exit 2). SIGHUP reads the file again:
new connections and requests get its settings; a wrong file is logged and
the settings in force kept (turning TLS on or off needs a restart).

GET /metrics?name[]=X&name[]=Y keeps the families named (at most 256);
the page is gzipped when Accept-Encoding asks, and ends with the
endpoint's own families (promhttp_metric_handler_requests_total,
perfabi_exporter_*, process_*).

Exit status: 1 if it cannot listen or its runtime fails, 2 for bad
arguments; otherwise it serves until stopped.";

/// Longest deadline a flag takes, in seconds (an hour).
const MAX_TIMEOUT_SECS: f64 = 3600.0;

/// Serve a perfabi segment, or a directory of segments read as one, to
/// Prometheus: GET /metrics.
#[derive(Parser, Debug)]
#[command(name = "perfabi-prometheus", version, after_help = AFTER_HELP)]
struct Args {
    /// Segment file, or a directory of segments read as one (see below
    /// for the default).
    segment: Option<PathBuf>,
    /// Address and port to listen on (port 0: any free port, printed at
    /// start). Only loopback by default: the page names what runs on the
    /// host. Not used when systemd passes the socket (socket activation,
    /// `LISTEN_FDS`: perfabi-prometheus.socket).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    /// One series per CPU (label `cpu`) instead of one total per instance.
    #[arg(long)]
    cpu: bool,
    /// Threads serving the connections (1 to 16); as many more take the
    /// snapshots and render the pages.
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u16).range(1..=16))]
    threads: u16,
    /// Seconds a request head may take, from its first byte to its end.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_secs)]
    read_timeout: Duration,
    /// Seconds an answer may take, from the request to the last byte sent
    /// (a client reading slowly is cut off).
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_secs)]
    write_timeout: Duration,
    /// Seconds a connection may sit idle before its first request or
    /// between two.
    #[arg(long, value_name = "SECS", default_value = "120", value_parser = parse_secs)]
    idle_timeout: Duration,
    /// Most connections open at once; at the bound, a new one closes the
    /// one that has waited on its client the longest.
    #[arg(long, value_name = "N", default_value_t = MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: u32,
    /// Most scrapes in flight at once (each holds its page until sent).
    #[arg(long, value_name = "N", default_value_t = MAX_REQUESTS as u32,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_requests: u32,
    /// Most memory the pages in flight hold together, in MiB (one scrape
    /// is always let in, whatever its page's size).
    #[arg(long, value_name = "MIB", default_value_t = (MAX_PAGE_BYTES >> 20) as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    max_page_memory: u32,
    /// A directory: keep each writer's series apart under the label KEY
    /// (default `writer`; its value: `<name>.<pid>` of the segment file)
    /// instead of merging them.
    #[arg(long, value_name = "KEY", num_args = 0..=1, require_equals = true,
          default_missing_value = perfabi_reader::directory::WRITER_LABEL,
          value_parser = parse_label)]
    writer_label: Option<String>,
    /// A directory: most segment files read at a scrape (default 10000;
    /// the rest are left out and counted as a problem, code `limit`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_segments: Option<u32>,
    /// Also read segments owned by this uid (repeatable); by default only
    /// this user's and root's are read.
    #[arg(long, value_name = "UID")]
    trust_uid: Vec<u32>,
    /// Read segments of any owner.
    #[arg(long, conflicts_with = "trust_uid")]
    trust_anyone: bool,
    /// Prometheus exporter-toolkit's web configuration file: TLS, basic
    /// authentication, answer headers (see below).
    #[arg(
        long = "web.config.file",
        visible_alias = "web-config",
        value_name = "FILE"
    )]
    web_config: Option<PathBuf>,
}

/// A `--*-timeout SECS`: seconds, fractions allowed, 0.01 to an hour.
fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if v.is_finite() && (0.01..=MAX_TIMEOUT_SECS).contains(&v) {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!(
            "{s} must be between 0.01 and {MAX_TIMEOUT_SECS} seconds"
        ))
    }
}

/// A `--writer-label KEY` ([`check_writer_label`]).
fn parse_label(s: &str) -> Result<String, String> {
    check_writer_label(s).map(|()| s.to_string())
}

fn main() -> ExitCode {
    perfabi_man::print_if_asked(perfabi_man::Page::of::<Args>);
    let args = Args::parse();
    let path = args
        .segment
        .clone()
        .unwrap_or_else(perfabi_reader::default_path);
    let opts = Options {
        trust: Trust::from_flags(args.trust_anyone, &args.trust_uid),
        ..Options::default()
    };
    // A path that is a directory is read as one (stat follows a link:
    // the directory's own checks refuse one of another user).
    let is_dir = path.is_dir();
    if is_dir && args.cpu {
        eprintln!(
            "perfabi-prometheus: --cpu does not apply to a directory of segments \
             (only totals merge): drop it, or serve one segment file"
        );
        return ExitCode::from(2);
    }
    if !is_dir && (args.writer_label.is_some() || args.max_segments.is_some()) {
        eprintln!(
            "perfabi-prometheus: --writer-label and --max-segments apply to a directory of \
             segments, and {} is none",
            escape_path(&path)
        );
        return ExitCode::from(2);
    }
    let web = match &args.web_config {
        None => Web::default(),
        Some(file) => match Web::load(file) {
            Ok(web) => web,
            Err(e) => {
                eprintln!(
                    "perfabi-prometheus: --web.config.file {}: {e}",
                    escape_path(file)
                );
                return ExitCode::from(2);
            }
        },
    };
    let wanted = args.max_connections as usize;
    let open_files = raise_open_file_limit();
    let max_connections = connections_within(wanted, open_files);
    if let (true, Some(n)) = (max_connections < wanted, open_files) {
        eprintln!(
            "perfabi-prometheus: --max-connections {wanted} lowered to {max_connections}: \
             the open-file limit is {n} (raise it with ulimit -n or LimitNOFILE=)"
        );
    }
    let limits = Limits {
        read_timeout: args.read_timeout,
        write_timeout: args.write_timeout,
        idle_timeout: args.idle_timeout,
        max_connections,
        max_requests: args.max_requests as usize,
        max_page_bytes: (args.max_page_memory as usize) << 20,
    };
    let (listener, origin) = match activation::listener(args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("perfabi-prometheus: {e}");
            return ExitCode::from(1);
        }
    };
    let addr = listener.local_addr().unwrap_or(args.listen);
    eprintln!(
        "perfabi-prometheus: serving {}{}{} at {}://{addr}/metrics{}",
        if is_dir { "the directory " } else { "" },
        escape_path(&path),
        if web.needs_auth() {
            " with basic authentication"
        } else {
            ""
        },
        if web.is_tls() { "https" } else { "http" },
        if origin == Origin::Systemd {
            " (socket passed by systemd)"
        } else {
            ""
        }
    );
    let endpoint = Arc::new(if is_dir {
        Endpoint::directory(
            path,
            DirectoryOptions {
                segment: opts,
                writer_label: args.writer_label.clone(),
                max_segments: args
                    .max_segments
                    .map_or(DEFAULT_MAX_SEGMENTS, |n| n as usize),
            },
        )
    } else {
        Endpoint::new(path, opts, args.cpu)
    });
    match serve_with(listener, endpoint, usize::from(args.threads), limits, web) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perfabi-prometheus: {e}");
            ExitCode::from(1)
        }
    }
}
