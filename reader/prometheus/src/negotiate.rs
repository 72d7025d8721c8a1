//! Content negotiation: the page format a scraper's `Accept` header asks
//! for.

use perfabi_reader::exposition::Format;

/// The format a scraper's `Accept` header asks for: the acceptable media
/// range of highest `q` (the first of equals) among
/// `application/openmetrics-text` (version 1.0.0 or none given), which is
/// OpenMetrics, and `text/plain`, `text/*` and `*/*`, which are the
/// Prometheus text format; the text format when there is no header or
/// nothing in it is served.
pub fn negotiate(accept: Option<&str>) -> Format {
    let mut best: Option<(f32, Format)> = None;
    for range in accept.unwrap_or("").split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut q = 1.0f32;
        let mut version: Option<String> = None;
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse().unwrap_or(0.0),
                "version" => version = Some(v.to_string()),
                _ => {}
            }
        }
        let format = match (media.as_str(), version.as_deref()) {
            ("application/openmetrics-text", None | Some("1.0.0")) => Format::OpenMetrics,
            ("text/plain", None | Some("0.0.4")) | ("text/*" | "*/*", _) => Format::Prometheus,
            _ => continue,
        };
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, format));
        }
    }
    best.map_or(Format::Prometheus, |(_, f)| f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        let prometheus_2_42 = "application/openmetrics-text;version=1.0.0,\
            application/openmetrics-text;version=0.0.1;q=0.75,\
            text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(prometheus_2_42)), Format::OpenMetrics);
        assert_eq!(negotiate(None), Format::Prometheus);
        assert_eq!(negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(negotiate(Some("text/plain")), Format::Prometheus);
        assert_eq!(
            negotiate(Some("application/openmetrics-text; version=1.0.0")),
            Format::OpenMetrics
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0.2, text/plain;q=0.9")),
            Format::Prometheus
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;version=0.0.1")),
            Format::Prometheus
        );
        assert_eq!(negotiate(Some("application/json")), Format::Prometheus);
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Prometheus
        );
    }
}
