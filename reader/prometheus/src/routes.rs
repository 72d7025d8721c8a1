//! What the endpoint answers: `GET` and `HEAD` of `/metrics` (a scrape)
//! and `/` (a one-line index), `405` with `Allow` for another method on
//! those paths, `404` for any other path, `400` for a request without one
//! `Host` header, `503` when the segment cannot be read or the scrapes in
//! flight leave no room (see `scrapes`).
//!
//! With a web configuration: `401` with `WWW-Authenticate: Basic` for a
//! request without a configured user's credentials (any path), and its
//! headers on every answer. A scrape's page keeps only the families its
//! `name[]` filters name (`filter`), ends with the endpoint's own
//! families (`selfmetrics`), and is gzipped when `Accept-Encoding` asks
//! (`compress`; `406` when it refuses identity and gzip alike).

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{
    HeaderValue, ACCEPT, ACCEPT_ENCODING, ALLOW, CONNECTION, CONTENT_ENCODING, CONTENT_TYPE, HOST,
    VARY, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode, Version};

use perfabi_shm::safe_open::escape_path;

use crate::auth::Verdict;
use crate::compress::{self, Coding};
use crate::connections::{Conn, Held, Table};
use crate::filter::{self, Selection};
use crate::negotiate::{negotiate, Exposition};
use crate::protobuf;
use crate::scrapes::{Place, Scrapes};
use crate::web::{Settings, Web};
use crate::{Endpoint, Limits};

/// What every answer needs: the segment, the scrapes in flight and their
/// bounds, the connections (one of which may be closed to make room
/// for a scrape), and the web settings.
pub(crate) struct Routes {
    endpoint: Arc<Endpoint>,
    scrapes: Arc<Scrapes>,
    table: Arc<Table>,
    web: Arc<Web>,
    /// The segment's families left out for their names (the endpoint's
    /// own), as last logged.
    own_logged: Arc<Mutex<Vec<String>>>,
}

const TEXT: &str = "text/plain; charset=utf-8";

impl Routes {
    /// Routes to `endpoint`, with the scrapes in flight within `limits`,
    /// for the connections of `table`, with the settings of `web`.
    pub(crate) fn new(
        endpoint: Arc<Endpoint>,
        limits: &Limits,
        table: Arc<Table>,
        web: Arc<Web>,
    ) -> Self {
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
            web,
            own_logged: Arc::default(),
        }
    }

    /// The answer to `req` on connection `conn` (whose phase it moves to
    /// answering, and back to idle once the answer's body is done), with
    /// the configured headers; a `/metrics` answer is counted.
    pub(crate) async fn answer(
        &self,
        req: Request<Incoming>,
        conn: Arc<Conn>,
    ) -> Result<Response<Page>, Infallible> {
        let metrics = req.uri().path() == "/metrics";
        // The settings in force when the request came (a reload may
        // replace them meanwhile).
        let settings = self.web.settings();
        let mut r = self.route(req, conn, &settings).await;
        for (k, v) in &settings.headers {
            r.headers_mut().insert(k.clone(), v.clone());
        }
        if metrics {
            self.web.stats.answered(r.status().as_u16());
        }
        Ok(r)
    }

    async fn route(
        &self,
        req: Request<Incoming>,
        conn: Arc<Conn>,
        settings: &Settings,
    ) -> Response<Page> {
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
            return r;
        }
        if settings.users.check(req.headers()).await == Verdict::Refused {
            let mut r = text(
                StatusCode::UNAUTHORIZED,
                "401 Unauthorized: give a configured user's credentials (basic authentication)\n",
                done,
            );
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
            return r;
        }
        let path = req.uri().path();
        if path != "/" && path != "/metrics" {
            return text(StatusCode::NOT_FOUND, "not found: try /metrics\n", done);
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n", done);
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        if path == "/" {
            let index = format!(
                "perfabi-prometheus: the metrics of {} at /metrics\n",
                escape_path(self.endpoint.path())
            );
            return text(StatusCode::OK, index, done);
        }
        let selection = match filter::selection(req.uri().query()) {
            Ok(s) => s,
            Err(why) => return text(StatusCode::BAD_REQUEST, why + "\n", done),
        };
        let accept_encoding = joined(&req, ACCEPT_ENCODING);
        let Some(coding) = compress::negotiate(accept_encoding.as_deref()) else {
            let mut r = text(
                StatusCode::NOT_ACCEPTABLE,
                "Accept-Encoding refuses identity, and gzip is the only coding served\n",
                done,
            );
            r.headers_mut()
                .insert(VARY, HeaderValue::from_static("Accept-Encoding"));
            return r;
        };
        let mut place = match self.scrapes.take(&done.0, &self.table).await {
            Ok(place) => place,
            Err(full) => return text(StatusCode::SERVICE_UNAVAILABLE, format!("{full}\n"), done),
        };
        let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
        let format = negotiate(accept);
        // The snapshot, its rendering and its compression are CPU work (a
        // large page takes a good part of a second): on a thread of their
        // own, so that no other connection waits for them.
        let endpoint = Arc::clone(&self.endpoint);
        let web = Arc::clone(&self.web);
        let own_logged = Arc::clone(&self.own_logged);
        let scrape = tokio::task::spawn_blocking(move || {
            page(&endpoint, &web, &own_logged, format, &selection, coding)
        });
        match scrape.await {
            Ok(Ok(page)) => {
                if let Err(full) = place.page(page.len(), &self.table).await {
                    let reason = format!("{full}\n");
                    return text(StatusCode::SERVICE_UNAVAILABLE, reason, done);
                }
                let mut r = Response::new(Page::new(page, done, Some(place)));
                let h = r.headers_mut();
                h.insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static(format.content_type()),
                );
                h.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
                if coding == Coding::Gzip {
                    h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                }
                r
            }
            Ok(Err(reason)) => text(StatusCode::SERVICE_UNAVAILABLE, reason + "\n", done),
            Err(e) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the scrape failed: {e}\n"),
                done,
            ),
        }
    }
}

