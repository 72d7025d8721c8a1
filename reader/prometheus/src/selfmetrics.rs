//! The endpoint's own families, added to every page (spec §5.5): how its
//! scrapes went and what the process costs, named as the Go and Python
//! clients name them where they have a name, so that the dashboards made
//! for node_exporter read them:
//!
//! * `promhttp_metric_handler_requests_total{code}`: `/metrics` answers
//!   by HTTP status (before this one);
//! * `perfabi_exporter_scrape_duration_seconds`: what reading and
//!   rendering this page took;
//! * `perfabi_exporter_read_errors_total{code}`: failed reads (each a
//!   `503`) by the reader's error code (`not-found`, `busy`…);
//! * `perfabi_exporter_tls_handshake_errors_total`: failed TLS handshakes
//!   (plain HTTP to the TLS port, a refused client certificate…);
//! * `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//!   `process_virtual_memory_bytes`, `process_open_fds`,
//!   `process_max_fds`, `process_start_time_seconds`: from `/proc/self`
//!   (by procfs), as the Go and Python clients read them, the most file
//!   descriptors by `getrlimit`.
//!
//! None can collide with a segment's family: those are all named
//! `perfabi_<name>`, and one named `perfabi_exporter_…` is left out of
//! the page ([`crate::filter::without_own`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use perfabi_reader::exposition::Format;

/// What the endpoint counts of itself.
#[derive(Default)]
pub struct Stats {
    /// `/metrics` answers by status code.
    requests: Mutex<BTreeMap<u16, u64>>,
    /// Failed reads by the reader's error code.
    read_errors: Mutex<BTreeMap<&'static str, u64>>,
    /// Failed TLS handshakes.
    pub(crate) handshake_errors: AtomicU64,
}

impl Stats {
    /// A `/metrics` answer of status `code`.
    pub fn answered(&self, code: u16) {
        *lock(&self.requests).entry(code).or_default() += 1;
    }

    /// A read failed with the reader's error `code`.
    pub fn read_failed(&self, code: &'static str) {
        *lock(&self.read_errors).entry(code).or_default() += 1;
    }

    /// A TLS handshake failed.
    pub fn handshake_failed(&self) {
        self.handshake_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The families, in `format`, with `scrape_seconds` as this page's
    /// read and render time.
    pub fn render(&self, format: Format, scrape_seconds: f64) -> String {
        let mut out = String::with_capacity(2048);
        for (f, samples) in self.families(scrape_seconds) {
            family(&mut out, format, &f, &samples);
        }
        out
    }

    /// The families as the protobuf exposition (length-delimited
    /// `MetricFamily` messages, [`crate::protobuf`]), with
    /// `scrape_seconds` as this page's read and render time. A family
    /// without a sample is left out (no family to Prometheus).
    pub fn encode(&self, scrape_seconds: f64) -> Vec<u8> {
        use crate::protobuf::metrics::{
            Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType,
        };
        use prost::Message;
        let mut out = Vec::with_capacity(1024);
        for (f, samples) in self.families(scrape_seconds) {
            if samples.is_empty() {
                continue;
            }
            let counter = f.typ == "counter";
            let metric = samples
                .iter()
                .map(|(labels, v)| Metric {
                    label: labels
                        .iter()
                        .map(|(k, v)| LabelPair {
                            name: Some((*k).to_string()),
                            value: Some(v.clone()),
                        })
                        .collect(),
                    counter: counter.then(|| Counter {
                        value: Some(*v),
                        ..Counter::default()
                    }),
                    gauge: (!counter).then_some(Gauge { value: Some(*v) }),
                    ..Metric::default()
                })
                .collect();
            let m = MetricFamily {
                // A counter's metric family is named as its samples.
                name: Some(if counter {
                    format!("{}_total", f.name)
                } else {
                    f.name.to_string()
                }),
                help: Some(f.help.to_string()),
                r#type: Some(if counter {
                    MetricType::Counter
                } else {
                    MetricType::Gauge
                } as i32),
                metric,
                unit: f.unit.map(str::to_string),
            };
            // Encoding into a Vec cannot run out of room.
            let _ = m.encode_length_delimited(&mut out);
        }
        out
    }

    /// The families and their samples, read now.
    fn families(&self, scrape_seconds: f64) -> Vec<(Family, Vec<Sample>)> {
        let by_code = |m: &BTreeMap<String, u64>| -> Vec<Sample> {
            m.iter()
                .map(|(c, n)| (vec![("code", c.clone())], *n as f64))
                .collect()
        };
        let requests: BTreeMap<String, u64> = lock(&self.requests)
            .iter()
            .map(|(c, n)| (c.to_string(), *n))
            .collect();
        let errors: BTreeMap<String, u64> = lock(&self.read_errors)
            .iter()
            .map(|(c, n)| (c.to_string(), *n))
            .collect();
        let mut out = vec![
            (
                Family::counter(
                    "promhttp_metric_handler_requests",
                    "Scrapes of /metrics by HTTP status code (before this one).",
                ),
                by_code(&requests),
            ),
            (
                Family::gauge(
                    "perfabi_exporter_scrape_duration_seconds",
                    "Seconds the read and rendering of this page took.",
                )
                .unit("seconds"),
                vec![(Vec::new(), scrape_seconds)],
            ),
            (
                Family::counter(
                    "perfabi_exporter_read_errors",
                    "Reads of the segment or directory that failed (each a 503), by the reader's code.",
                ),
                by_code(&errors),
            ),
            (
                Family::counter(
                    "perfabi_exporter_tls_handshake_errors",
                    "TLS handshakes that failed (plain HTTP to the TLS port, a refused certificate).",
                ),
                vec![(
                    Vec::new(),
                    self.handshake_errors.load(Ordering::Relaxed) as f64,
                )],
            ),
        ];
        process(&mut out);
        out
    }
}

