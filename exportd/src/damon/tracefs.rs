//! Finding tracefs (mounting it if needed) and reading a tracepoint's
//! `format` file, so that raw samples are decoded with the field offsets of
//! the running kernel, never assumed ones.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use perfabi::text::escape;
use perfabi_shm::safe_open::escape_path;

/// Where tracefs usually is.
pub const MOUNTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs root: an existing mount, else a new mount at
/// `/sys/kernel/tracing` when `mount` allows it.
pub fn root(mount: bool) -> Result<PathBuf, String> {
    if let Some(p) = MOUNTS
        .iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir())
    {
        return Ok(p.to_path_buf());
    }
    if !mount {
        return Err("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)".into());
    }
    let at = Path::new(MOUNTS[0]);
    rustix::mount::mount("nodev", at, "tracefs", rustix::mount::MountFlags::empty(), None)
        .map_err(|e| {
            format!(
                "tracefs is not mounted and mounting it at {} failed: {e} (run as root, or mount it: mount -t tracefs nodev {0})",
                escape_path(at)
            )
        })?;
    Ok(at.to_path_buf())
}

/// One field of an event's raw record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Byte offset in the raw record.
    pub offset: usize,
    /// Size in bytes (1, 2, 4 or 8).
    pub size: usize,
}

impl Field {
    /// Reads the field, zero-extended, from a raw record (little-endian host).
    pub fn read(&self, raw: &[u8]) -> Option<u64> {
        let b = raw.get(self.offset..self.offset + self.size)?;
        let mut w = [0u8; 8];
        w[..self.size].copy_from_slice(b);
        Some(u64::from_ne_bytes(w))
    }
}

/// A tracepoint's id and the fields of its raw record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// The event id (`perf_event_attr.config` for a tracepoint).
    pub id: u64,
    /// Fields by name.
    pub fields: HashMap<String, Field>,
}

impl Format {
    /// Reads `events/SYSTEM/NAME/format` under `root`.
    pub fn load(root: &Path, system: &str, name: &str) -> Result<Format, String> {
        let dir = root.join("events").join(system).join(name);
        let text = std::fs::read_to_string(dir.join("format")).map_err(|e| {
            format!(
                "{}: {e} (this kernel has no {system}:{name} tracepoint)",
                escape_path(&dir.join("format"))
            )
        })?;
        Format::parse(&text).map_err(|e| format!("{}: {e}", escape_path(&dir.join("format"))))
    }

    /// Parses the text of a `format` file.
    pub fn parse(text: &str) -> Result<Format, String> {
        let mut id = None;
        let mut fields = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("ID:") {
                id = Some(
                    v.trim()
                        .parse()
                        .map_err(|_| format!("bad ID line \"{}\"", escape(line.as_bytes())))?,
                );
                continue;
            }
            let Some(decl) = line.strip_prefix("field:") else {
                continue;
            };
            let mut parts = decl.split(';').map(str::trim);
            let decl = parts.next().unwrap_or("");
            let (mut offset, mut size) = (None, None);
            for p in parts {
                if let Some(v) = p.strip_prefix("offset:") {
                    offset = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.parse().ok();
                }
            }
            // The name is the declaration's last word, less any array suffix.
            let name = decl
                .rsplit([' ', '*'])
                .next()
                .unwrap_or("")
                .split('[')
                .next()
                .unwrap_or("");
            match (offset, size) {
                (Some(offset), Some(size @ (1 | 2 | 4 | 8))) if !name.is_empty() => {
                    fields.insert(name.to_string(), Field { offset, size });
                }
                (Some(_), Some(_)) => {} // arrays and strings: not needed here
                _ => return Err(format!("bad field line \"{}\"", escape(line.as_bytes()))),
            }
        }
        Ok(Format {
            id: id.ok_or("no ID line")?,
            fields,
        })
    }

    /// The named field, or an error naming what the kernel lacks.
    pub fn field(&self, name: &str) -> Result<Field, String> {
        self.fields
            .get(name)
            .copied()
            .ok_or_else(|| format!("the event has no field \"{}\"", escape(name.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `events/damon/damon_aggregated/format` of a 6.18 kernel (copied from
    /// tracefs), where `target_id` became an `unsigned long`.
    const FORMAT_6_18: &str = "name: damon_aggregated
ID: 767
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long target_id;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_regions;\toffset:16;\tsize:4;\tsigned:0;
\tfield:unsigned long start;\toffset:24;\tsize:8;\tsigned:0;
\tfield:unsigned long end;\toffset:32;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_accesses;\toffset:40;\tsize:4;\tsigned:0;
\tfield:unsigned int age;\toffset:44;\tsize:4;\tsigned:0;

print fmt: \"target_id=%lu nr_regions=%u %lu-%lu: %u %u\", REC->target_id, REC->nr_regions, REC->start, REC->end, REC->nr_accesses, REC->age
";

    #[test]
    fn parses_the_format_file_and_reads_fields() {
        let f = Format::parse(FORMAT_6_18).unwrap();
        assert_eq!(f.id, 767);
        assert_eq!(
            f.field("start").unwrap(),
            Field {
                offset: 24,
                size: 8
            }
        );
        assert_eq!(
            f.field("age").unwrap(),
            Field {
                offset: 44,
                size: 4
            }
        );
        assert_eq!(f.field("target_id").unwrap(), Field { offset: 8, size: 8 });
        assert!(f.field("nope").is_err());
        let mut raw = vec![0u8; 48];
        raw[24..32].copy_from_slice(&0x7f00_1234_5000u64.to_ne_bytes());
        raw[44..48].copy_from_slice(&96u32.to_ne_bytes());
        assert_eq!(f.field("start").unwrap().read(&raw), Some(0x7f00_1234_5000));
        assert_eq!(f.field("age").unwrap().read(&raw), Some(96));
        assert_eq!(f.field("age").unwrap().read(&raw[..46]), None);
        assert!(Format::parse("name: x\nformat:\n").is_err());
        assert!(Format::parse("ID: 3\n\tfield:int a;\toffset:x;\tsize:4;").is_err());
    }
}
