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

use crate::connections::Conn;

/// A socket whose reads, writes and flushes are reported to its [`Conn`].
pub(crate) struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
}

impl Watched {
    /// `stream`, reporting to `conn`.
    pub(crate) fn new(stream: TcpStream, conn: Arc<Conn>) -> Self {
        Self { stream, conn }
    }
}

impl Drop for Watched {
    /// A connection aborted at its deadline is reset (`SO_LINGER` 0): the
    /// rest of its answer the kernel holds is dropped, not sent on to a
    /// client that would not take it in time.
    fn drop(&mut self) {
        if self.conn.aborted() {
            let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
        }
    }
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
