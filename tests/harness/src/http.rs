//! A small HTTP/1.1 client for the tests that ask servers on loopback
//! (Prometheus' API, pmproxy's `/metrics`): one `GET` per connection, the
//! body read by `Content-Length`, by chunks (`Transfer-Encoding: chunked`,
//! which pmproxy uses for a page of any size) or to the end.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a whole request may take, however the server trickles it.
pub const TIMEOUT: Duration = Duration::from_secs(20);
/// Largest head and largest body read; a server sending more is an error.
pub const MAX_HEAD: usize = 64 << 10;
/// Largest body read (a page of `/metrics` is a few MiB at most).
pub const MAX_BODY: usize = 64 << 20;

/// A connection read within one deadline: each read waits at most for
/// the time left, and none starts after it.
struct Deadline {
    stream: TcpStream,
    until: Instant,
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no whole answer in the time given",
            ));
        }
        self.stream.set_read_timeout(Some(left))?;
        // A read timeout is EAGAIN on Linux: say what it is.
        self.stream.read(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock => {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in the time given")
            }
            _ => e,
        })
    }
}

/// A response: status code, head (status line and headers) and body.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code (`200`).
    pub status: u16,
    /// The status line and the headers, as sent.
    pub head: String,
    /// The body, chunks joined.
    pub body: String,
}

impl Response {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// `GET path` from the server at `addr`, with `headers`; an error if it
/// cannot be reached, does not answer in whole within [`TIMEOUT`], or
/// sends more than [`MAX_HEAD`] of head or [`MAX_BODY`] of body.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
    get_within(addr, path, headers, TIMEOUT)
}

/// [`get`], with `timeout` for the whole request instead of [`TIMEOUT`].
pub fn get_within(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> std::io::Result<Response> {
    let until = Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n")
            .as_bytes(),
    )?;
    let mut r = BufReader::new(Deadline { stream: s, until });
    read_response(&mut r, false)
}

/// Reads one response from `r`: the head, then the body by
/// `Content-Length`, by chunks or to the end; with `head_only` (the answer
/// to a `HEAD`), the head alone, whatever length it announces. On a
/// kept-alive connection the next response follows. An error if the head
/// is over [`MAX_HEAD`] or the body over [`MAX_BODY`]; the caller bounds
/// the time (a read timeout on the socket).
pub fn read_response(r: &mut impl BufRead, head_only: bool) -> std::io::Result<Response> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if (&mut *r).take(MAX_HEAD as u64).read_line(&mut line)? == 0 {
            if head.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed before a response",
                ));
            }
            break;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
        if head.len() > MAX_HEAD {
            return Err(bad("a head over MAX_HEAD"));
        }
    }
    let status = head
        .split_ascii_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no HTTP status line"))?;
    let mut resp = Response {
        status,
        head,
        body: String::new(),
    };
    if head_only {
        return Ok(resp);
    }
    let mut body = Vec::new();
    if resp
        .header("Transfer-Encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            (&mut *r).take(1024).read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("a bad chunk size"))?;
            if n > MAX_BODY - body.len() {
                return Err(bad("a body over MAX_BODY"));
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = resp
        .header("Content-Length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        if n > MAX_BODY {
            return Err(bad("a body over MAX_BODY"));
        }
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.take(MAX_BODY as u64 + 1).read_to_end(&mut body)?;
        if body.len() > MAX_BODY {
            return Err(bad("a body over MAX_BODY"));
        }
    }
    resp.body = String::from_utf8(body).map_err(|_| bad("a body that is not UTF-8"))?;
    Ok(resp)
}

/// `value` percent-encoded for a URL's query string (letters, digits and
/// `_.-` kept).
pub fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_.-".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A free loopback port for a server a test starts: one that binds now,
/// chosen at random below the kernel's ephemeral range
/// (`ip_local_port_range`). The kernel gives connections their local
/// ports, and servers binding port 0 theirs, from that range, so none of
/// them can take this port between its release here and the server's
/// bind; only another test choosing the same way at the same moment could
/// (about one chance in 20,000). Where the range leaves no room below it,
/// any free port the kernel gives.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    use std::net::TcpListener;
    const LOWEST: u32 = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    if ephemeral_low > LOWEST + 1_000 {
        for _ in 0..1_000 {
            // A random number from std alone: each RandomState has new keys.
            let r = std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish();
            let port = LOWEST + (r % u64::from(ephemeral_low - LOWEST)) as u32;
            let port = u16::try_from(port).expect("below the ephemeral range");
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_free_port_binds_and_is_below_the_ephemeral_range() {
        let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
        let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
        for &p in &ports {
            // A range that leaves no room below it (a machine set to
            // 1024-65535): any free port the kernel gives.
            if low > 11_000 {
                assert!((10_000..low).contains(&p), "{p} not in 10000..{low}");
            }
            TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
        // Chosen at random, not one port over and over.
        assert!(ports.iter().any(|&p| p != ports[0]), "{ports:?}");
    }

    /// Serves `reply` once on a loopback port; returns the address.
    fn serve_once(reply: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0; 1024];
            let _ = s.read(&mut buf);
            s.write_all(reply).unwrap();
        });
        addr
    }

    #[test]
    fn reads_chunked_sized_and_unsized_bodies() {
        let chunked = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-encoding: chunked\r\nConnection: Keep-Alive\r\n\r\n\
              5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n",
        );
        let r = get(chunked, "/", &[]).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "hello, world"));
        // Kept alive: the length, not the end of the connection, ends it.
        let sized =
            serve_once(b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nX-A: b\r\n\r\nnopeMORE");
        let r = get(sized, "/x", &[]).unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "nope"));
        assert_eq!(r.header("x-a"), Some("b"));
        let to_end = serve_once(b"HTTP/1.0 200 OK\r\n\r\nto the end");
        assert_eq!(get(to_end, "/", &[]).unwrap().body, "to the end");
    }

    /// A server that trickles chunks for ever, or announces a chunk of
    /// 2^64 - 1 bytes: an error within the time given, not a hang or a
    /// panic.
    #[test]
    fn a_trickling_or_lying_server_is_an_error_in_time() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let trickle = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            while s.write_all(b"1\r\nx\r\n").is_ok() {
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let t = Instant::now();
        let e = get_within(trickle, "/", &[], Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        let liar = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nx",
        );
        assert!(get(liar, "/", &[]).is_err());
        let huge = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\nx");
        assert!(get(huge, "/", &[]).is_err());
    }

    #[test]
    fn encodes_a_promql_query() {
        assert_eq!(
            encode("rate(a_b{c=\"d\"}[5s])"),
            "rate%28a_b%7Bc%3D%22d%22%7D%5B5s%5D%29"
        );
    }
}
