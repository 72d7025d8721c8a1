//! Content negotiation: the page format a scraper's `Accept` header asks
//! for.

use perfabi_reader::exposition::Format;

use crate::protobuf;

/// A page's format: one of the text formats, or the protobuf exposition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// A text format (OpenMetrics or Prometheus' 0.0.4).
    Text(Format),
    /// Length-delimited `io.prometheus.client.MetricFamily` messages
    /// (native histograms).
    Protobuf,
}

impl Exposition {
    /// The HTTP `Content-Type` of a page in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Text(f) => f.content_type(),
            Exposition::Protobuf => protobuf::CONTENT_TYPE,
        }
    }
}

/// The format a scraper's `Accept` header asks for: the acceptable media
/// range of highest `q` (the first of equals) among
/// `application/vnd.google.protobuf` with `proto=io.prometheus.client.MetricFamily`
/// and `encoding=delimited` (as Prometheus asks with native histograms
/// on), which is the protobuf exposition,
/// `application/openmetrics-text` (version 1.0.0 or none given), which is
/// OpenMetrics, and `text/plain`, `text/*` and `*/*`, which are the
/// Prometheus text format; the text format when there is no header or
/// nothing in it is served.
pub fn negotiate(accept: Option<&str>) -> Exposition {
    let mut best: Option<(f32, Exposition)> = None;
    for range in accept.unwrap_or("").split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0f32;
        let mut version: Option<String> = None;
        let (mut proto, mut encoding) = (None, None);
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse().unwrap_or(0.0),
                "version" => version = Some(v.to_string()),
                "proto" => proto = Some(v.to_string()),
                "encoding" => encoding = Some(v.to_string()),
                _ => {}
            }
        }
        let format = match (media.as_str(), version.as_deref()) {
            ("application/vnd.google.protobuf", _)
                if proto.as_deref() == Some("io.prometheus.client.MetricFamily")
                    && encoding.as_deref() == Some("delimited") =>
            {
                Exposition::Protobuf
            }
            ("application/openmetrics-text", None | Some("1.0.0")) => {
                Exposition::Text(Format::OpenMetrics)
            }
            ("text/plain", None | Some("0.0.4")) | ("text/*" | "*/*", _) => {
                Exposition::Text(Format::Prometheus)
            }
            _ => continue,
        };
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, format));
        }
    }
    best.map_or(Exposition::Text(Format::Prometheus), |(_, f)| f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENMETRICS: Exposition = Exposition::Text(Format::OpenMetrics);
    const TEXT: Exposition = Exposition::Text(Format::Prometheus);

    #[test]
    fn negotiation() {
        let prometheus_2_42 = "application/openmetrics-text;version=1.0.0,\
            application/openmetrics-text;version=0.0.1;q=0.75,\
            text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(prometheus_2_42)), OPENMETRICS);
        assert_eq!(negotiate(None), TEXT);
        assert_eq!(negotiate(Some("*/*")), TEXT);
        assert_eq!(negotiate(Some("text/plain")), TEXT);
        assert_eq!(
            negotiate(Some("application/openmetrics-text; version=1.0.0")),
            OPENMETRICS
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0.2, text/plain;q=0.9")),
            TEXT
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;version=0.0.1")),
            TEXT
        );
        assert_eq!(negotiate(Some("application/json")), TEXT);
        assert_eq!(negotiate(Some("application/openmetrics-text;q=0")), TEXT);
    }

    /// What Prometheus 2.42 sends with `--enable-feature=native-histograms`
    /// (its `scrapeAcceptHeaderWithProtobuf`), and protobuf ranges it does
    /// not serve.
    #[test]
    fn protobuf_as_prometheus_asks_for_it() {
        let native_histograms = "application/vnd.google.protobuf;\
            proto=io.prometheus.client.MetricFamily;encoding=delimited,\
            application/openmetrics-text;version=1.0.0;q=0.8,\
            application/openmetrics-text;version=0.0.1;q=0.75,\
            text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(native_histograms)), Exposition::Protobuf);
        assert_eq!(
            Exposition::Protobuf.content_type(),
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
        );
        // Another encoding (the old text or compact-text), another
        // message, or no proto: not served; the next range is.
        for refused in [
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
            "application/vnd.google.protobuf;proto=other.Message;encoding=delimited",
            "application/vnd.google.protobuf;encoding=delimited",
        ] {
            assert_eq!(
                negotiate(Some(&format!("{refused},text/plain;q=0.5"))),
                TEXT,
                "{refused}"
            );
        }
        // Quality decides, as among the text formats.
        assert_eq!(
            negotiate(Some(
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;\
                 encoding=delimited;q=0.4,application/openmetrics-text;version=1.0.0"
            )),
            OPENMETRICS
        );
    }
}
