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
    // Every field is read straight into a compact value by a visitor that
    // never buffers: a tree of JSON values would take about 16 times the
    // text's size, which a record at the size limit must not cost. A value
    // of the wrong shape (a list where a number or an intervals object
    // belongs) is refused where it starts, before any of it is read; what
    // is skipped (fields not read, keys of intervals other than `sample`
    // and `aggr`) is skipped without being kept. So memory stays within a
    // small factor of the text: the records, snapshots and regions built
    // are each no larger than a few times the text they come from.
    let records: Vec<RawRecord> =
        serde_json::from_slice(bytes).map_err(|e| format!("damo json record: {e}"))?;
    let mut out = Vec::new();
    for (i, rec) in records.into_iter().enumerate() {
        let at = |what: &str| format!("damo record {i}: {what}");
        let monitor = rec.kdamond_idx.map_or(0, |n| n.0);
        let target = rec.target_id.0;
        // Each record (and each snapshot, where damo stamps them) carries
        // its own intervals: they may change within a recording.
        let intervals = intervals_of(rec.intervals).map_err(|e| at(&e))?;
        for (j, s) in rec.snapshots.into_iter().enumerate() {
            let at = |what: &str| format!("damo record {i} snapshot {j}: {what}");
            let end_time = s.end_time.0;
            let regions = s
                .regions
                .into_iter()
                .map(|r| Region {
                    start: r.start.0,
                    end: r.end.0,
                    nr_accesses: r.nr_accesses.0,
                    age: r.age.0,
                })
                .collect();
            let intervals = intervals_of(s.intervals)
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
fn intervals_of(v: Option<RawIntervals>) -> Result<Option<Intervals>, String> {
    let Some(iv) = v else {
        return Ok(None);
    };
    let us = |k: &str, v: Option<u64>| -> Result<u32, String> {
        let v = v.ok_or_else(|| format!("intervals.{k}: missing"))?;
        u32::try_from(v).map_err(|_| format!("intervals.{k}: {v} is too large"))
    };
    Ok(Some(Intervals {
        sample_us: us("sample", iv.sample)?,
        aggr_us: us("aggr", iv.aggr)?,
    }))
}

/// One record of a damo file; fields other than these are ignored. The
/// fields damo always writes are required, so that a list of empty objects
/// (`[{},{},…]`, 3 bytes each) is refused at its first rather than built
/// into records some 30 times its size.
#[derive(Deserialize)]
struct RawRecord {
    kdamond_idx: Option<Lenient<0, u64>>,
    target_id: Lenient<0, u64>,
    intervals: Option<RawIntervals>,
    snapshots: Vec<RawSnapshot>,
}

/// One snapshot (aggregation) of a record.
#[derive(Deserialize)]
struct RawSnapshot {
    end_time: Lenient<0, u64>,
    intervals: Option<RawIntervals>,
    regions: Vec<RawRegion>,
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
        if K == 0 {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Map,
                &"a non-negative integer, as a number or as text",
            ));
        }
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

/// A damo `intervals` object, read directly: its `sample` and `aggr` in
/// microseconds (see [`TimeUs`]), other keys skipped unread. Anything but
/// an object (or `null`, read as absent) is refused where it starts.
struct RawIntervals {
    sample: Option<u64>,
    aggr: Option<u64>,
}

impl<'de> Deserialize<'de> for RawIntervals {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawIntervals;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an intervals object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<RawIntervals, A::Error> {
                let mut iv = RawIntervals {
                    sample: None,
                    aggr: None,
                };
                while let Some(k) = m.next_key::<String>()? {
                    let slot = match k.as_str() {
                        "sample" => &mut iv.sample,
                        "aggr" => &mut iv.aggr,
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = m.next_value::<Option<TimeUs>>()?.map(|t| t.0);
                }
                Ok(iv)
            }
        }
        d.deserialize_map(V)
    }
}

/// A time in microseconds, read directly: a number, or text with a unit
/// ("5 ms", "1 s") and perhaps thousands separators.
struct TimeUs(u64);

impl<'de> Deserialize<'de> for TimeUs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = TimeUs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a time in microseconds, as a number or as text with a unit")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<TimeUs, E> {
                Ok(TimeUs(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<TimeUs, E> {
                u64::try_from(v)
                    .map(TimeUs)
                    .map_err(|_| E::custom(format!("{v} is negative")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TimeUs, E> {
                time_us(v).map(TimeUs).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A time in microseconds given as text with a unit ("5 ms", "1 s").
fn time_us(s: &str) -> Result<u64, String> {
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
    fn a_huge_value_where_a_number_or_intervals_belong_is_refused_unread() {
        // 8 MiB of zeros where intervals belong: read as a tree of JSON
        // values this would cost some 16 times its size. The visitors
        // refuse the list at its '[' (byte 45), so nothing of it is read
        // or kept: memory is bounded by what was built before it.
        let zeros = ",0".repeat(4 << 20);
        for (field, value) in [
            ("intervals", format!("[0{zeros}]")),
            ("target_id", format!("[0{zeros}]")),
            ("kdamond_idx", format!("[0{zeros}]")),
            ("intervals", format!("{{\"sample\": [0{zeros}]}}")),
        ] {
            let other = if field == "target_id" {
                ""
            } else {
                r#""target_id": 0, "#
            };
            let json = format!(r#"[{{"snapshots": [], {other}"{field}": {value}}}]"#);
            assert!(json.len() > 8 << 20);
            let started = std::time::Instant::now();
            let e = parse(json.as_bytes(), LIMIT, UNSAID)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("damo json record: invalid type: sequence") && !e.contains('\n'),
                "{field}: {e}"
            );
            // Refused at once, not after the 8 MiB were parsed.
            let column: usize = e.rsplit("column ").next().unwrap().parse().unwrap();
            assert!(column < 100, "{field}: {e}");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(1),
                "{field}"
            );
        }
        // So is a snapshot's, and a list of empty objects.
        let snap = format!(
            r#"[{{"target_id": 0, "snapshots": [{{"end_time": [0{zeros}], "regions": []}}]}}]"#
        );
        assert!(parse(snap.as_bytes(), LIMIT, UNSAID).is_err());
        let empties = format!("[{{}}{}]", ",{}".repeat(1 << 20));
        let e = parse(empties.as_bytes(), LIMIT, UNSAID)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing field") && e.ends_with("column 3"),
            "{e}"
        );
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
