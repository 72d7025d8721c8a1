//! A Prometheus endpoint for any perfabi segment, or a directory of them
//! read as one (`spec/PERFABI.md` §15, [`Endpoint::directory`]): `GET
//! /metrics` answers one consistent snapshot (one metadata generation) per
//! scrape (a directory: one per file, merged), in
//! OpenMetrics 1.0.0 when the scraper's `Accept` header asks for it (as
//! Prometheus does), as the protobuf exposition with native histograms
//! ([`protobuf`]) when it asks for that (Prometheus with
//! `--enable-feature=native-histograms`), else in the Prometheus text
//! format 0.0.4. The page is rendered by [`perfabi_reader::exposition`],
//! the renderer of `perfabi-cat --openmetrics`.
//!
//! * A failed read (no segment, writer busy beyond its retries, gone,
//!   closed, truncated, untrusted) answers `503` with a one-line reason,
//!   never a partial page; the next scrape opens the segment again, so a
//!   writer that restarts is served again.
//! * HTTP/1.1 by hyper on a tokio runtime ([`serve`]), connections kept
//!   alive; `GET` and `HEAD` of `/metrics` and `/` (a short index), `405`
//!   (with `Allow: GET, HEAD`) for other methods there, `404` for other
//!   paths; a request head of at most [`MAX_HEAD`] bytes and
//!   [`MAX_HEADERS`] headers (`431` otherwise), with one `Host` header
//!   (`400` otherwise; none is needed in HTTP/1.0).
//! * Sturdy under attack and under load ([`Limits`]): a deadline for each
//!   request head, each answer and each idle spell; at most
//!   [`Limits::max_connections`] open, the one that has waited on its
//!   client the longest (idle, trickling its head, not reading its answer)
//!   closed to make room; at most [`Limits::max_requests`] scrapes in flight
//!   and [`Limits::max_page_bytes`] of their pages, each held until sent,
//!   the scrape whose client stopped reading the longest closed to make
//!   room. The
//!   snapshot and rendering run on threads of their own, so no connection
//!   waits for another's page.
//! * As node_exporter serves it ([`serve_with`], [`Web`]): TLS by rustls
//!   and basic authentication with bcrypt hashes from exporter-toolkit's
//!   web configuration file ([`WebConfig`]), extra answer headers; gzip
//!   when `Accept-Encoding` asks; `name[]` filters keeping the families
//!   named; the endpoint's own families on every page
//!   (`promhttp_metric_handler_requests_total`,
//!   `perfabi_exporter_*`, `process_*`).
#![forbid(unsafe_code)]

pub mod activation;
mod auth;
mod compress;
mod connections;
mod directory;
mod endpoint;
mod filter;
mod h2;
mod limits;
mod negotiate;
pub mod protobuf;
mod routes;
mod scrapes;
mod selfmetrics;
mod server;
mod tls;
mod watched;
mod web;
pub mod web_config;

pub use compress::{gzip, GZIP_LEVEL};
pub use endpoint::Endpoint;
pub use limits::{
    connections_within, raise_open_file_limit, Limits, IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_HEAD,
    MAX_HEADERS, MAX_PAGE_BYTES, MAX_REQUESTS, READ_TIMEOUT, RESERVED_FDS, WRITE_TIMEOUT,
};
pub use negotiate::{negotiate, Exposition};
pub use server::{listen, serve, serve_with, BACKLOG, RECV_BUFFER, UNSENT_LOWAT};
pub use web::Web;
pub use web_config::{ConfigError, WebConfig};
