//! A small HTTP/1.1 client for the tests that ask servers on loopback
//! (Prometheus' API, pmproxy's `/metrics`): one `GET` per connection, the
//! body read by `Content-Length`, by chunks (`Transfer-Encoding: chunked`,
//! which pmproxy uses for a page of any size) or to the end.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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
/// cannot be reached or answers no HTTP within 20 s.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n")
            .as_bytes(),
    )?;
    let mut r = BufReader::new(s);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
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
    let mut body = Vec::new();
    if resp
        .header("Transfer-Encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| bad("a bad chunk size"))?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = resp.header("Content-Length").and_then(|v| v.parse().ok()) {
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
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

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

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

    #[test]
    fn encodes_a_promql_query() {
        assert_eq!(
            encode("rate(a_b{c=\"d\"}[5s])"),
            "rate%28a_b%7Bc%3D%22d%22%7D%5B5s%5D%29"
        );
    }
}