/// Every value of the header `name` in `req`, joined by commas (a list
/// header may be sent as several); `None` if there is none (or one is not
/// text).
fn joined(req: &Request<Incoming>, name: hyper::header::HeaderName) -> Option<String> {
    let mut out: Option<String> = None;
    for v in req.headers().get_all(name) {
        let v = v.to_str().ok()?;
        match &mut out {
            Some(o) => {
                o.push(',');
                o.push_str(v);
            }
            None => out = Some(v.to_string()),
        }
    }
    out
}

/// One scrape's page: the segment read and rendered as `exposition`
/// asks, its families named like the endpoint's own left out (logged when
/// that changes), the endpoint's own added, the families `selection`
/// names kept, in `coding`; or the reason the read failed (logged,
/// counted).
fn page(
    endpoint: &Endpoint,
    web: &Web,
    own_logged: &Mutex<Vec<String>>,
    exposition: Exposition,
    selection: &Selection,
    coding: Coding,
) -> Result<Vec<u8>, String> {
    let t = Instant::now();
    let read = |e: Exposition| match endpoint.read_page(e) {
        Ok(p) => {
            endpoint.log(None);
            Ok(p)
        }
        Err(f) => {
            endpoint.log(Some(&f.reason));
            web.stats.read_failed(f.code);
            Err(f.reason)
        }
    };
    let page = match exposition {
        Exposition::Text(format) => {
            // The text renderer writes UTF-8 only.
            let page = String::from_utf8(read(exposition)?).map_err(|e| e.to_string())?;
            let (page, left_out) = filter::without_own(page);
            note_own(own_logged, left_out);
            let own = web.stats.render(format, t.elapsed().as_secs_f64());
            filter::select(filter::with_own(page, &own), selection).into_bytes()
        }
        Exposition::Protobuf => {
            // One pass over the segment's families: those named like the
            // endpoint's own left out (and noted), the rest kept as
            // `selection` says; then the own families, as it says too.
            let mut left_out = Vec::new();
            let (mut page, _) = protobuf::retain(&read(exposition)?, |name, counter| {
                if name.starts_with(filter::OWN_PREFIX) {
                    left_out.push(name.to_string());
                    return false;
                }
                filter::selected(selection, name, counter)
            });
            note_own(own_logged, left_out);
            let own = web.stats.encode(t.elapsed().as_secs_f64());
            match selection {
                None => page.extend(own),
                Some(_) => page.extend(
                    protobuf::retain(&own, |name, counter| {
                        filter::selected(selection, name, counter)
                    })
                    .0,
                ),
            }
            page
        }
    };
    Ok(match coding {
        Coding::Identity => page,
        Coding::Gzip => compress::gzip(&page, compress::GZIP_LEVEL),
    })
}

/// Logs the segment's families left out for their names (`left_out`)
/// when they differ from those logged last.
fn note_own(own_logged: &Mutex<Vec<String>>, left_out: Vec<String>) {
    let mut logged = own_logged.lock().unwrap_or_else(|p| p.into_inner());
    if *logged != left_out {
        if !left_out.is_empty() {
            let names: BTreeSet<String> = left_out
                .iter()
                .map(|n| perfabi::text::escape(n.as_bytes()).to_string())
                .collect();
            eprintln!(
                "perfabi-prometheus: families {} left out: {}* names the endpoint's own \
                 families (rename them)",
                names.into_iter().collect::<Vec<_>>().join(", "),
                filter::OWN_PREFIX
            );
        }
        *logged = left_out;
    }
}

/// A plain-text answer.
fn text(status: StatusCode, body: impl Into<String>, done: Done) -> Response<Page> {
    let mut r = Response::new(Page::new(body.into().into_bytes(), done, None));
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
