//! The server: hyper's HTTP/1.1 on a tokio runtime, one task per
//! connection, each closed when the deadline of what it is doing passes
//! ([`Limits`]), at most [`Limits::max_connections`] of them; over TLS
//! when the web configuration asks ([`Web`]), the handshake under the
//! same deadlines as a request head.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustix::io::Errno;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::connections::{Slot, Table};
use crate::limits::{Limits, MAX_HEAD, MAX_HEADERS};
use crate::routes::Routes;
use crate::watched::Watched;
use crate::web::Web;
use crate::Endpoint;

/// Connections the kernel completes and queues for `accept` while the
/// endpoint is busy (its listen backlog; the kernel caps it at
/// `net.core.somaxconn`).
pub const BACKLOG: i32 = 1024;

/// Most bytes of an answer the kernel holds unsent for a connection
/// (`TCP_NOTSENT_LOWAT`): the rest stays in the endpoint, where the send
/// deadline counts it. Without it the kernel takes up to 4 MiB
/// (`net.ipv4.tcp_wmem`) of a page at once, and a slow reader would hold
/// that, past the deadline, once the answer looked sent. At 16 KiB a
/// client that pipelines requests and never reads is sent about 130 short
/// answers before the endpoint stops (at 128 KiB, about 900: 1.8 ms of
/// CPU for each such connection), and a 20 MB page goes as fast to a
/// client that reads.
pub const UNSENT_LOWAT: u32 = 16 << 10;

/// The receive buffer of every connection (`SO_RCVBUF`, set on the
/// listener and inherited by what it accepts; the kernel doubles it): a
/// request head is at most [`MAX_HEAD`] bytes, and the requests a client
/// pipelines without reading its answers wait there, unread. The kernel's
/// default (`net.ipv4.tcp_rmem`, 128 KiB and growing) let 1,024 such
/// clients hold over 100 MiB of the machine's memory.
pub const RECV_BUFFER: usize = 16 << 10;

/// How long accepting pauses after the process ran out of file
/// descriptors (or the kernel of memory) for a new connection.
const STARVED_PAUSE: Duration = Duration::from_millis(100);

/// Running out of descriptors is logged at most this often: while clients
/// keep coming it fails each time one is freed (every [`STARVED_PAUSE`]).
const STARVED_LOG_EVERY: Duration = Duration::from_secs(60);

/// A TCP listener on `addr` with a listen queue of [`BACKLOG`]
/// connections (the standard library's `bind` queues 128).
pub fn listen(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_recv_buffer_size(RECV_BUFFER)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// Serves `endpoint` on `listener` until the listener fails for good:
/// `threads` threads (at least one) serve the connections, and as many
/// more take snapshots and render pages, within `limits`; plain HTTP, no
/// authentication ([`serve_with`] takes a web configuration).
pub fn serve(
    listener: std::net::TcpListener,
    endpoint: Arc<Endpoint>,
    threads: usize,
    limits: Limits,
) -> io::Result<()> {
    serve_with(listener, endpoint, threads, limits, Web::default())
}

/// [`serve`] with the TLS, users and headers of `web`; if `web` was read
/// from a file ([`Web::load`]), the file is read again at each `SIGHUP`.
pub fn serve_with(
    listener: std::net::TcpListener,
    endpoint: Arc<Endpoint>,
    threads: usize,
    limits: Limits,
    web: Web,
) -> io::Result<()> {
    let threads = threads.max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .max_blocking_threads(threads)
        .thread_name("perfabi-http")
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(run(listener, endpoint, limits, Arc::new(web)))
}

/// Everything a connection's task needs.
struct Shared {
    routes: Routes,
    http: http1::Builder,
    limits: Limits,
    web: Arc<Web>,
}

/// The accept loop.
async fn run(
    listener: std::net::TcpListener,
    endpoint: Arc<Endpoint>,
    limits: Limits,
    web: Arc<Web>,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let mut http = http1::Builder::new();
    http.keep_alive(true)
        .half_close(true)
        .max_buf_size(MAX_HEAD)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .title_case_headers(true)
        // The deadlines are the connection task's (hyper's one timeout
        // counts idle time and the head together).
        .header_read_timeout(None);
    if web.source().is_some() {
        tokio::spawn(reload_on_hangup(Arc::clone(&web)));
    }
    let table = Arc::new(Table::new(limits.max_connections));
    let shared = Arc::new(Shared {
        routes: Routes::new(endpoint, &limits, Arc::clone(&table), Arc::clone(&web)),
        http,
        limits,
        web,
    });
    let mut starved = Starved::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok((stream, peer)) => {
                starved.recovered();
                (stream, peer)
            }
            // The connection is still queued: close one waiting on its
            // client to free a descriptor, and pause rather than spin on it.
            Err(e) if is_starved(&e) => {
                starved.failed(&e, table.len());
                table.close_longest_waiting();
                tokio::time::sleep(STARVED_PAUSE).await;
                continue;
            }
            // That connection is gone (reset before accept): the next.
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(e),
        };
        let slot = table.admit().await;
        tokio::spawn(connection(stream, peer, slot, Arc::clone(&shared)));
    }
}

