//! A connection's socket, watched: the bytes it reads and the flushes it
//! completes tell the connection's phase ([`Conn`]) when a request begins
//! and when an answer has been handed whole to the kernel, and its writes
//! whether the answer is stalled on a client that does not read.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::connections::{Conn, Ending};
use crate::h2;

/// A socket whose reads, writes and flushes are reported to its [`Conn`].
pub(crate) struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
    /// Whether anything was read yet.
    read_any: bool,
    /// The client began with the HTTP/2 preface.
    http2: bool,
    /// The connection speaks TLS (HTTP/2's preface is then not looked
    /// for in the clear).
    tls: bool,
}

impl Watched {
    /// `stream`, reporting to `conn`; `tls` if it is to speak TLS.
    pub(crate) fn new(stream: TcpStream, conn: Arc<Conn>, tls: bool) -> Self {
        Self {
            stream,
            conn,
            read_any: false,
            http2: false,
            tls,
        }
    }
}

impl Drop for Watched {
    /// A connection aborted ([`Ending::Aborted`]) is reset (`SO_LINGER`
    /// 0): the rest of its answer the kernel holds is dropped, not sent on
    /// to a client that would not take it in time. One whose request head
    /// timed out is answered `408` saying so; one whose client spoke HTTP/2
    /// first (which hyper closes unanswered) is told, in HTTP/2, to use
    /// HTTP/1.1. Those are a few bytes into an empty socket buffer, so
    /// written without waiting.
    fn drop(&mut self) {
        match self.conn.ending() {
            Ending::Aborted => {
                let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
            }
            // Over TLS a plain-text 408 would be garbage to the client.
            Ending::HeadTimedOut if !self.tls => {
                let _ = self.stream.try_write(head_timed_out().as_bytes());
            }
            Ending::Open | Ending::Closed if self.http2 => {
                let _ = self.stream.try_write(&h2::refusal());
            }
            Ending::Open | Ending::Closed | Ending::HeadTimedOut => {}
        }
    }
}

/// The answer to a request head that did not arrive whole in time.
fn head_timed_out() -> String {
    let why = "the request head did not arrive whole in time (--read-timeout)\n";
    format!(
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{why}",
        why.len()
    )
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            if !std::mem::replace(&mut self.read_any, true) {
                self.http2 = !self.tls && h2::is_preface(&buf.filled()[before..]);
            }
            self.conn.bytes_read();
        }
        r
    }
}

impl Watched {
    /// Tells the connection whether a write found the socket full.
    fn wrote<T>(&self, r: Poll<T>) -> Poll<T> {
        self.conn.write_stalled(r.is_pending());
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.wrote(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.wrote(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    /// hyper flushes the socket once its own buffer is empty: everything
    /// it was given is with the kernel.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.stream).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(()))) {
            self.conn.flushed();
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
