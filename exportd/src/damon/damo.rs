//! damo's record files (`damo record`, `damo convert_record_format`): a JSON
//! list of records, one per (kdamond, context, target), each with its
//! snapshots (aggregations) of regions; `json_compressed` is the same text
//! compressed with zlib.
//!
//! damo's format changed across versions, so fields are read leniently:
//! a number may be a JSON number or a string with thousands separators
//! ("93,825,193,857,024", damo 3.x); `nr_accesses` and `age` may be plain
//! numbers (damo 1.x) or objects with `samples` and `aggr_intervals`;
//! intervals may be absent (`null`, when damo read a trace) or given in
//! microseconds, as numbers or as text with a unit ("5 ms"). The kdamond's
//! thread id is not recorded: the monitor id published is `kdamond_idx`.

use std::io::Read;

use perfabi::damon::{Intervals, Region};
use serde_json::Value;

use super::replay::{Record, RecordedAggregation};

const ZLIB_MAGIC: [u8; 2] = [0x78, 0x9c];

/// Whether `bytes` look like a damo record: JSON starting with a list, or
/// zlib-compressed data.
pub fn is_damo(bytes: &[u8]) -> bool {
    bytes.starts_with(&ZLIB_MAGIC) || bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// Parses a damo record (`json` or `json_compressed`); a compressed record
/// must not decompress to more than `limit` bytes.
pub fn parse(bytes: &[u8], limit: u64) -> Result<Record, String> {
    let mut text = Vec::new();
    let bytes = if bytes.starts_with(&ZLIB_MAGIC) {
        flate2::read::ZlibDecoder::new(bytes)
            .take(limit.saturating_add(1))
            .read_to_end(&mut text)
            .map_err(|e| format!("damo json_compressed record: {e}"))?;
        if text.len() as u64 > limit {
            return Err(format!(
                "damo json_compressed record decompresses to more than {limit} bytes \
                 (raise --replay-max-mib to read it)"
            ));
        }
        &text[..]
    } else {
        bytes
    };
    let records: Vec<Value> =
        serde_json::from_slice(bytes).map_err(|e| format!("damo json record: {e}"))?;
    let mut out = Vec::new();
    for (i, rec) in records.iter().enumerate() {
        let at = |what: &str| format!("damo record {i}: {what}");
        let monitor = opt_number(rec.get("kdamond_idx"))
            .map_err(|e| at(&e))?
            .unwrap_or(0);
        let target = number(rec.get("target_id")).map_err(|e| at(&format!("target_id: {e}")))?;
        // Each record (and each snapshot, where damo stamps them) carries
        // its own intervals: they may change within a recording.
        let intervals = intervals_of(rec.get("intervals")).map_err(|e| at(&e))?;
        let snapshots = rec
            .get("snapshots")
            .and_then(Value::as_array)
            .ok_or_else(|| at("no snapshots list"))?;
        for (j, s) in snapshots.iter().enumerate() {
            let at = |what: &str| format!("damo record {i} snapshot {j}: {what}");
            let end_time = number(s.get("end_time")).map_err(|e| at(&format!("end_time: {e}")))?;
            let regions = s
                .get("regions")
                .and_then(Value::as_array)
                .ok_or_else(|| at("no regions list"))?
                .iter()
                .enumerate()
                .map(|(k, r)| region(r).map_err(|e| at(&format!("region {k}: {e}"))))
                .collect::<Result<Vec<_>, _>>()?;
            let intervals = intervals_of(s.get("intervals"))
                .map_err(|e| at(&e))?
                .or(intervals);
            out.push(RecordedAggregation {
                at_ns: end_time,
                monitor,
                target,
                intervals,
                regions,
            });
        }
    }
    out.sort_by_key(|a| a.at_ns);
    let t0 = out.first().map_or(0, |a| a.at_ns);
    for a in &mut out {
        a.at_ns -= t0;
    }
    Ok(Record { aggregations: out })
}

/// A damo `intervals` object (`sample`, `aggr`), absent or `null` if damo did
/// not know them.
fn intervals_of(v: Option<&Value>) -> Result<Option<Intervals>, String> {
    let Some(iv) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let us = |k: &str| -> Result<u32, String> {
        let v = time_us(iv.get(k)).map_err(|e| format!("intervals.{k}: {e}"))?;
        u32::try_from(v).map_err(|_| format!("intervals.{k}: {v} is too large"))
    };
    Ok(Some(Intervals {
        sample_us: us("sample")?,
        aggr_us: us("aggr")?,
    }))
}

fn region(r: &Value) -> Result<Region, String> {
    let field = |k: &str, inner: &str| -> Result<u64, String> {
        match r.get(k) {
            Some(Value::Object(o)) => number(o.get(inner)).map_err(|e| format!("{k}.{inner}: {e}")),
            v => number(v).map_err(|e| format!("{k}: {e}")),
        }
    };
    let small = |k: &str, inner: &str| -> Result<u32, String> {
        let v = field(k, inner)?;
        u32::try_from(v).map_err(|_| format!("{k}: {v} is too large"))
    };
    Ok(Region {
        start: field("start", "")?,
        end: field("end", "")?,
        nr_accesses: small("nr_accesses", "samples")?,
        age: small("age", "aggr_intervals")?,
    })
}

/// A number given as a JSON number or as text with thousands separators.
fn number(v: Option<&Value>) -> Result<u64, String> {
    opt_number(v)?.ok_or_else(|| "missing".to_string())
}

fn opt_number(v: Option<&Value>) -> Result<Option<u64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{n} is not a non-negative integer")),
        Some(Value::String(s)) => s
            .replace(',', "")
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{s:?} is not a number")),
        Some(other) => Err(format!("{other} is not a number")),
    }
}

