//! A Prometheus endpoint for any perfabi segment: `GET /metrics` answers
//! one consistent snapshot (one metadata generation) per scrape, in
//! OpenMetrics 1.0.0 when the scraper's `Accept` header asks for it (as
//! Prometheus does), else in the Prometheus text format 0.0.4. The page is
//! rendered by [`perfabi_reader::exposition`], the renderer of
//! `perfabi-cat --openmetrics`.
//!
//! * A failed read (no segment, writer busy beyond its retries, gone,
//!   closed, truncated, untrusted) answers `503` with a one-line reason,
//!   never a partial page; the next scrape opens the segment again, so a
//!   writer that restarts is served again.
//! * Bounded: a fixed number of worker threads, each serving one
//!   connection at a time (`Connection: close`); a request's head is at
//!   most [`MAX_HEAD`] bytes and [`MAX_HEADERS`] headers, read within
//!   [`READ_TIMEOUT`] in all (a client that trickles it is dropped); `GET /metrics` and `GET /` (a short index) only,
//!   `404` for other paths, `405` for other methods.
//!
//! HTTP parsing is `httparse`'s (the parser under hyper: no allocation, no
//! dependency); the connection handling is this crate's few lines, so that
//! every bound above is explicit.
#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use perfabi_reader::exposition::{self, Format};
use perfabi_reader::{Options, Segment, Snapshot};

/// Largest request head (request line and headers) read, in bytes; a
/// longer one is answered `431`.
pub const MAX_HEAD: usize = 8192;
/// Most headers in a request; more are answered `431`.
pub const MAX_HEADERS: usize = 64;
/// How long a client may take to send its whole request head (however
/// it trickles it).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to read the response.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The segment an endpoint serves, opened at the first scrape and again
/// after a failed one.
pub struct Endpoint {
    path: PathBuf,
    opts: Options,
    per_cpu: bool,
    reading: Mutex<Reading>,
    last_error: Mutex<Option<String>>,
}

/// The open segment and the snapshot buffer the scrapes fill: while the
/// metadata generation stays the same, a scrape copies the values only and
/// keeps the families decoded by an earlier one (`Segment::snapshot_into`).
#[derive(Default)]
struct Reading {
    segment: Option<Segment>,
    snapshot: Snapshot,
}

impl Reading {
    /// Fills `self.snapshot` (opening the segment if needed); on failure,
    /// the one-line reason, and the segment and the buffer's decoded
    /// metadata are dropped so that the next scrape opens it again.
    fn refresh(&mut self, path: &Path, opts: &Options) -> Result<&Snapshot, String> {
        let result = match self.segment.as_mut() {
            Some(seg) => seg.snapshot_into(&mut self.snapshot),
            None => Segment::open_with(path, opts.clone()).and_then(|mut seg| {
                let r = seg.snapshot_into(&mut self.snapshot);
                self.segment = Some(seg);
                r
            }),
        };
        match result {
            Ok(()) => Ok(&self.snapshot),
            Err(e) => {
                self.segment = None;
                self.snapshot = Snapshot::default();
                Err(one_line(&format!("cannot read {}: {e}", path.display())))
            }
        }
    }
}

impl Endpoint {
    /// An endpoint for the segment at `path`, read with `opts`; with
    /// `per_cpu`, one series per CPU (label `cpu`) instead of totals.
    pub fn new(path: impl Into<PathBuf>, opts: Options, per_cpu: bool) -> Self {
        Self {
            path: path.into(),
            opts,
            per_cpu,
            reading: Mutex::new(Reading::default()),
            last_error: Mutex::new(None),
        }
    }

    /// The segment's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One snapshot of the segment (opening it if needed); on failure, the
    /// one-line reason, and the segment is dropped so that the next scrape
    /// opens it again.
    pub fn snapshot(&self) -> Result<Snapshot, String> {
        let mut reading = self.reading.lock().unwrap_or_else(|p| p.into_inner());
        reading.refresh(&self.path, &self.opts).cloned()
    }

    /// One scrape: a snapshot rendered in `format`, or the reason it failed.
    /// Scrapes take turns: the snapshot is rendered from the endpoint's one
    /// buffer before the next scrape refills it.
    pub fn scrape(&self, format: Format) -> Result<String, String> {
        let mut reading = self.reading.lock().unwrap_or_else(|p| p.into_inner());
        let snap = reading.refresh(&self.path, &self.opts)?;
        let mut page = String::with_capacity(64 * 1024);
        exposition::render_into(&mut page, snap, self.per_cpu, format);
        Ok(page)
    }

