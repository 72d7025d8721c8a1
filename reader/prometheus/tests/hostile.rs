//! perfabi-prometheus under attack and under load (issue 30): idle and
//! half-sent connections, clients reading a large page slowly, the bound
//! on open connections, keep-alive with its deadlines, `HEAD` and the
//! answers to other methods and paths, log lines of an untrusted path, and
//! an open-file limit below the connection bound.
//!
//! Every wait is bounded by time (generous: the machine may be busy); the
//! figures (how fast, how many) are the bench's,
//! `reader/prometheus/benches/hostile-clients`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfabi::{Buckets, FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::http::{self, read_response};

mod common;
use common::{ask, closed_within, connect, exchange, start, start_under};

/// A writer whose page has `members` counter series of one family, each
/// with a label: about 90 bytes of page per member.
fn segment(path: &Path, members: u32) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            max_instances: members + 8,
            max_families: 4,
            max_members: members + 8,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let fam = w
        .add_family(&FamilySpec::new(
            "net.rx_bytes",
            "Bytes received",
            "device",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    for i in 0..members {
        let m = w
            .add_member(fam, &format!("dev{i:06}"), &[("driver", "virtio_net")])
            .unwrap();
        w.member_add(&m, i64::from(i) * 1000).unwrap();
    }
    w
}

/// An endpoint started with `args` on a [`segment`] of `members` in a
/// directory of its own; the endpoint, the writer and the directory go in
/// that order when it is dropped.
struct Served {
    endpoint: common::Running,
    _writer: Writer,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Served {
    type Target = common::Running;

    fn deref(&self) -> &common::Running {
        &self.endpoint
    }
}

/// [`Served`]: a tempdir, a [`segment`] of `members` and `start(args)`.
fn served(members: u32, args: &[&str]) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let writer = segment(&path, members);
    Served {
        endpoint: start(&path, args),
        _writer: writer,
        _dir: dir,
    }
}

/// A writer whose page is large: `members` histogram series of 20 buckets
/// (about 1.7 KB of page per member).
fn large_segment(path: &Path, members: u32) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            // A histogram member's slots: its buckets, +Inf, sum, count.
            max_instances: members * 24 + 8,
            max_families: 4,
            max_members: members + 8,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let bounds = (0..20).map(|b| 1u64 << b).collect();
    let fam = w
        .add_family(&FamilySpec::histogram(
            "rpc.latency",
            "RPC latency",
            "handler",
            Unit::NS,
            Buckets::Explicit(bounds),
        ))
        .unwrap();
    for i in 0..members {
        let m = w.add_member(fam, &format!("h{i:05}"), &[]).unwrap();
        w.observe(&m, u64::from(i)).unwrap();
    }
    w
}

/// A scrape on a new connection, which must be answered whole, 200,
/// within `within`; how long it took.
fn scrape_within(addr: SocketAddr, within: Duration) -> Duration {
    let t = Instant::now();
    let r = http::get_within(addr, "/metrics", &[], within)
        .unwrap_or_else(|e| panic!("no scrape within {within:?}: {e}"));
    assert_eq!(r.status, 200, "{}", r.body);
    t.elapsed()
}

/// 200 connections open and silent, and 20 that sent half a request head
/// and stopped: scrapes on new connections are answered at once, none
/// waiting for those (the old endpoint's 2 workers each waited 5 s for a
/// head, so a scrape queued behind them took minutes).
#[test]
fn idle_and_half_sent_connections_delay_no_scrape() {
    let e = served(100, &[]);
    let mut held = Vec::new();
    for _ in 0..200 {
        held.push(TcpStream::connect(e.addr).unwrap());
    }
    for _ in 0..20 {
        let mut s = TcpStream::connect(e.addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*")
            .unwrap();
        held.push(s);
    }
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        slowest = slowest.max(scrape_within(e.addr, Duration::from_secs(5)));
    }
    println!(
        "PROMETHEUS-IDLE 10 scrapes beside 200 idle and 20 half-sent connections, slowest {slowest:.1?}"
    );
    drop(held);
}