/// A time in microseconds: a number, or text with a unit ("5 ms", "1 s").
fn time_us(v: Option<&Value>) -> Result<u64, String> {
    let Some(Value::String(s)) = v else {
        return number(v);
    };
    let s = s.replace(',', "");
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = (s[..split].trim(), s[split..].trim());
    let value: f64 = num.parse().map_err(|_| format!("{s:?} is not a time"))?;
    let scale = match unit {
        "" | "us" => 1.0,
        "ns" => 1e-3,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return Err(format!("{s:?}: unknown time unit {unit:?}")),
    };
    Ok((value * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made by damo 3.4.3 itself from the shipped trace: see records/README.md.
    const LIMIT: u64 = super::super::replay::DEFAULT_MAX_RECORD_BYTES;
    const SHIPPED: &[u8] = include_bytes!("../../records/guest-6.12-vaddr-hot4of64.damo.json.zlib");
    const TRACE: &str = include_str!("../../records/guest-6.12-vaddr-hot4of64.trace");

    #[test]
    fn damo_s_own_conversion_of_the_shipped_trace_gives_the_same_aggregations() {
        let damo = parse(SHIPPED, LIMIT).unwrap();
        let trace = super::super::text::parse(TRACE);
        assert!(
            damo.aggregations.iter().all(|a| a.intervals.is_none()),
            "damo did not know them"
        );
        assert_eq!(damo.aggregations.len(), 17);
        assert_eq!(damo.aggregations.len(), trace.aggregations.len());
        for (d, t) in damo.aggregations.iter().zip(&trace.aggregations) {
            assert_eq!(d.regions, t.regions);
            assert_eq!((d.monitor, d.target), (0, t.target));
        }
        // The cadence is the trace's (damo stamps the last event, we the
        // first: within a few microseconds of each other).
        let gaps = |r: &Record| -> Vec<u64> {
            r.aggregations
                .windows(2)
                .map(|w| (w[1].at_ns - w[0].at_ns) / 1_000_000)
                .collect()
        };
        assert_eq!(gaps(&damo), gaps(&trace));
    }

    #[test]
    fn the_plain_json_form_and_older_field_forms_are_read() {
        let mut json = Vec::new();
        flate2::read::ZlibDecoder::new(SHIPPED)
            .read_to_end(&mut json)
            .unwrap();
        assert!(is_damo(&json));
        assert_eq!(parse(&json, LIMIT).unwrap(), parse(SHIPPED, LIMIT).unwrap());
        // damo 1.x/2.x style: plain numbers, intervals in microseconds.
        let old = br#"[{"target_id": 3, "intervals": {"sample": 5000, "aggr": "100 ms", "ops_update": 1000000},
            "snapshots": [{"start_time": 10, "end_time": 100000010,
              "regions": [{"start": 4096, "end": 8192, "nr_accesses": 7, "age": 2}]}]}]"#;
        let r = parse(old, LIMIT).unwrap();
        assert_eq!(
            r.aggregations[0].intervals,
            Some(Intervals {
                sample_us: 5000,
                aggr_us: 100_000
            })
        );
        // Intervals changed in the middle of a recording: each snapshot
        // keeps its own.
        let changing = br#"[{"target_id": 1, "intervals": {"sample": 5000, "aggr": 100000},
            "snapshots": [
              {"end_time": 100000000, "regions": [{"start": 0, "end": 4096, "nr_accesses": 20, "age": 0}]},
              {"end_time": 300000000, "intervals": {"sample": 10000, "aggr": 200000},
               "regions": [{"start": 0, "end": 4096, "nr_accesses": 20, "age": 0}]}]},
            {"target_id": 2, "intervals": {"sample": 1000, "aggr": 50000},
             "snapshots": [{"end_time": 200000000,
               "regions": [{"start": 0, "end": 4096, "nr_accesses": 1, "age": 0}]}]}]"#;
        let changed = parse(changing, LIMIT).unwrap();
        let ivs: Vec<_> = changed
            .aggregations
            .iter()
            .map(|a| (a.target, a.intervals.map(|i| (i.sample_us, i.aggr_us))))
            .collect();
        assert_eq!(
            ivs,
            [
                (1, Some((5000, 100_000))),
                (2, Some((1000, 50_000))),
                (1, Some((10_000, 200_000)))
            ]
        );
        assert_eq!(r.aggregations[0].target, 3);
        assert_eq!(r.aggregations[0].regions[0].nr_accesses, 7);
        for bad in [
            &br#"[{"target_id": 0}]"#[..],
            br#"[{"target_id": 0, "snapshots": [{"end_time": 1, "regions": [{"start": "x"}]}]}]"#,
            br#"[{"target_id": -1, "snapshots": []}]"#,
            b"[1,",
            &SHIPPED[..100],
        ] {
            assert!(
                parse(bad, LIMIT).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