    /// Logs `result`'s failure to stderr when it differs from the last one
    /// logged (a writer that stays away is logged once, not every scrape),
    /// and a recovery once.
    fn log(&self, result: &Result<String, String>) {
        let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        match (result, last.as_ref()) {
            (Err(e), prev) if prev != Some(e) => {
                eprintln!("perfabi-prometheus: {e} (answering 503)");
                *last = Some(e.clone());
            }
            (Ok(_), Some(_)) => {
                eprintln!("perfabi-prometheus: {} readable again", self.path.display());
                *last = None;
            }
            _ => {}
        }
    }
}

/// `s` on one line (any line break becomes a space).
fn one_line(s: &str) -> String {
    s.split(['\n', '\r']).collect::<Vec<_>>().join(" ")
}

/// The format a scraper's `Accept` header asks for: the acceptable media
/// range of highest `q` (the first of equals) among
/// `application/openmetrics-text` (version 1.0.0 or none given), which is
/// OpenMetrics, and `text/plain`, `text/*` and `*/*`, which are the
/// Prometheus text format; the text format when there is no header or
/// nothing in it is served.
pub fn negotiate(accept: Option<&str>) -> Format {
    let mut best: Option<(f32, Format)> = None;
    for range in accept.unwrap_or("").split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0f32;
        let mut version: Option<String> = None;
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse().unwrap_or(0.0),
                "version" => version = Some(v.to_string()),
                _ => {}
            }
        }
        let format = match (media.as_str(), version.as_deref()) {
            ("application/openmetrics-text", None | Some("1.0.0")) => Format::OpenMetrics,
            ("text/plain", None | Some("0.0.4")) | ("text/*" | "*/*", _) => Format::Prometheus,
            _ => continue,
        };
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, format));
        }
    }
    best.map_or(Format::Prometheus, |(_, f)| f)
}

/// Serves `endpoint` on `listener` with `threads` workers (at least one),
/// each answering one connection at a time; returns only if a worker
/// cannot be started or the listener fails.
pub fn serve(listener: TcpListener, endpoint: Arc<Endpoint>, threads: usize) -> io::Result<()> {
    let mut workers = Vec::new();
    for k in 0..threads.max(1) {
        let listener = listener.try_clone()?;
        let endpoint = Arc::clone(&endpoint);
        workers.push(
            std::thread::Builder::new()
                .name(format!("http-{k}"))
                .spawn(move || worker(&listener, &endpoint))?,
        );
    }
    for w in workers {
        if let Ok(Err(e)) = w.join() {
            return Err(e);
        }
    }
    Ok(())
}

/// Accepts and answers connections, one at a time, until the listener
/// fails for good.
fn worker(listener: &TcpListener, endpoint: &Endpoint) -> io::Result<()> {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                // A client that goes away mid-answer is its own business.
                let _ = handle(stream, endpoint);
            }
            // Out of descriptors, a connection reset before accept: wait a
            // little and go on.
            Err(e) if is_transient(&e) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(e),
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || matches!(
        e.raw_os_error(),
        Some(libc_errno::EMFILE | libc_errno::ENFILE | libc_errno::ENOBUFS | libc_errno::ENOMEM)
    )
}

/// The few errno values [`is_transient`] names (Linux).
mod libc_errno {
    pub const EMFILE: i32 = 24;
    pub const ENFILE: i32 = 23;
    pub const ENOBUFS: i32 = 105;
    pub const ENOMEM: i32 = 12;
}

/// A response: status, content type, body.
struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

impl Response {
    fn text(status: &'static str, body: String) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body,
        }
    }
}