/// One sample: its labels and its value.
type Sample = (Vec<(&'static str, String)>, f64);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A family's metadata.
struct Family {
    /// The OpenMetrics family name (a counter's without `_total`).
    name: &'static str,
    typ: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
}

impl Family {
    fn counter(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            typ: "counter",
            unit: None,
            help,
        }
    }

    fn gauge(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            typ: "gauge",
            unit: None,
            help,
        }
    }

    fn unit(mut self, unit: &'static str) -> Self {
        self.unit = Some(unit);
        self
    }
}

/// Appends `f` and its `samples` in `format`, metadata named as the
/// exposition names a segment's (see
/// [`perfabi_reader::exposition::Format`]). Label values are the
/// endpoint's own (status codes, the reader's error codes): nothing to
/// escape.
fn family(out: &mut String, format: Format, f: &Family, samples: &[Sample]) {
    let total = if f.typ == "counter" { "_total" } else { "" };
    match format {
        Format::OpenMetrics => {
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.typ);
            if let Some(u) = f.unit {
                let _ = writeln!(out, "# UNIT {} {u}", f.name);
            }
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        }
        Format::Prometheus => {
            let _ = writeln!(out, "# HELP {}{total} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {}{total} {}", f.name, f.typ);
        }
    }
    for (labels, v) in samples {
        let _ = write!(out, "{}{total}", f.name);
        for (i, (k, lv)) in labels.iter().enumerate() {
            let _ = write!(out, "{}{k}=\"{lv}\"", if i == 0 { "{" } else { "," });
        }
        if !labels.is_empty() {
            out.push('}');
        }
        let _ = writeln!(out, " {v}");
    }
}