/// Reads the web configuration file again at each `SIGHUP`
/// ([`Web::reload`]; on a blocking thread: it reads files and hashes).
async fn reload_on_hangup(web: Arc<Web>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!(
                "perfabi-prometheus: cannot catch SIGHUP ({e}): the web configuration is read once"
            );
            return;
        }
    };
    while hangups.recv().await.is_some() {
        let web = Arc::clone(&web);
        let _ = tokio::task::spawn_blocking(move || web.reload()).await;
    }
}

/// The log of accepts failing for want of descriptors (or memory): a line
/// when it begins, one when accepting works again, and while it keeps
/// failing and working again, a line a [`STARVED_LOG_EVERY`] at most,
/// counting the failures it stands for.
#[derive(Default)]
struct Starved {
    /// When a failure was last logged.
    logged: Option<Instant>,
    /// Failures since then, not logged.
    unlogged: u64,
    /// A failure was logged, and no accept since.
    failing: bool,
}

impl Starved {
    fn failed(&mut self, e: &io::Error, open: usize) {
        if self.logged.is_some_and(|t| t.elapsed() < STARVED_LOG_EVERY) {
            self.unlogged += 1;
            return;
        }
        let since = match self.unlogged {
            0 => String::new(),
            n => format!(" ({n} more times since the last such line)"),
        };
        eprintln!(
            "perfabi-prometheus: cannot accept a connection ({e}) with {open} open: \
             closing the ones waiting on their clients, pausing {} ms each time{since}",
            STARVED_PAUSE.as_millis()
        );
        self.logged = Some(Instant::now());
        self.unlogged = 0;
        self.failing = true;
    }

    fn recovered(&mut self) {
        if std::mem::take(&mut self.failing) {
            eprintln!("perfabi-prometheus: accepting connections again");
        }
    }
}

/// Serves one connection until it closes, fails, or the deadline of what
/// it is doing passes (or it is evicted to make room). Over TLS, the
/// handshake's bytes count as a request head's (its first byte starts the
/// read deadline); a failed handshake is counted and logged
/// ([`crate::tls::HandshakeLog`]), and the connection closed.
async fn connection(stream: TcpStream, peer: SocketAddr, slot: Slot, shared: Arc<Shared>) {
    // The answer's head and body leave in one write, but a kept-alive
    // connection's next small answer must not wait for an ACK.
    let _ = stream.set_nodelay(true);
    let _ = socket2::SockRef::from(&stream).set_tcp_notsent_lowat(UNSENT_LOWAT);
    let conn = Arc::clone(&slot.conn);
    let service = {
        let shared = Arc::clone(&shared);
        let conn = Arc::clone(&conn);
        service_fn(move |req| {
            let shared = Arc::clone(&shared);
            let conn = Arc::clone(&conn);
            async move { shared.routes.answer(req, conn).await }
        })
    };
    let settings = shared.web.settings();
    let served = async {
        match &settings.tls {
            None => {
                let watched = Watched::new(stream, Arc::clone(&conn), false);
                let _ = shared
                    .http
                    .serve_connection(TokioIo::new(watched), service)
                    .await;
            }
            // Plain HTTP to the TLS port is answered before rustls, which
            // would answer it with a TLS alert the client cannot read.
            Some(acceptor) => match crate::tls::begins_handshake(&stream).await {
                Err(_) => {} // closed before its first byte
                Ok(false) => {
                    shared.web.stats.handshake_failed();
                    shared.web.handshakes.failed(
                        &peer.to_string(),
                        &"the client spoke plain HTTP, not TLS (answered 400: use https://)",
                    );
                }
                Ok(true) => {
                    let watched = Watched::new(stream, Arc::clone(&conn), true);
                    match acceptor.accept(watched).await {
                        Ok(tls) => {
                            let _ = shared
                                .http
                                .serve_connection(TokioIo::new(tls), service)
                                .await;
                        }
                        Err(e) => {
                            shared.web.stats.handshake_failed();
                            shared.web.handshakes.failed(&peer.to_string(), &e);
                        }
                    }
                }
            },
        }
    };
    tokio::pin!(served);
    loop {
        let deadline = conn.deadline(&shared.limits);
        if deadline <= Instant::now() {
            conn.expire();
            break; // dropping the connection closes it
        }
        tokio::select! {
            // Closed by the client, failed, or done (no keep-alive).
            _ = served.as_mut() => break,
            () = tokio::time::sleep_until(deadline) => {}
            () = conn.changed() => {}
        }
    }
    drop(slot);
}

/// Out of file descriptors or memory: the connection stays queued.
fn is_starved(e: &io::Error) -> bool {
    Errno::from_io_error(e)
        .is_some_and(|n| [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM].contains(&n))
}

/// The queued connection failed before it was accepted (accept(2) says to
/// go on with the next one after these).
fn is_gone(e: &io::Error) -> bool {
    Errno::from_io_error(e).is_some_and(|n| {
        [
            Errno::CONNABORTED,
            Errno::CONNRESET,
            Errno::INTR,
            Errno::AGAIN,
            Errno::PERM,
            Errno::PROTO,
            Errno::NOPROTOOPT,
            Errno::NETDOWN,
            Errno::NETUNREACH,
            Errno::HOSTDOWN,
            Errno::HOSTUNREACH,
            Errno::NONET,
            Errno::OPNOTSUPP,
        ]
        .contains(&n)
    })
}
