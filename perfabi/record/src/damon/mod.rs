//! DAMON records, read from any of three formats:
//!
//! * trace text of `damon_aggregated` events, as ftrace or `perf script`
//!   print it (module `trace`);
//! * damo's record files, `json` or `json_compressed` (module `damo`);
//! * recordings made with `perfabi-cat --record` (JSON lines, see
//!   [`crate::recording`]).
//!
//! [`parse`] reads a record from memory, [`read_file`] from a file (bounded,
//! links not followed). [`Assembler`] rebuilds complete aggregations from
//! `damon_aggregated` events, whatever carried them: trace text here, the
//! perf ring buffer in the exporter's live tracepoint source.

mod assemble;
mod damo;
#[cfg(target_os = "linux")]
mod read;
mod trace;

pub use assemble::{Assembler, Event};
#[cfg(target_os = "linux")]
pub use read::{read_file, ReadError};

use perfabi::damon::{Aggregation, Intervals};

/// A parsed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Complete aggregations in time order, each with the nanoseconds since
    /// the first event of the record. Their aggregation index is the one the
    /// recorded segment gave (a perfabi-cat recording) or 0; a writer that
    /// replays them numbers them anew.
    pub aggregations: Vec<(u64, Aggregation)>,
    /// What the recorded workload did, if the record says (the
    /// `PERFABI-TRACE-BEGIN` line of trace text); `None` otherwise (damo
    /// records and recordings never say).
    pub workload: Option<Workload>,
}

/// The workload a trace was recorded under, from its `PERFABI-TRACE-BEGIN
/// … workload=START END HOT_END PID` line: a process that mapped
/// `start..end`, touched it all, then kept rewriting `start..hot_end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    /// First address of its mapping.
    pub start: u64,
    /// End of its mapping (exclusive).
    pub end: u64,
    /// End of the hot range (exclusive), which starts at `start`.
    pub hot_end: u64,
    /// Its process id.
    pub pid: u64,
}

/// The default bound on a record, read or decompressed: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 64 << 20;

/// Parses a whole record in any of the formats of the module documentation;
/// a compressed one must not decompress to more than `limit` bytes.
/// Aggregations whose intervals the record does not give get `default`.
/// The error is one line saying what is wrong and where.
pub fn parse(bytes: &[u8], limit: u64, default: Intervals) -> Result<Record, String> {
    parse_bytes(bytes, limit, default).map_err(|e| e.to_string())
}

/// Why bytes are not a record: [`parse`] says it as text, [`read_file`] as
/// a [`ReadError`].
#[derive(Debug)]
enum ParseError {
    /// A compressed record decompresses to more than the limit.
    Inflates {
        /// The limit, in bytes.
        limit: u64,
    },
    /// Not a record in any format read here (what is wrong, and where).
    Malformed(String),
}

impl From<String> for ParseError {
    fn from(why: String) -> Self {
        ParseError::Malformed(why)
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Inflates { limit } => inflates(f, *limit, "raise the limit"),
            ParseError::Malformed(why) => f.write_str(why),
        }
    }
}

/// The message of a compressed record over `limit`, with `raise` (such as
/// "raise --replay-max-mib") as the advice.
fn inflates(f: &mut std::fmt::Formatter<'_>, limit: u64, raise: &str) -> std::fmt::Result {
    write!(
        f,
        "damo json_compressed record decompresses to more than {limit} bytes ({raise} to read it)"
    )
}

/// [`parse`], with its error typed.
fn parse_bytes(bytes: &[u8], limit: u64, default: Intervals) -> Result<Record, ParseError> {
    if damo::is_damo(bytes) {
        let aggregations = damo::parse(bytes, limit, default)?;
        return Ok(Record {
            aggregations,
            workload: None,
        });
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "neither text nor a damo record (json or json_compressed)".to_string())?;
    if text.trim_start().starts_with('{') {
        let aggregations = crate::aggregations(text)?;
        return Ok(Record {
            aggregations,
            workload: None,
        });
    }
    Ok(trace::parse(text, default))
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::damon::Region;

    #[test]
    fn reads_back_a_perfabi_cat_recording() {
        let iv = Intervals {
            sample_us: 1000,
            aggr_us: 50_000,
        };
        let a = Aggregation {
            monitor_id: 9,
            target_id: 1,
            aggregation: 4,
            intervals: iv,
            regions: vec![Region {
                start: 0,
                end: 4096,
                nr_accesses: 50,
                age: 2,
            }],
        };
        let line = |t_ns, damon: Vec<_>| {
            crate::to_line(&crate::Snapshot {
                t_ns,
                epoch: "0x1".into(),
                generation: 1,
                counters: Default::default(),
                damon,
            })
        };
        let mut b = a.clone();
        b.aggregation = 5;
        // Aggregation 4 appears in two snapshots: it is replayed once.
        let text = [
            line(0, vec![a.clone()]),
            line(40, vec![a.clone()]),
            line(90, vec![b]),
        ]
        .join("\n");
        let unsaid = Intervals {
            sample_us: 7,
            aggr_us: 700,
        };
        let r = parse(text.as_bytes(), DEFAULT_MAX_RECORD_BYTES, unsaid).unwrap();
        assert!(r.aggregations.iter().all(|(_, a)| a.intervals == iv));
        assert_eq!(r.aggregations.len(), 2);
        assert_eq!(
            (r.aggregations[1].0, r.aggregations[1].1.monitor_id),
            (90, 9)
        );
        assert_eq!(r.aggregations[0].1.regions[0].nr_accesses, 50);
        assert_eq!(r.workload, None);
        assert!(parse(b"{not json", DEFAULT_MAX_RECORD_BYTES, unsaid).is_err());
    }
}