/// The `process_*` families, from `/proc/self`; a value that cannot be
/// read is left out (its family with no sample).
fn process(out: &mut Vec<(Family, Vec<Sample>)>) {
    use procfs::process::Process;
    let me = Process::myself().ok();
    let stat = me.as_ref().and_then(|p| p.stat().ok());
    let ticks = procfs::ticks_per_second() as f64;
    let one = |v: Option<f64>| v.map(|v| vec![(Vec::new(), v)]).unwrap_or_default();
    out.push((
        Family::counter(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
        )
        .unit("seconds"),
        one(stat.as_ref().map(|s| (s.utime + s.stime) as f64 / ticks)),
    ));
    out.push((
        Family::gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
        )
        .unit("bytes"),
        one(stat.as_ref().map(|s| (s.rss * procfs::page_size()) as f64)),
    ));
    out.push((
        Family::gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
        )
        .unit("bytes"),
        one(stat.as_ref().map(|s| s.vsize as f64)),
    ));
    let start = stat.as_ref().and_then(|s| {
        let boot = procfs::boot_time_secs().ok()? as f64;
        Some(boot + s.starttime as f64 / ticks)
    });
    out.push((
        Family::gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        )
        .unit("seconds"),
        one(start),
    ));
    out.push((
        Family::gauge("process_open_fds", "Number of open file descriptors."),
        one(me
            .as_ref()
            .and_then(|p| p.fd_count().ok())
            .map(|n| n as f64)),
    ));
    // The soft limit of /proc/self/limits, by the system call: parsing
    // that file costs more than the rest of these families together.
    let max = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map(|n| n as f64);
    out.push((
        Family::gauge(
            "process_max_fds",
            "Maximum number of open file descriptors.",
        ),
        one(max),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both formats: the counters counted, the process' own values read
    /// (this test process has at least its three standard descriptors
    /// and some memory).
    #[test]
    fn own_families_in_both_formats() {
        let s = Stats::default();
        s.answered(200);
        s.answered(200);
        s.answered(503);
        s.read_failed("not-found");
        s.handshake_failed();
        let om = s.render(Format::OpenMetrics, 0.25);
        assert!(
            om.contains("# TYPE promhttp_metric_handler_requests counter\n"),
            "{om}"
        );
        assert!(
            om.contains("promhttp_metric_handler_requests_total{code=\"200\"} 2\n"),
            "{om}"
        );
        assert!(
            om.contains("promhttp_metric_handler_requests_total{code=\"503\"} 1\n"),
            "{om}"
        );
        assert!(
            om.contains("perfabi_exporter_scrape_duration_seconds 0.25\n"),
            "{om}"
        );
        assert!(
            om.contains("perfabi_exporter_read_errors_total{code=\"not-found\"} 1\n"),
            "{om}"
        );
        assert!(
            om.contains("perfabi_exporter_tls_handshake_errors_total 1\n"),
            "{om}"
        );
        assert!(om.contains("# UNIT process_cpu_seconds seconds\n"), "{om}");
        let value = |page: &str, name: &str| -> f64 {
            page.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in {page}"))
                .parse()
                .unwrap()
        };
        assert!(value(&om, "process_open_fds") >= 3.0);
        assert!(value(&om, "process_max_fds") >= value(&om, "process_open_fds"));
        assert!(value(&om, "process_resident_memory_bytes") > 1e5);
        assert!(
            value(&om, "process_virtual_memory_bytes")
                >= value(&om, "process_resident_memory_bytes")
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value(&om, "process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
        assert!(value(&om, "process_cpu_seconds_total") >= 0.0);
        let text = s.render(Format::Prometheus, 0.25);
        assert!(
            text.contains("# TYPE promhttp_metric_handler_requests_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter\n"),
            "{text}"
        );
        assert!(!text.contains("# UNIT"), "{text}");
    }

    /// The protobuf page holds the same families, counters named as their
    /// samples.
    #[test]
    fn own_families_as_protobuf() {
        use crate::protobuf::metrics::MetricFamily;
        use prost::Message;
        let s = Stats::default();
        s.answered(200);
        s.read_failed("busy");
        let page = s.encode(0.5);
        let mut rest = &page[..];
        let mut names = Vec::new();
        while !rest.is_empty() {
            let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
            if f.name() == "perfabi_exporter_read_errors_total" {
                assert_eq!(f.metric[0].label[0].value(), "busy");
                assert_eq!(f.metric[0].counter.as_ref().unwrap().value(), 1.0);
            }
            if f.name() == "perfabi_exporter_scrape_duration_seconds" {
                assert_eq!(f.metric[0].gauge.as_ref().unwrap().value(), 0.5);
            }
            names.push(f.name().to_string());
        }
        for want in [
            "promhttp_metric_handler_requests_total",
            "perfabi_exporter_scrape_duration_seconds",
            "perfabi_exporter_read_errors_total",
            "perfabi_exporter_tls_handshake_errors_total",
            "process_cpu_seconds_total",
            "process_open_fds",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
        }
    }
}