/// Reads one request head from `stream` and answers it.
fn handle(mut stream: TcpStream, endpoint: &Endpoint) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let mut complete = false;
    let response = loop {
        if len == buf.len() {
            break Response::text(
                "431 Request Header Fields Too Large",
                format!("request head longer than {MAX_HEAD} bytes\n"),
            );
        }
        // A timeout of the whole head, not of each read: a client sending a
        // byte now and then cannot hold a worker longer.
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf[len..])?;
        if n == 0 {
            return Ok(()); // closed before a whole request
        }
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Partial) => continue,
            Ok(httparse::Status::Complete(_)) => {
                complete = true;
                break answer(&req, endpoint);
            }
            Err(httparse::Error::TooManyHeaders) => {
                break Response::text(
                    "431 Request Header Fields Too Large",
                    format!("more than {MAX_HEADERS} headers\n"),
                )
            }
            Err(e) => break Response::text("400 Bad Request", format!("{e}\n")),
        }
    };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(response.body.as_bytes())?;
    stream.flush()?;
    if !complete {
        // The client may still be sending the head we refused: closing with
        // unread data would reset the connection and could lose the answer
        // before the client reads it. Say we are done, then drain a bounded
        // amount for a bounded time.
        stream.shutdown(std::net::Shutdown::Write)?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        let _ = io::copy(&mut (&stream).take(1 << 20), &mut io::sink());
    }
    Ok(())
}

/// The answer to a complete request.
fn answer(req: &httparse::Request, endpoint: &Endpoint) -> Response {
    let path = req.path.unwrap_or("/");
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    if path != "/" && path != "/metrics" {
        return Response::text("404 Not Found", "not found: try /metrics\n".into());
    }
    if req.method != Some("GET") {
        return Response::text("405 Method Not Allowed", "only GET\n".into());
    }
    if path == "/" {
        return Response::text(
            "200 OK",
            format!(
                "perfabi-prometheus: the metrics of {} at /metrics\n",
                endpoint.path().display()
            ),
        );
    }
    let accept = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("accept"))
        .and_then(|h| std::str::from_utf8(h.value).ok());
    let format = negotiate(accept);
    let result = endpoint.scrape(format);
    endpoint.log(&result);
    match result {
        Ok(page) => Response {
            status: "200 OK",
            content_type: format.content_type(),
            body: page,
        },
        Err(reason) => Response::text("503 Service Unavailable", format!("{reason}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoint keeps the families decoded by an earlier scrape while
    /// the metadata generation stays; an instance added, a value changed or
    /// an instance deleted between two scrapes must show in the next one.
    #[test]
    fn a_scrape_shows_what_changed_since_the_last_one() {
        use perfabi::{FamilySpec, Kind, Unit};
        use perfabi_shm::writer::{Config, Writer};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let cfg = Config {
            max_instances: 64,
            max_families: 4,
            max_members: 16,
            damon_capacity: 0,
            ..Config::default()
        };
        let w = Writer::create(&path, &cfg).unwrap();
        let spec = FamilySpec::new("io.ops", "Ops", "dev", Kind::Counter, Unit::COUNT);
        let fam = w.add_family(&spec).unwrap();
        let a = w.add_member(fam, "a", &[]).unwrap();
        w.member_add(&a, 5).unwrap();
        let e = Endpoint::new(&path, Options::default(), false);
        let page = e.scrape(Format::OpenMetrics).unwrap();
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"a\"} 5\n"),
            "{page}"
        );

        w.member_add(&a, 1).unwrap();
        let b = w.add_member(fam, "b", &[]).unwrap();
        w.member_add(&b, 3).unwrap();
        let page = e.scrape(Format::OpenMetrics).unwrap();
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"a\"} 6\n"),
            "{page}"
        );
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"b\"} 3\n"),
            "{page}"
        );

        w.del_member(&a).unwrap();
        let page = e.scrape(Format::Prometheus).unwrap();
        assert!(!page.contains("dev=\"a\""), "{page}");
        assert!(
            page.contains("perfabi_io_ops_total{dev=\"b\"} 3\n"),
            "{page}"
        );
        assert_eq!(e.snapshot().unwrap().families.len(), 1);
    }

    #[test]
    fn negotiation() {
        let prometheus_2_42 = "application/openmetrics-text;version=1.0.0,\
            application/openmetrics-text;version=0.0.1;q=0.75,\
            text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(prometheus_2_42)), Format::OpenMetrics);
        assert_eq!(negotiate(None), Format::Prometheus);
        assert_eq!(negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(negotiate(Some("text/plain")), Format::Prometheus);
        assert_eq!(
            negotiate(Some("application/openmetrics-text; version=1.0.0")),
            Format::OpenMetrics
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0.2, text/plain;q=0.9")),
            Format::Prometheus
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;version=0.0.1")),
            Format::Prometheus
        );
        assert_eq!(negotiate(Some("application/json")), Format::Prometheus);
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Prometheus
        );
    }

    #[test]
    fn reasons_are_one_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
    }
}
