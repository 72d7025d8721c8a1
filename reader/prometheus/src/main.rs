//! perfabi-prometheus: serve a perfabi segment's metric families to
//! Prometheus over HTTP (`/metrics`).

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use perfabi_prometheus::{serve, Endpoint};
use perfabi_reader::{Options, Trust};

const AFTER_HELP: &str = "\
GET /metrics answers one consistent snapshot per scrape, in OpenMetrics
1.0.0 if the Accept header asks for it (Prometheus does), else in the
Prometheus text format 0.0.4; 503 with a one-line reason when the segment
cannot be read (no writer, busy, gone, truncated, untrusted). GET / is a
short index.

SEGMENT defaults to $PERFABI_SEGMENT, else /dev/perfabi (kernel module),
else /dev/shm/perfabi.seg (perfabi-exportd). A segment is read only if it
belongs to this user or root (see --trust-uid).";

/// Serve a perfabi segment to Prometheus: GET /metrics.
#[derive(Parser, Debug)]
#[command(name = "perfabi-prometheus", version, after_help = AFTER_HELP)]
struct Args {
    /// Segment file (see below for the default).
    segment: Option<PathBuf>,
    /// Address and port to listen on (port 0: any free port, printed at
    /// start). Only loopback by default: the page names what runs on the
    /// host.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    /// One series per CPU (label `cpu`) instead of one total per instance.
    #[arg(long)]
    cpu: bool,
    /// Connections answered at once (1 to 16); more wait their turn.
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u16).range(1..=16))]
    threads: u16,
    /// Also read segments owned by this uid (repeatable); by default only
    /// this user's and root's are read.
    #[arg(long, value_name = "UID")]
    trust_uid: Vec<u32>,
    /// Read segments of any owner.
    #[arg(long, conflicts_with = "trust_uid")]
    trust_anyone: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let path = args
        .segment
        .clone()
        .unwrap_or_else(perfabi_reader::default_path);
    let opts = Options {
        trust: Trust::from_flags(args.trust_anyone, &args.trust_uid),
        ..Options::default()
    };
    let listener = match TcpListener::bind(args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("perfabi-prometheus: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(1);
        }
    };
    let addr = listener.local_addr().unwrap_or(args.listen);
    eprintln!(
        "perfabi-prometheus: serving {} at http://{addr}/metrics",
        path.display()
    );
    let endpoint = Arc::new(Endpoint::new(path, opts, args.cpu));
    match serve(listener, endpoint, usize::from(args.threads)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perfabi-prometheus: {e}");
            ExitCode::from(1)
        }
    }
}
