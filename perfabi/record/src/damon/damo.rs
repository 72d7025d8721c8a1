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

use perfabi::damon::{Aggregation, Intervals, Region};
use serde::Deserialize;
use serde_json::Value;

use super::ParseError;

/// Whether `bytes` start with a zlib header (RFC 1950): deflate with a
/// window of at most 32 KiB, and the check bits right. Python's
/// `zlib.compress` writes 78 9c by default, but other levels write 78 01,
/// 78 5e or 78 da.
fn is_zlib(bytes: &[u8]) -> bool {
    match bytes {
        [cmf, flg, ..] => {
            cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0
        }
        _ => false,
    }
}

/// Whether `bytes` look like a damo record: JSON starting with a list, or
/// zlib-compressed data.
pub fn is_damo(bytes: &[u8]) -> bool {
    is_zlib(bytes) || bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// Parses a damo record (`json` or `json_compressed`) into its snapshots as
/// aggregations in time order, each with the nanoseconds since the first
/// one; a compressed record must not decompress to more than `limit` bytes
/// ([`ParseError::Inflates`]). Snapshots whose intervals the record does not
/// give get `default`.
pub fn parse(
    bytes: &[u8],
    limit: u64,
    default: Intervals,
) -> Result<Vec<(u64, Aggregation)>, ParseError> {
    let mut text = Vec::new();
    let bytes = if is_zlib(bytes) {
        flate2::read::ZlibDecoder::new(bytes)
            .take(limit.saturating_add(1))
            .read_to_end(&mut text)
            .map_err(|e| format!("damo json_compressed record: {e}"))?;
        if text.len() as u64 > limit {
            return Err(ParseError::Inflates { limit });
        }
        &text[..]
    } else {
        bytes
    };
    // Regions are read straight into compact values: a tree of JSON values
    // would take about 16 times the text's size, which a record at the size
    // limit must not cost.
    let records: Vec<RawRecord> =
        serde_json::from_slice(bytes).map_err(|e| format!("damo json record: {e}"))?;
    let mut out = Vec::new();
    for (i, rec) in records.into_iter().enumerate() {
        let at = |what: &str| format!("damo record {i}: {what}");
        let monitor = opt_number(rec.kdamond_idx.as_ref())
            .map_err(|e| at(&e))?
            .unwrap_or(0);
        let target = number(rec.target_id.as_ref()).map_err(|e| at(&format!("target_id: {e}")))?;
        // Each record (and each snapshot, where damo stamps them) carries
        // its own intervals: they may change within a recording.
        let intervals = intervals_of(rec.intervals.as_ref()).map_err(|e| at(&e))?;
        let snapshots = rec.snapshots.ok_or_else(|| at("no snapshots list"))?;
        for (j, s) in snapshots.into_iter().enumerate() {
            let at = |what: &str| format!("damo record {i} snapshot {j}: {what}");
            let end_time =
                number(s.end_time.as_ref()).map_err(|e| at(&format!("end_time: {e}")))?;
            let regions = s
                .regions
                .ok_or_else(|| at("no regions list"))?
                .into_iter()
                .map(|r| Region {
                    start: r.start.0,
                    end: r.end.0,
                    nr_accesses: r.nr_accesses.0,
                    age: r.age.0,
                })
                .collect();
            let intervals = intervals_of(s.intervals.as_ref())
                .map_err(|e| at(&e))?
                .or(intervals)
                .unwrap_or(default);
            out.push((
                end_time,
                Aggregation {
                    monitor_id: monitor,
                    target_id: target,
                    aggregation: 0,
                    intervals,
                    regions,
                },
            ));
        }
    }
    out.sort_by_key(|(at_ns, _)| *at_ns);
    let t0 = out.first().map_or(0, |(at_ns, _)| *at_ns);
    for (at_ns, _) in &mut out {
        *at_ns -= t0;
    }
    Ok(out)
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

/// One record of a damo file; fields other than these are ignored.
#[derive(Deserialize)]
struct RawRecord {
    kdamond_idx: Option<Value>,
    target_id: Option<Value>,
    intervals: Option<Value>,
    snapshots: Option<Vec<RawSnapshot>>,
}

/// One snapshot (aggregation) of a record.
#[derive(Deserialize)]
struct RawSnapshot {
    end_time: Option<Value>,
    intervals: Option<Value>,
    regions: Option<Vec<RawRegion>>,
}

/// One region, read without an intermediate tree.
#[derive(Deserialize)]
struct RawRegion {
    start: Lenient<0, u64>,
    end: Lenient<0, u64>,
    nr_accesses: Lenient<1, u32>,
    age: Lenient<2, u32>,
}

/// A number as damo writes it, read directly: a JSON number, text with
/// thousands separators ("93,825,193,857,024"), or an object holding it
/// under the key `KEYS[K]` (`nr_accesses.samples`, `age.aggr_intervals`).
struct Lenient<const K: usize, T>(T);

const KEYS: [&str; 3] = ["", "samples", "aggr_intervals"];

impl<'de, const K: usize, T: TryFrom<u64>> Deserialize<'de> for Lenient<K, T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientVisitor::<K, T>(std::marker::PhantomData))
    }
}

struct LenientVisitor<const K: usize, T>(std::marker::PhantomData<T>);

