//! Reading a record file: opened without following links, refused unless
//! it is a regular file within the limit, read and decompressed to at most
//! the limit, so that a hostile path (a FIFO, a device, a link, a huge file,
//! a zlib bomb) costs neither a hang nor the memory it asks for.

use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use perfabi::damon::Intervals;
use perfabi::text::escape;
use perfabi_shm::safe_open::{self, escape_path, PathError, Problem};

use super::{parse_bytes, ParseError, Record};

/// Why a record file could not be read. Its [`Display`](fmt::Display) is
/// one line naming the file and saying what to do;
/// [`advising`](ReadError::advising) lets a command name its own option
/// for a record over the limit.
#[derive(Debug)]
pub enum ReadError {
    /// The path was refused or could not be opened: a symbolic link, not a
    /// regular file (a FIFO, a device, a folder), missing, … (it says which).
    Open(PathError),
    /// The file is larger than the limit.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its length, in bytes.
        bytes: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The file grew past the limit while being read.
    Grew {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// Reading the file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// A compressed record (damo's `json_compressed`) decompresses to more
    /// than the limit.
    Inflates {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The file is not a record in any format read here.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        why: String,
    },
    /// The record holds no complete aggregation.
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Reads the DAMON record at `path`, in any format
/// [`parse`](super::parse) reads, and checks that it holds at least one
/// complete aggregation. A symbolic link in the last component of `path` is
/// refused, and so is anything but a regular file. At most `limit` bytes
/// are read, and a compressed record may decompress to at most `limit`
/// ([`DEFAULT_MAX_RECORD_BYTES`](super::DEFAULT_MAX_RECORD_BYTES) unless
/// the user asks otherwise). Aggregations whose intervals the record does
/// not give get `default`.
pub fn read_file(path: &Path, limit: u64, default: Intervals) -> Result<Record, ReadError> {
    let at = || path.to_path_buf();
    let mut bytes = Vec::new();
    // The file may grow after it was measured: read at most the limit.
    safe_open::open_input(path, limit)
        .map_err(|e| match e.problem {
            Problem::TooLarge { len, limit } => ReadError::TooLarge {
                path: e.path,
                bytes: len,
                limit,
            },
            _ => ReadError::Open(e),
        })?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| ReadError::Io { path: at(), error })?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::Grew { path: at(), limit });
    }
    let record = parse_bytes(&bytes, limit, default).map_err(|e| match e {
        ParseError::Inflates { limit } => ReadError::Inflates { path: at(), limit },
        ParseError::Malformed(why) => ReadError::Malformed { path: at(), why },
    })?;
    if record.aggregations.is_empty() {
        return Err(ReadError::Empty { path: at() });
    }
    Ok(record)
}

impl ReadError {
    /// The one-line message, with `raise` (such as "raise --replay-max-mib")
    /// as the advice for a record over the limit: a command names its own
    /// option, where [`Display`](fmt::Display) says "raise the limit".
    pub fn advising<'a>(&'a self, raise: &'a str) -> impl fmt::Display + 'a {
        Advised(self, raise)
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, raise: &str) -> fmt::Result {
        match self {
            ReadError::Open(e) => write!(f, "{e}"),
            ReadError::TooLarge { path, bytes, limit } => write!(
                f,
                "refusing {}: {bytes} bytes, more than the limit of {limit} ({raise} to read it)",
                escape_path(path)
            ),
            ReadError::Grew { path, limit } => write!(
                f,
                "{}: it grew past the limit of {limit} bytes while being read",
                escape_path(path)
            ),
            ReadError::Io { path, error } => write!(f, "{}: {error}", escape_path(path)),
            ReadError::Inflates { path, limit } => {
                write!(f, "{}: ", escape_path(path))?;
                super::inflates(f, *limit, raise)
            }
            ReadError::Malformed { path, why } => {
                write!(f, "{}: {}", escape_path(path), escape(why.as_bytes()))
            }
            ReadError::Empty { path } => write!(
                f,
                "{}: no complete damon_aggregated aggregation in it",
                escape_path(path)
            ),
        }
    }
}