/// Clients that ask for a 2 MB page and read it 4 KiB at a time, every
/// 0.5 s, with a 4 KiB receive buffer: more of them than the old endpoint
/// had workers. Other scrapes are answered meanwhile, and each slow reader
/// is cut off once the send deadline (`--write-timeout 2`) passes, before
/// it got the page.
#[test]
fn slow_readers_delay_no_scrape_and_are_cut_off_at_the_send_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let t = Instant::now();
    let _w = large_segment(&path, 2_000);
    println!("segment in {:?}", t.elapsed());
    let e = start(&path, &["--write-timeout", "2"]);
    let page = http::get(e.addr, "/metrics", &[]).unwrap().body.len();
    assert!(page > 2_000_000, "a page of {page} bytes");
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let sock =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.set_recv_buffer_size(4096).unwrap();
            sock.connect(&e.addr.into()).unwrap();
            let mut s: TcpStream = sock.into();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut got = 0;
                let mut buf = [0u8; 4096];
                // Up to 30 s: far past the deadline.
                while t.elapsed() < Duration::from_secs(30) && !stop.load(Ordering::Relaxed) {
                    match s.read(&mut buf) {
                        Ok(0) => return Some((got, t.elapsed())),
                        Ok(n) => got += n,
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                            return Some((got, t.elapsed()))
                        }
                        Err(_) => {} // nothing yet
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                None
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let mut scrapes = 0;
    let mut slowest = Duration::ZERO;
    while t.elapsed() < Duration::from_secs(3) {
        slowest = slowest.max(scrape_within(e.addr, Duration::from_secs(5)));
        scrapes += 1;
    }
    let cut: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    println!(
        "PROMETHEUS-SLOW-READERS {scrapes} scrapes of {page} bytes beside 4 slow readers, \
         slowest {slowest:.1?}; the readers (bytes read, cut after): {cut:?}"
    );
    for c in cut {
        let (got, after) = c.expect("a slow reader still connected after 30 s");
        assert!(got < page, "a slow reader got the whole page ({got} bytes)");
        assert!(
            after < Duration::from_secs(20),
            "a slow reader cut after {after:?}"
        );
    }
}

/// `--max-connections 4`: two idle connections, one in the middle of a
/// head, one more idle; a fifth connection is served, and the one idle the
/// longest is closed to make room, not the newer one reading a head (which
/// is answered when it ends its head) nor the newer idle ones.
#[test]
fn at_the_bound_the_connection_idle_the_longest_is_closed() {
    let e = served(10, &["--max-connections", "4", "--read-timeout", "60"]);
    let pause = || std::thread::sleep(Duration::from_millis(200));
    let mut c1 = connect(e.addr);
    pause();
    let mut c2 = connect(e.addr);
    pause();
    let mut c3 = connect(e.addr);
    c3.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    pause();
    let mut c4 = connect(e.addr);
    pause();

    let mut c5 = connect(e.addr);
    let r = ask(&mut c5, "GET", "/", None).unwrap();
    assert_eq!(r.status, 200);
    assert!(closed_within(&mut c1, Duration::from_secs(5)), "c1 open");
    for (name, c) in [("c2", &mut c2), ("c3", &mut c3), ("c4", &mut c4)] {
        assert!(
            !closed_within(c, Duration::from_millis(300)),
            "{name} closed"
        );
    }
    // c3 ends its head and is answered; it is idle from then on, after c2
    // and c4 (idle since their accept) and c5.
    let r = exchange(&mut c3, b"Host: x\r\n\r\n").unwrap();
    assert_eq!(r.status, 200);
    let mut c6 = connect(e.addr);
    assert_eq!(ask(&mut c6, "GET", "/metrics", None).unwrap().status, 200);
    assert!(closed_within(&mut c2, Duration::from_secs(5)), "c2 open");
    for (name, c) in [("c3", &mut c3), ("c4", &mut c4), ("c5", &mut c5)] {
        assert!(
            !closed_within(c, Duration::from_millis(300)),
            "{name} closed"
        );
    }
    // The kept-alive ones still serve.
    assert_eq!(ask(&mut c5, "GET", "/metrics", None).unwrap().status, 200);
    println!("PROMETHEUS-BOUND at 4 connections, the idle-longest closed twice, the others served");
}