impl<const K: usize, T> LenientVisitor<K, T> {
    fn fit<E: serde::de::Error>(v: u64) -> Result<Lenient<K, T>, E>
    where
        T: TryFrom<u64>,
    {
        T::try_from(v)
            .map(Lenient)
            .map_err(|_| E::custom(format!("{v} is too large")))
    }
}

impl<'de, const K: usize, T: TryFrom<u64>> serde::de::Visitor<'de> for LenientVisitor<K, T> {
    type Value = Lenient<K, T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a non-negative integer, as a number, as text, or in an object")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Self::fit(v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        let v = u64::try_from(v).map_err(|_| E::custom(format!("{v} is negative")))?;
        Self::fit(v)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let n = v
            .replace(',', "")
            .trim()
            .parse()
            .map_err(|_| E::custom(format!("{v:?} is not a number")))?;
        Self::fit(n)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(k) = m.next_key::<String>()? {
            if K > 0 && k == KEYS[K] {
                found = Some(m.next_value::<Lenient<0, u64>>()?.0);
            } else {
                m.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        let v = found.ok_or_else(|| {
            <A::Error as serde::de::Error>::custom(format!("no {:?} in the object", KEYS[K]))
        })?;
        Self::fit(v)
    }
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

    /// Made by damo 3.4.3 itself from the shipped trace: see exportd/records/README.md.
    const LIMIT: u64 = super::super::DEFAULT_MAX_RECORD_BYTES;
    const SHIPPED: &[u8] =
        include_bytes!("../../../../exportd/records/guest-6.12-vaddr-hot4of64.damo.json.zlib");
    const TRACE: &str = include_str!("../../../../exportd/records/guest-6.12-vaddr-hot4of64.trace");
    /// The intervals given to what a record does not say (recognisable).
    const UNSAID: Intervals = Intervals {
        sample_us: 7,
        aggr_us: 700,
    };

    #[test]
    fn a_record_compressed_at_any_level_is_recognised() {
        use std::io::Write;
        let json = br#"[{"target_id": 0, "snapshots": [{"end_time": 5, "regions": [{"start": 0, "end": 4096, "nr_accesses": 2, "age": 1}]}]}]"#;
        for level in [0, 1, 6, 9] {
            let mut z =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
            z.write_all(json).unwrap();
            let bytes = z.finish().unwrap();
            assert!(is_damo(&bytes), "level {level}: {:02x?}", &bytes[..2]);
            let rec = parse(&bytes, 1 << 20, UNSAID).unwrap();
            assert_eq!(rec.len(), 1, "level {level}");
            assert_eq!(rec[0].1.regions[0].nr_accesses, 2);
        }
        // Text that merely starts with 'x' is not zlib.
        assert!(!is_zlib(b"xy"));
    }

    #[test]
    fn damo_s_own_conversion_of_the_shipped_trace_gives_the_same_aggregations() {
        let damo = parse(SHIPPED, LIMIT, UNSAID).unwrap();
        let trace = super::super::trace::parse(TRACE, UNSAID).aggregations;
        assert!(
            damo.iter().all(|(_, a)| a.intervals == UNSAID),
            "damo did not know them"
        );
        assert_eq!(damo.len(), 17);
        assert_eq!(damo.len(), trace.len());
        for ((_, d), (_, t)) in damo.iter().zip(&trace) {
            assert_eq!(d.regions, t.regions);
            assert_eq!((d.monitor_id, d.target_id), (0, t.target_id));
        }
        // The cadence is the trace's (damo stamps the last event, we the
        // first: within a few microseconds of each other).
        let gaps = |r: &[(u64, Aggregation)]| -> Vec<u64> {
            r.windows(2)
                .map(|w| (w[1].0 - w[0].0) / 1_000_000)
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
        assert_eq!(
            parse(&json, LIMIT, UNSAID).unwrap(),
            parse(SHIPPED, LIMIT, UNSAID).unwrap()
        );
        // damo 1.x/2.x style: plain numbers, intervals in microseconds.
        let old = br#"[{"target_id": 3, "intervals": {"sample": 5000, "aggr": "100 ms", "ops_update": 1000000},
            "snapshots": [{"start_time": 10, "end_time": 100000010,
              "regions": [{"start": 4096, "end": 8192, "nr_accesses": 7, "age": 2}]}]}]"#;
        let r = parse(old, LIMIT, UNSAID).unwrap();
        assert_eq!(
            r[0].1.intervals,
            Intervals {
                sample_us: 5000,
                aggr_us: 100_000
            }
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
        let changed = parse(changing, LIMIT, UNSAID).unwrap();
        let ivs: Vec<_> = changed
            .iter()
            .map(|(_, a)| (a.target_id, (a.intervals.sample_us, a.intervals.aggr_us)))
            .collect();
        assert_eq!(
            ivs,
            [
                (1, (5000, 100_000)),
                (2, (1000, 50_000)),
                (1, (10_000, 200_000))
            ]
        );
        assert_eq!(r[0].1.target_id, 3);
        assert_eq!(r[0].1.regions[0].nr_accesses, 7);
        for bad in [
            &br#"[{"target_id": 0}]"#[..],
            br#"[{"target_id": 0, "snapshots": [{"end_time": 1, "regions": [{"start": "x"}]}]}]"#,
            br#"[{"target_id": -1, "snapshots": []}]"#,
            b"[1,",
            &SHIPPED[..100],
        ] {
            assert!(
                parse(bad, LIMIT, UNSAID).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
