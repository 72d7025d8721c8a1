//! What the endpoint answers: `GET` and `HEAD` of `/metrics` (a scrape)
//! and `/` (a one-line index), `405` with `Allow` for another method on
//! those paths, `404` for any other path, `400` for a request without one
//! `Host` header, `503` when the segment cannot be read or the scrapes in
//! flight leave no room (see `scrapes`).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode, Version};
use perfabi_shm::safe_open::escape_path;

use crate::connections::{Conn, Held, Table};
use crate::negotiate::negotiate;
use crate::scrapes::{Place, Scrapes};
use crate::{Endpoint, Limits};

/// What every answer needs: the segment, the scrapes in flight and their
/// bounds, and the connections (one of which may be closed to make room
/// for a scrape).
pub(crate) struct Routes {
    endpoint: Arc<Endpoint>,
    scrapes: Arc<Scrapes>,
    table: Arc<Table>,
}

const TEXT: &str = "text/plain; charset=utf-8";

impl Routes {
    /// Routes to `endpoint`, with the scrapes in flight within `limits`,
    /// for the connections of `table`.
    pub(crate) fn new(endpoint: Arc<Endpoint>, limits: &Limits, table: Arc<Table>) -> Self {
        Self {
            endpoint,
            // A scrape waits for room at most half its send deadline,
            // leaving the other half to send its page.
            scrapes: Arc::new(Scrapes::new(
                limits.max_requests,
                limits.max_page_bytes,
                limits.write_timeout / 2,
            )),
            table,
        }
    }

    /// The answer to `req` on connection `conn` (whose phase it moves to
    /// answering, and back to idle once the answer's body is done).
    pub(crate) async fn answer(
        &self,
        req: Request<Incoming>,
        conn: Arc<Conn>,
    ) -> Result<Response<Page>, Infallible> {
        conn.request();
        let done = Done(conn, None);
        // RFC 9112 §3.2: one Host in an HTTP/1.1 request, never two in any
        // (a proxy in front may have routed the request by the other).
        let hosts = req.headers().get_all(HOST).iter().count();
        if hosts > 1 || (hosts == 0 && req.version() == Version::HTTP_11) {
            let mut r = text(
                StatusCode::BAD_REQUEST,
                format!("a request needs one Host header, not {hosts} (RFC 9112 3.2)\n"),
                done,
            );
            r.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            return Ok(r);
        }
        let path = req.uri().path();
        if path != "/" && path != "/metrics" {
            return Ok(text(
                StatusCode::NOT_FOUND,
                "not found: try /metrics\n",
                done,
            ));
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n", done);
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return Ok(r);
        }
        if path == "/" {
            let index = format!(
                "perfabi-prometheus: the metrics of {} at /metrics\n",
                escape_path(self.endpoint.path())
            );
            return Ok(text(StatusCode::OK, index, done));
        }
        let mut place = match self.scrapes.take(&done.0, &self.table).await {
            Ok(place) => place,
            Err(full) => {
                return Ok(text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("{full}\n"),
                    done,
                ))
            }
        };
        let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
        let format = negotiate(accept);
        // The snapshot and its rendering are CPU work (a large page takes
        // a good part of a second): on a thread of their own, so that no
        // other connection waits for them.
        let endpoint = Arc::clone(&self.endpoint);
        let scrape = tokio::task::spawn_blocking(move || {
            let result = endpoint.page(format);
            endpoint.log(&result);
            result
        });
        Ok(match scrape.await {
            Ok(Ok(page)) => {
                if let Err(full) = place.page(page.len(), &self.table).await {
                    let reason = format!("{full}\n");
                    return Ok(text(StatusCode::SERVICE_UNAVAILABLE, reason, done));
                }
                let mut r = Response::new(Page::new(page, done, Some(place)));
                r.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static(format.content_type()),
                );
                r
            }
            Ok(Err(reason)) => text(StatusCode::SERVICE_UNAVAILABLE, reason + "\n", done),
            Err(e) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the scrape failed: {e}\n"),
                done,
            ),
        })
    }
}

/// A plain-text answer.
fn text(status: StatusCode, body: impl Into<String>, done: Done) -> Response<Page> {
    let mut r = Response::new(Page::new(body.into(), done, None));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
    r
}

/// Tells the connection, when dropped, that its answer's body is done,
/// handing it what the answer holds until sent.
pub(crate) struct Done(Arc<Conn>, Option<Place>);

impl Drop for Done {
    fn drop(&mut self) {
        let held = self.1.take().map(Held::new);
        self.0.body_done(held);
    }
}

/// An answer's body: the whole page in one frame (hyper writes it from
/// this very buffer; `Content-Length` is its length, for `HEAD` too). A
/// scrape's place (its page's bytes among those in flight) is held until
/// the page is handed whole to the kernel: hyper drops the body as soon as
/// it has taken the frame into its buffer, so the connection keeps the
/// place from then until hyper's buffer is flushed.
pub(crate) struct Page {
    data: Option<Bytes>,
    _done: Done,
}

impl Page {
    fn new(body: impl Into<Bytes>, mut done: Done, place: Option<Place>) -> Self {
        done.1 = place;
        let body = body.into();
        Self {
            data: (!body.is_empty()).then_some(body),
            _done: done,
        }
    }
}

impl Body for Page {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().data.take().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}