/// Two requests on one connection, the second after longer than the send
/// deadline (an idle connection is not answering); then the connection is
/// closed once it has been idle for `--idle-timeout`, not before.
#[test]
fn a_kept_alive_connection_serves_again_until_idle_too_long() {
    let e = served(10, &["--write-timeout", "1", "--idle-timeout", "4"]);
    let mut s = connect(e.addr);
    // The segment's family alone: the endpoint's own change between two
    // scrapes.
    let page = "/metrics?name[]=perfabi_net_rx_bytes";
    let first = ask(&mut s, "GET", page, None).unwrap();
    assert_eq!(first.status, 200);
    std::thread::sleep(Duration::from_millis(1500));
    let second = ask(&mut s, "GET", page, None).unwrap();
    assert_eq!(second.status, 200);
    assert_eq!(first.body, second.body);
    let t = Instant::now();
    assert!(
        closed_within(&mut s, Duration::from_secs(15)),
        "idle for 15 s and still open"
    );
    let idle = t.elapsed();
    // The deadline counts from the server's flush, before this client got
    // the answer: allow it 2 s of delay, no more than the idle time.
    assert!(idle > Duration::from_secs(2), "closed after {idle:?} idle");
    println!("PROMETHEUS-KEEP-ALIVE two requests on one connection, closed after {idle:.1?} idle");
}

/// `HEAD` of `/metrics` and `/` gives the head `GET` gives (status, type,
/// length) and no body: the next answer on the same connection follows
/// the head at once. Other methods on those paths are 405 with `Allow`;
/// other paths are 404 whatever the method.
#[test]
fn head_is_get_without_a_body_and_other_methods_are_405() {
    let e = served(10, &[]);
    let mut s = connect(e.addr);
    // The segment's family alone: the endpoint's own change between two
    // scrapes, and their length with them.
    for p in ["/metrics?name[]=perfabi_net_rx_bytes", "/"] {
        let get = ask(&mut s, "GET", p, None).unwrap();
        let head = ask(&mut s, "HEAD", p, None).unwrap();
        assert_eq!(get.status, 200, "{}", get.body);
        assert_eq!(head.status, 200, "HEAD {p}: {}", head.head);
        for h in ["Content-Type", "Content-Length"] {
            assert_eq!(head.header(h), get.header(h), "HEAD {p}: {h}");
        }
        assert_eq!(
            get.header("Content-Length"),
            Some(get.body.len().to_string().as_str())
        );
        // Had HEAD sent a body, this would read it as a response.
        let next = ask(&mut s, "GET", "/", None).unwrap();
        assert_eq!(next.status, 200, "after HEAD {p}: {}", next.head);
    }
    for (method, p, status) in [
        ("POST", "/metrics", 405),
        ("PUT", "/", 405),
        ("DELETE", "/metrics?x=1", 405),
        ("POST", "/nosuch", 404),
        ("GET", "/nosuch", 404),
        ("HEAD", "/nosuch", 404),
    ] {
        let mut s = connect(e.addr);
        let r = ask(&mut s, method, p, None).unwrap();
        assert_eq!(r.status, status, "{method} {p}: {}", r.head);
        if status == 405 {
            assert_eq!(r.header("Allow"), Some("GET, HEAD"), "{method} {p}");
        }
    }
    println!("PROMETHEUS-METHODS HEAD as GET without a body; 405 with Allow; 404");
}

