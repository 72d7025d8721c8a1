//! The protobuf exposition (`application/vnd.google.protobuf;
//! proto=io.prometheus.client.MetricFamily; encoding=delimited`), which
//! Prometheus asks for when its native histograms are on: the families of
//! the text page ([`perfabi_reader::exposition::walk`] hands the same
//! families, names, help, labels and values to both), one length-delimited
//! `MetricFamily` each, and every `LOG2` histogram as a native histogram of
//! schema 0 ([`native`], `spec/PERFABI.md` §5.6) besides its classic
//! buckets (for a scraper that keeps those).
//!
//! The messages are client_model's `metrics.proto` (Apache-2.0, its
//! header kept), vendored beside this file as of prometheus/client_model
//! commit 10dc9df; `metrics.rs` is generated from it by
//! `reader/prometheus/regenerate-protobuf` (prost-build and protoc in a
//! throwaway crate: neither is needed to build).

pub mod native;

#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod metrics;

use perfabi_reader::exposition::{Exposed, Sink, Type};
use perfabi_reader::{Buckets, Family, Histogram, Reading};
use prost::Message;

use metrics::{Bucket, BucketSpan, Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

/// The HTTP `Content-Type` of a protobuf page.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// A protobuf page being encoded: a [`Sink`] of the walk of the families.
#[derive(Default)]
pub struct Encoder {
    page: Vec<u8>,
    family: Option<MetricFamily>,
}

impl Encoder {
    /// An empty page.
    pub fn new() -> Self {
        Self::default()
    }

    /// The page: every family handed over, length-delimited.
    pub fn finish(mut self) -> Vec<u8> {
        self.flush();
        self.page
    }

    /// Appends the family begun last, unless it has no series (a family
    /// without metrics is no family to Prometheus).
    fn flush(&mut self) {
        if let Some(f) = self.family.take().filter(|f| !f.metric.is_empty()) {
            // Encoding into a Vec cannot run out of room.
            let _ = f.encode_length_delimited(&mut self.page);
        }
    }
}

impl Sink for Encoder {
    fn family(&mut self, _: &Family, e: &Exposed) {
        self.flush();
        let (name, typ) = match e.typ {
            // A counter's metric family is named as its samples.
            Type::Counter => (format!("{}_total", e.name), MetricType::Counter),
            Type::Gauge => (e.name.clone(), MetricType::Gauge),
            Type::Histogram => (e.name.clone(), MetricType::Histogram),
        };
        self.family = Some(MetricFamily {
            name: Some(name),
            help: Some(e.help.clone()),
            r#type: Some(typ as i32),
            metric: Vec::new(),
            unit: e.unit.clone(),
        });
    }

    fn series(&mut self, f: &Family, e: &Exposed, labels: &[(&str, &str)], r: &Reading) {
        let Some(family) = self.family.as_mut() else {
            return;
        };
        let mut metric = Metric {
            label: labels
                .iter()
                .map(|(k, v)| LabelPair {
                    name: Some((*k).to_string()),
                    value: Some((*v).to_string()),
                })
                .collect(),
            ..Metric::default()
        };
        let value = |v: i128| Some(e.value(v));
        match (r, e.typ) {
            (Reading::Histogram(h), _) => metric.histogram = Some(histogram(f, e, h)),
            (Reading::Unsigned(v), Type::Counter) => {
                metric.counter = Some(Counter {
                    value: value(i128::from(*v)),
                    ..Counter::default()
                })
            }
            (Reading::Unsigned(v), _) => {
                metric.gauge = Some(Gauge {
                    value: value(i128::from(*v)),
                })
            }
            (Reading::Signed(v), _) => {
                metric.gauge = Some(Gauge {
                    value: value(i128::from(*v)),
                })
            }
        }
        family.metric.push(metric);
    }

    fn end(&mut self) {
        self.flush();
    }
}

/// `page` (length-delimited `MetricFamily` messages, as [`Encoder`]
/// writes them) with only the families `keep` accepts (given each one's
/// name and whether it is a counter), and the names of those left out.
/// The kept messages are copied as they are. A page that does not decode
/// (none that this endpoint encodes) is cut where it stops decoding.
pub fn retain(page: &[u8], mut keep: impl FnMut(&str, bool) -> bool) -> (Vec<u8>, Vec<String>) {
    let mut out = Vec::with_capacity(page.len());
    let mut dropped = Vec::new();
    let mut rest = page;
    while !rest.is_empty() {
        let before = rest;
        let Ok(len) = prost::decode_length_delimiter(&mut rest) else {
            break;
        };
        let Some(message) = rest.get(..len) else {
            break;
        };
        let Ok(f) = MetricFamily::decode(message) else {
            break;
        };
        rest = &rest[len..];
        let whole = &before[..before.len() - rest.len()];
        if keep(f.name(), f.r#type() == MetricType::Counter) {
            out.extend_from_slice(whole);
        } else {
            dropped.push(f.name().to_string());
        }
    }
    (out, dropped)
}

/// Histogram `h` of `f`: classic buckets as the text page has them (no
/// `+Inf`: the count is), the count, the sum, and for a `LOG2` histogram
/// whose unit the page scales by a power of two, the native histogram.
/// Counts past `u64::MAX` (only a total of more than 2^64 observations)
/// are served as floats, with classic buckets only.
fn histogram(f: &Family, e: &Exposed, h: &Histogram) -> metrics::Histogram {
    let mut classic = Vec::new();
    let total = e.each_bucket(f, h, |_, bound, n| {
        classic.push((bound, n));
    });
    let integer = u64::try_from(total).is_ok();
    let mut out = metrics::Histogram {
        sample_sum: Some(e.value(i128::from(h.sum))),
        bucket: classic
            .into_iter()
            .map(|(bound, n)| Bucket {
                upper_bound: Some(bound),
                cumulative_count: integer.then_some(n as u64),
                cumulative_count_float: (!integer).then_some(n as f64),
                ..Bucket::default()
            })
            .collect(),
        ..metrics::Histogram::default()
    };
    if !integer {
        out.sample_count_float = Some(total as f64);
        return out;
    }
    out.sample_count = Some(total as u64);
    let powers = e.powers();
    if let (Some(Buckets::Log2 { first, .. }), 0, 0) = (&f.buckets, powers.three, powers.five) {
        // None: a bucket Prometheus would read as negative; classic only.
        let Some(n) = native::schema0(*first, &h.buckets, powers.two) else {
            return out;
        };
        out.schema = Some(0);
        out.zero_threshold = Some(n.zero_threshold);
        out.zero_count = Some(n.zero_count);
        out.positive_span = n
            .spans
            .into_iter()
            .map(|(offset, length)| BucketSpan {
                offset: Some(offset),
                length: Some(length),
            })
            .collect();
        out.positive_delta = n.deltas;
    }
    out
}

#[cfg(test)]
mod tests;