struct Advised<'a>(&'a ReadError, &'a str);

impl fmt::Display for Advised<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, self.1)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "raise the limit")
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Open(e) => Some(e),
            ReadError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::damon::DEFAULT_MAX_RECORD_BYTES as LIMIT;

    const IV: Intervals = Intervals {
        sample_us: 5000,
        aggr_us: 100_000,
    };

    fn shipped(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../exportd/records")
            .join(name)
    }

    #[test]
    fn the_shipped_records_are_read_in_both_formats() {
        let trace = read_file(&shipped("guest-6.12-vaddr-hot4of64.trace"), LIMIT, IV).unwrap();
        let damo = read_file(
            &shipped("guest-6.12-vaddr-hot4of64.damo.json.zlib"),
            LIMIT,
            IV,
        )
        .unwrap();
        assert_eq!(trace.aggregations.len(), 17);
        assert_eq!(damo.aggregations.len(), 17);
        assert_eq!(trace.workload.map(|w| w.pid), Some(156));
        assert_eq!(damo.workload, None);
    }

    #[test]
    fn each_refusal_is_typed_and_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let trace = shipped("guest-6.12-vaddr-hot4of64.trace");
        let len = std::fs::metadata(&trace).unwrap().len();

        let e = read_file(&trace, 1000, IV).unwrap_err();
        assert!(
            matches!(e, ReadError::TooLarge { bytes, limit: 1000, .. } if bytes == len),
            "{e:?}"
        );
        assert!(
            e.to_string().ends_with(&format!(
                "{len} bytes, more than the limit of 1000 (raise the limit to read it)"
            )),
            "{e}"
        );
        assert!(e
            .advising("raise --max-mib")
            .to_string()
            .ends_with("(raise --max-mib to read it)"));

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&trace, &link).unwrap();
        let e = read_file(&link, LIMIT, IV).unwrap_err();
        assert!(matches!(&e, ReadError::Open(p) if matches!(p.problem, Problem::Symlink)));
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = read_file(Path::new("/dev/zero"), LIMIT, IV).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");

        // A zlib bomb: 1 MiB of spaces compresses to about a kilobyte.
        let bomb = dir.path().join("bomb");
        {
            use std::io::Write;
            let mut z = flate2::write::ZlibEncoder::new(
                std::fs::File::create(&bomb).unwrap(),
                flate2::Compression::default(),
            );
            z.write_all(b"[").unwrap();
            z.write_all(&vec![b' '; 1 << 20]).unwrap();
            z.finish().unwrap();
        }
        let e = read_file(&bomb, 64 << 10, IV).unwrap_err();
        assert!(
            matches!(e, ReadError::Inflates { limit, .. } if limit == 64 << 10),
            "{e:?}"
        );
        assert!(
            e.advising("raise --max-mib")
                .to_string()
                .contains("decompresses to more than 65536 bytes (raise --max-mib to read it)"),
            "{e}"
        );

        let none = dir.path().join("none");
        std::fs::write(
            &none,
            "PERFABI-TRACE-BEGIN intervals sample_us=5000 aggr_us=100000\n",
        )
        .unwrap();
        let e = read_file(&none, LIMIT, IV).unwrap_err();
        assert!(matches!(e, ReadError::Empty { .. }), "{e:?}");
        assert!(
            e.to_string().contains("no complete damon_aggregated"),
            "{e}"
        );

        let bad = dir.path().join("bad");
        std::fs::write(&bad, "{not json").unwrap();
        let e = read_file(&bad, LIMIT, IV).unwrap_err();
        assert!(matches!(e, ReadError::Malformed { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with(&format!("{}: line 1: ", bad.display())),
            "{e}"
        );

        let e = read_file(&dir.path().join("missing"), LIMIT, IV).unwrap_err();
        assert!(matches!(&e, ReadError::Open(p) if p.not_found()), "{e:?}");
    }
}