/// A segment path with terminal controls and a line break: the log lines
/// and the 503's reason show them escaped (`perfabi::text::escape`), never
/// as the bytes themselves.
#[test]
fn an_untrusted_path_is_logged_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg\x1b]0;pwn\x07\x1b[2J\nFAKE LINE");
    let e = start(&path, &[]);
    let r = http::get(e.addr, "/metrics", &[]).unwrap();
    assert_eq!(r.status, 503);
    assert!(
        r.body
            .contains("seg\\u{1b}]0;pwn\\u{7}\\u{1b}[2J\\nFAKE LINE"),
        "{}",
        r.body
    );
    assert_eq!(r.body.lines().count(), 1, "{:?}", r.body);
    let index = http::get(e.addr, "/", &[]).unwrap();
    assert!(!index.body.contains('\x1b'), "{:?}", index.body);
    // The log is read by another thread: wait for the 503's line.
    let end = Instant::now() + Duration::from_secs(10);
    while !e.log().iter().any(|l| l.contains("answering 503")) {
        assert!(Instant::now() < end, "no 503 logged: {:?}", e.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = e.log();
    for l in &log {
        assert!(!l.contains(['\x1b', '\x07']), "a raw control in {l:?}");
        assert!(!l.starts_with("FAKE LINE"), "a forged line {l:?}");
    }
    assert!(
        log.iter().any(|l| l.contains("seg\\u{1b}]0;pwn")),
        "{log:?}"
    );
    println!("PROMETHEUS-ESCAPED {:?}", log.last());
}

/// Started with an open-file limit of 64 (soft and hard) and the default
/// bound of 1,024 connections: it lowers the bound to what the limit
/// holds and says so, and with 100 connections opened and left idle it
/// keeps serving (closing the idle ones), never out of descriptors.
#[test]
fn an_open_file_limit_below_the_bound_lowers_it() {
    let prlimit = Path::new("/usr/bin/prlimit");
    if !perfabi_test_harness::need_file(
        "an_open_file_limit_below_the_bound_lowers_it",
        prlimit,
        "apt-get install util-linux",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = segment(&path, 10);
    let e = start_under(&["/usr/bin/prlimit", "--nofile=64:64", "--"], &path, &[]);
    let lowered = format!("--max-connections 1024 lowered to {}", 64 - 32);
    assert!(
        e.log().iter().any(|l| l.contains(&lowered)),
        "{:?}",
        e.log()
    );
    let held: Vec<_> = (0..100)
        .map(|_| TcpStream::connect(e.addr).unwrap())
        .collect();
    for _ in 0..5 {
        scrape_within(e.addr, Duration::from_secs(5));
    }
    // Its TCP sockets: the listener, at most 32 connections, and one
    // accepted waiting for room (were the bound not lowered, it would take
    // connections until the kernel refused it a descriptor). Its runtime's
    // signal socket pair (SIGHUP reloads the web configuration) is not one.
    let tcp: std::collections::HashSet<String> = ["tcp", "tcp6"]
        .iter()
        .flat_map(|t| {
            std::fs::read_to_string(format!("/proc/{}/net/{t}", e.pid()))
                .unwrap_or_default()
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().nth(9).map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    let sockets = std::fs::read_dir(format!("/proc/{}/fd", e.pid()))
        .unwrap()
        .filter_map(|f| std::fs::read_link(f.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .filter(|inode| tcp.contains(inode))
        .count();
    assert!(sockets <= 34, "{sockets} sockets open");
    let starved: Vec<_> = e
        .log()
        .into_iter()
        .filter(|l| l.contains("cannot accept"))
        .collect();
    assert!(starved.is_empty(), "out of descriptors: {starved:?}");
    println!(
        "PROMETHEUS-NOFILE bound lowered to 32; 5 scrapes beside 100 idle connections, \
         {sockets} sockets open"
    );
    drop(held);
}

/// `--max-connections 8`, all 8 held by clients in the middle of a request
/// head, with `--read-timeout 60`: scrapes on new connections are answered
/// at once, each closing the connection that has trickled its head the
/// longest (before, none could be closed to make room, so a scrape waited
/// in the listen queue until the first head's deadline, a minute).
#[test]
fn a_bound_full_of_unfinished_heads_delays_no_scrape() {
    let e = served(10, &["--max-connections", "8", "--read-timeout", "60"]);
    let mut heads: Vec<_> = (0..8)
        .map(|_| {
            let mut s = connect(e.addr);
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            std::thread::sleep(Duration::from_millis(100));
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let first = scrape_within(e.addr, Duration::from_secs(5));
    assert!(closed_within(&mut heads[0], Duration::from_secs(5)));
    // The bound full again (the scrape's connection is closed).
    let mut refill = connect(e.addr);
    refill.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let second = scrape_within(e.addr, Duration::from_secs(5));
    assert!(closed_within(&mut heads[1], Duration::from_secs(5)));
    assert!(!closed_within(&mut refill, Duration::from_millis(100)));
    for (i, h) in heads.iter_mut().enumerate().skip(2) {
        assert!(
            !closed_within(h, Duration::from_millis(100)),
            "head {i} closed"
        );
    }
    // One still open ends its head, and is answered.
    let r = exchange(&mut heads[2], b"\r\n").unwrap();
    assert_eq!(r.status, 200);
    println!(
        "PROMETHEUS-HEADS-AT-BOUND 2 scrapes beside 8 unfinished heads at the bound, \
         in {first:.1?} and {second:.1?}, the 2 oldest heads closed"
    );
}

/// A client that pipelines requests and never reads the answers, with a
/// small receive buffer, until the endpoint stops reading its requests
/// (its answers stuck unsent): the connection, stalled.
fn stalled_pipeliner(addr: SocketAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.set_send_buffer_size(4096).unwrap();
    sock.connect(&addr.into()).unwrap();
    sock.set_nonblocking(true).unwrap();
    let mut s: TcpStream = sock.into();
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let end = Instant::now() + Duration::from_secs(20);
    // Stalled once the requests stay unread for 300 ms.
    let mut blocked_since: Option<Instant> = None;
    while blocked_since.is_none_or(|t| t.elapsed() < Duration::from_millis(300)) {
        assert!(Instant::now() < end, "the endpoint still reads after 20 s");
        match s.write(request) {
            Ok(_) => blocked_since = None,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                blocked_since.get_or_insert_with(Instant::now);
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    }
    s.set_nonblocking(false).unwrap();
    s
}

/// `--max-connections 8`, all 8 held by clients whose pipelined answers
/// are stuck unsent (they never read), with `--write-timeout 60`: scrapes
/// on new connections are answered at once, each closing the connection
/// stalled the longest (before, an answering connection could not be
/// closed to make room, so a scrape waited in the listen queue for a
/// minute).
#[test]
fn a_bound_full_of_stalled_answers_delays_no_scrape() {
    let e = served(10, &["--max-connections", "8", "--write-timeout", "60"]);
    let mut stalled: Vec<_> = (0..8).map(|_| stalled_pipeliner(e.addr)).collect();
    let took = scrape_within(e.addr, Duration::from_secs(5));
    assert!(closed_within(&mut stalled[0], Duration::from_secs(5)));
    for (i, s) in stalled.iter_mut().enumerate().skip(1) {
        // Reading what it was sent would unstall it: peek only.
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        assert!(
            matches!(s.peek(&mut b), Ok(1)),
            "stalled connection {i} closed"
        );
    }
    println!(
        "PROMETHEUS-STALLED-AT-BOUND a scrape beside 8 stalled pipeliners at the bound, \
         in {took:.1?}, the oldest closed"
    );
}

/// A client that asks for `/metrics` with a 4 KiB receive buffer, reads the
/// first bytes of the answer (the page is rendered and on its way) and no
/// more: its answer stalls.
fn slow_reader(addr: SocketAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut s: TcpStream = sock.into();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "a slow reader's answer");
    s
}

/// Whether the server reset `s` (a client that has not read what it was
/// sent: the error is pending behind the unread bytes, which stay unread).
fn reset(s: &TcpStream) -> bool {
    s.take_error().unwrap().is_some()
}

/// Waits up to `within` for the server to reset `s`.
fn reset_within(s: &TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    while !reset(s) {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// `--max-requests 2`, both held by clients that stopped reading a 1.9 MB
/// page (`--write-timeout 60`): a third scrape is answered at once, the
/// one stalled the longest closed to make room, the other kept. (At first
/// a stuck page gave its place back as soon as hyper took it into its
/// buffer, so the bound held none of them; then it kept its place, and the
/// third scrape was 503 for a minute.)
#[test]
fn at_the_scrape_bound_the_reader_stalled_the_longest_makes_room() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = large_segment(&path, 1_500);
    let e = start(&path, &["--max-requests", "2", "--write-timeout", "60"]);
    let a = slow_reader(e.addr);
    std::thread::sleep(Duration::from_millis(200));
    let b = slow_reader(e.addr);
    std::thread::sleep(Duration::from_millis(200));
    let took = scrape_within(e.addr, Duration::from_secs(5));
    assert!(reset_within(&a, Duration::from_secs(5)), "a kept");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!reset(&b), "b closed too");
    // Again: b is the one stalled the longest now.
    let c = slow_reader(e.addr);
    scrape_within(e.addr, Duration::from_secs(5));
    assert!(reset_within(&b, Duration::from_secs(5)), "b kept");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!reset(&c), "c closed too");
    println!(
        "PROMETHEUS-SCRAPE-BOUND a scrape beside 2 stalled pages at --max-requests 2 in \
         {took:.1?}, the reader stalled the longest closed"
    );
}

/// `--max-page-memory 1` (MiB) and pages of 1.9 MB: one page in flight at
/// a time. A client that stopped reading holds it; the next scrape closes
/// that client and is answered (before, pages in flight were bounded by
/// `--max-requests` alone: 40 of 20 MB held 775 MB).
#[test]
fn the_pages_in_flight_keep_within_max_page_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = large_segment(&path, 1_500);
    let e = start(&path, &["--max-page-memory", "1", "--write-timeout", "60"]);
    let a = slow_reader(e.addr);
    std::thread::sleep(Duration::from_millis(200));
    let b = slow_reader(e.addr);
    assert!(reset_within(&a, Duration::from_secs(5)), "a kept");
    scrape_within(e.addr, Duration::from_secs(5));
    assert!(reset_within(&b, Duration::from_secs(5)), "b kept");
    println!(
        "PROMETHEUS-PAGE-MEMORY one 1.9 MB page at a time within 1 MiB, the stalled one closed"
    );
}

/// The bytes the kernel holds for the endpoint's side of connection `s`
/// (sent and not yet acknowledged, or not yet sent: `tx_queue` in
/// `/proc/net/tcp`).
fn kernel_holds_for_endpoint(s: &TcpStream) -> usize {
    endpoint_queues(s).0
}

/// The bytes the endpoint's kernel holds for the connection `s` (the
/// client's side): the answers unsent and the requests unread (the
/// `tx_queue` and `rx_queue` of its line in `/proc/net/tcp`).
fn endpoint_queues(s: &TcpStream) -> (usize, usize) {
    let (client, server) = (s.local_addr().unwrap(), s.peer_addr().unwrap());
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    tcp.lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            let port = |a: &str| u16::from_str_radix(a.rsplit(':').next()?, 16).ok();
            let (tx, rx) = f[4].split_once(':')?;
            let hex = |q: &str| usize::from_str_radix(q, 16).unwrap();
            (port(f[1]) == Some(server.port()) && port(f[2]) == Some(client.port()))
                .then(|| (hex(tx), hex(rx)))
        })
        .expect("the endpoint's side of the connection in /proc/net/tcp")
}

/// A client that pipelines requests and never reads costs the endpoint the
/// answers its kernel holds before the endpoint stops: at most 48 KiB of
/// them (`TCP_NOTSENT_LOWAT` of 16 KiB and what is in flight). With 128
/// KiB the endpoint answered about 850 short requests, 1.8 ms of CPU, for each
/// such connection: 2,000 of them, closed at the bound and opened again,
/// kept the endpoint's listen queue full and new connections waiting in
/// it for 1 to 3 s (the bench's `--stalled 2000`).
#[test]
fn a_client_that_never_reads_costs_few_answers() {
    let e = served(10, &[]);
    let s = stalled_pipeliner(e.addr);
    let held = kernel_holds_for_endpoint(&s);
    assert!(held <= 48 << 10, "the kernel holds {held} bytes for it");
    println!("PROMETHEUS-UNREAD a client that never reads: {held} bytes of answers held");
}

/// The requests of a client that pipelines them and never reads its
/// answers wait, unread, in the endpoint's receive buffer: at most 32 KiB
/// of it (`SO_RCVBUF` of 16 KiB, which the kernel doubles) — a request head
/// is at most 8 KiB. With the kernel's default (`net.ipv4.tcp_rmem`, 128
/// KiB and growing) 1,024 such connections held over 100 MiB of the
/// machine's memory.
#[test]
fn a_client_that_never_reads_costs_little_memory_for_its_requests() {
    let e = served(10, &[]);
    let s = stalled_pipeliner(e.addr);
    let (_, unread) = endpoint_queues(&s);
    assert!(
        unread <= 40 << 10,
        "the endpoint's kernel holds {unread} bytes of its requests"
    );
    println!("PROMETHEUS-UNREAD a client that never reads: {unread} bytes of its requests held");
}

/// The soft open-file limit of process `pid`.
fn soft_open_files(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

/// `prlimit --pid PID --nofile=SOFT:` (the hard limit left as it is).
fn set_soft_open_files(pid: u32, soft: u64) {
    let ok = std::process::Command::new("/usr/bin/prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:")])
        .status()
        .unwrap()
        .success();
    assert!(ok, "prlimit --pid {pid} --nofile={soft}:");
}

/// Its open-file limit lowered under it below what its connections take
/// (a bound it could not foresee): as clients trickling heads keep coming,
/// accepting fails (EMFILE) each time a descriptor is freed for one. It
/// says so in one line, with how many failures since, at most once a
/// minute (it logged two lines each time, every 100 ms, for as long as it
/// lasted), and serves again once the limit is back.
#[test]
fn running_out_of_descriptors_is_logged_once_not_at_each_accept() {
    let prlimit = Path::new("/usr/bin/prlimit");
    if !perfabi_test_harness::need_file(
        "running_out_of_descriptors_is_logged_once_not_at_each_accept",
        prlimit,
        "apt-get install util-linux",
    ) {
        return;
    }
    let e = served(10, &[]);
    scrape_within(e.addr, Duration::from_secs(5));
    let soft = soft_open_files(e.pid());
    set_soft_open_files(e.pid(), 24);
    let starved = |log: Vec<String>| {
        log.into_iter()
            .filter(|l| l.contains("cannot accept") || l.contains("accepting connections again"))
            .count()
    };
    let held: Vec<_> = (0..60)
        .map(|_| {
            let mut s = TcpStream::connect(e.addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    let end = Instant::now() + Duration::from_secs(10);
    while starved(e.log()) == 0 {
        assert!(
            Instant::now() < end,
            "never out of descriptors: {:?}",
            e.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Accepting keeps failing and recovering for about 4 s (one of the 60
    // a pause of 100 ms): watch 3 s of it.
    std::thread::sleep(Duration::from_secs(3));
    let lines = starved(e.log());
    assert!(lines <= 2, "{lines} lines: {:?}", e.log());
    set_soft_open_files(e.pid(), soft);
    drop(held);
    let end = Instant::now() + Duration::from_secs(10);
    while http::get(e.addr, "/metrics", &[]).map(|r| r.status).ok() != Some(200) {
        assert!(Instant::now() < end, "not serving again: {:?}", e.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("PROMETHEUS-EMFILE out of descriptors for seconds: {lines} log lines");
}

/// An HTTP/1.1 request without a `Host` header, or any request with two,
/// is answered 400 saying so, and the connection closed, as RFC 9112
/// §3.2 requires (they were served: a request a proxy in front may have
/// routed by the other `Host`); HTTP/1.0 without one is served.
#[test]
fn a_request_without_one_host_is_400() {
    let e = served(10, &[]);
    for request in [
        &b"GET /metrics HTTP/1.1\r\n\r\n"[..],
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET http://a/metrics HTTP/1.1\r\n\r\n",
    ] {
        let mut s = connect(e.addr);
        let r = exchange(&mut s, request).unwrap();
        let shown = String::from_utf8_lossy(request);
        assert_eq!(r.status, 400, "{shown:?}: {}", r.head);
        assert!(r.body.contains("one Host header"), "{shown:?}: {}", r.body);
        assert!(closed_within(&mut s, Duration::from_secs(5)), "{shown:?}");
    }
    let mut s = connect(e.addr);
    let r = exchange(&mut s, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(r.status, 200, "{}", r.head);
    println!("PROMETHEUS-HOST no Host or two: 400");
}

/// A client speaking HTTP/2 first (prior knowledge) is told in HTTP/2 to
/// use HTTP/1.1: an empty SETTINGS frame, then GOAWAY with the error
/// HTTP_1_1_REQUIRED (0xd) and a reason; before, the connection was closed
/// without a byte, and curl said "stream 1 was not closed cleanly".
#[test]
fn an_http2_client_is_told_to_use_http1() {
    let e = served(10, &[]);
    let mut s = connect(e.addr);
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert!(got.len() >= 26, "{got:?}");
    assert_eq!(&got[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0], "SETTINGS: {got:?}");
    assert_eq!(&got[12..18], &[7, 0, 0, 0, 0, 0], "GOAWAY: {got:?}");
    assert_eq!(&got[22..26], &[0, 0, 0, 0xd], "HTTP_1_1_REQUIRED: {got:?}");
    let why = String::from_utf8_lossy(&got[26..]);
    assert!(why.contains("HTTP/1.1"), "{why}");
    println!("PROMETHEUS-H2 prior knowledge refused: {why}");
}

/// A request head not whole within `--read-timeout` (a client typing it
/// by hand, say) is answered 408 saying what timed out, then closed;
/// before, the connection was reset without a word.
#[test]
fn a_head_not_whole_in_time_is_408() {
    let e = served(10, &["--read-timeout", "1"]);
    let mut s = connect(e.addr);
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let t = Instant::now();
    let r = read_response(&mut std::io::BufReader::new(&s), false).unwrap();
    assert_eq!(r.status, 408, "{}", r.head);
    assert!(r.body.contains("--read-timeout"), "{}", r.body);
    assert!(closed_within(&mut s, Duration::from_secs(5)));
    println!(
        "PROMETHEUS-408 a head not whole in 1 s answered 408 after {:.1?}",
        t.elapsed()
    );
}
