//! The families the writers publish out of the box, as the documentation's
//! table says (`docs/families.md`): parsed from that page
//! itself, and checked against [`crate::table`] ([`check`]), so that the
//! table users read is the definition the writers register. The
//! exporter's own `/proc`-only families are defined by the table alone:
//! its tests compare what it publishes with these rows.
//!
//! ```
//! let rows = perfabi_families::readme::rows();
//! let r = perfabi_families::readme::find(&rows, "disk.dev.read_bytes").unwrap();
//! assert_eq!(r.kind_of("disk.dev.read_bytes"), Some(perfabi::Kind::Counter));
//! assert_eq!(r.unit_of("disk.dev.read_bytes"), Some(perfabi::Unit::BYTES));
//! assert_eq!(r.dimension, Some("device"));
//! let vm = perfabi_families::readme::find(&rows, "mem.vmstat.nr_dirty").unwrap();
//! assert_eq!(vm.kind_of("mem.vmstat.nr_dirty"), Some(perfabi::Kind::Gauge));
//! assert_eq!(vm.unit_of("mem.vmstat.pgfault"), Some(perfabi::Unit::COUNT));
//! ```

use perfabi::{Kind, Unit};

use crate::table::{Writer, FAMILIES};

/// The documentation page that holds the table (`docs/families.md`).
pub const README: &str = include_str!("../../../docs/families.md");

/// The comment line that starts the table in `docs/families.md`.
pub const MARKER: &str = "<!-- families-table";

/// One row of the table: one family, or a pattern of families
/// (`mem.vmstat.<name>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row<'a> {
    /// The family's name, or a pattern ending in `.<name>` (any last
    /// part).
    pub name: &'a str,
    /// The kind as written: `counter`, or `counter; gauge for nr_*` (see
    /// [`Row::kind_of`]).
    pub kind: &'a str,
    /// The unit as written: `bytes`, `count; pages for nr_*` (see
    /// [`Row::unit_of`]).
    pub unit: &'a str,
    /// The dimension; `None` for a family of one instance (`—`).
    pub dimension: Option<&'a str>,
    /// What the kernel module publishes it from; `None` if it does not.
    pub kernel_source: Option<&'a str>,
    /// What the eBPF writer (issue 31) is to publish it from; `None` if
    /// it is not to.
    pub bpf_source: Option<&'a str>,
    /// What `perfabi-exportd` publishes it from; `None` if it does not.
    pub userspace_source: Option<&'a str>,
}

impl Row<'_> {
    /// The pattern's fixed part (`mem.vmstat.`), or `None` for a row of
    /// one family.
    pub fn prefix(&self) -> Option<&str> {
        self.name.strip_suffix("<name>")
    }

    /// Whether `family` is this row's family, or one of its pattern.
    pub fn matches(&self, family: &str) -> bool {
        match self.prefix() {
            Some(p) => family.len() > p.len() && family.starts_with(p),
            None => family == self.name,
        }
    }

    /// The text of a kind or unit cell that applies to `family`: `a; b for
    /// P*` is `b` when the pattern's variable part starts with `P`, else
    /// `a`.
    fn choose<'t>(&self, cell: &'t str, family: &str) -> &'t str {
        let var = self
            .prefix()
            .and_then(|p| family.strip_prefix(p))
            .unwrap_or("");
        let mut parts = cell.split(';').map(str::trim);
        let default = parts.next().unwrap_or("");
        for alt in parts {
            if let Some((value, glob)) = alt.split_once(" for ") {
                let glob = glob.trim().trim_matches('`').trim_end_matches('*');
                if !var.is_empty() && var.starts_with(glob) {
                    return value.trim();
                }
            }
        }
        default
    }

    /// The kind of `family` (one the row [`matches`](Self::matches)):
    /// `None` if the table's text names no kind.
    pub fn kind_of(&self, family: &str) -> Option<Kind> {
        kind(self.choose(self.kind, family))
    }

    /// The unit of `family`, the table's text mapped by
    /// [`Unit::from_legacy`] (`count`, `bytes`, `ns`, `us`, `KiB`,
    /// `pages`), or a count scaled by a power of ten as perfabi shows it
    /// (`count x 10^-3`): `None` if it maps to none.
    pub fn unit_of(&self, family: &str) -> Option<Unit> {
        let text = self.choose(self.unit, family);
        Unit::from_legacy(text).or_else(|| {
            let power = text.strip_prefix("count x 10^")?.parse::<i8>().ok()?;
            Some(Unit::new(0, 0, 1, 0, 0, power, 0)).filter(Unit::check)
        })
    }
}

/// A kind's name as the spec writes it.
fn kind(text: &str) -> Option<Kind> {
    [Kind::Counter, Kind::Gauge, Kind::Peak, Kind::Histogram]
        .into_iter()
        .find(|k| k.as_str() == text)
}

/// A cell's text without its backquotes; `None` for `—`.
fn cell(c: &str) -> Option<&str> {
    let c = c.trim();
    let c = c
        .strip_prefix('`')
        .and_then(|c| c.strip_suffix('`'))
        .filter(|c| !c.contains('`'))
        .unwrap_or(c);
    (c != "—" && !c.is_empty()).then_some(c)
}

/// Parses the table that follows the [`MARKER`] line of `markdown`: a
/// header row, a separator row, then one row per family, to the first
/// line that is not a table row. Each row has seven cells: family, kind,
/// unit, dimension, and the module's, the eBPF writer's and the
/// exporter's sources.
pub fn parse(markdown: &str) -> Result<Vec<Row<'_>>, String> {
    let mut lines = markdown
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(MARKER));
    if lines.next().is_none() {
        return Err(format!("no {MARKER} line"));
    }
    let mut rows = Vec::new();
    for (i, line) in lines
        .map(str::trim)
        .take_while(|l| l.starts_with('|'))
        .enumerate()
        .skip(2)
    {
        let cells: Vec<&str> = line
            .strip_prefix('|')
            .and_then(|l| l.strip_suffix('|'))
            .ok_or_else(|| format!("table line {}: not a row: {line}", i + 1))?
            .split('|')
            .collect();
        let [name, kind, unit, dimension, kernel, bpf, user] = cells[..] else {
            return Err(format!(
                "table line {}: {} cells, not 7: {line}",
                i + 1,
                cells.len()
            ));
        };
        let (Some(name), Some(kind), Some(unit)) = (cell(name), cell(kind), cell(unit)) else {
            return Err(format!(
                "table line {}: no name, kind or unit: {line}",
                i + 1
            ));
        };
        rows.push(Row {
            name,
            kind,
            unit,
            dimension: cell(dimension),
            kernel_source: cell(kernel),
            bpf_source: cell(bpf),
            userspace_source: cell(user),
        });
    }
    if rows.is_empty() {
        return Err("the table has no rows".into());
    }
    Ok(rows)
}

/// The rows of `docs/families.md`. Panics if its table cannot be parsed: a
/// test of this crate parses it, so a build that ships has a table.
pub fn rows() -> Vec<Row<'static>> {
    parse(README).expect("the families table of docs/families.md")
}

/// The row of `family` among `rows`: its own, or its pattern's.
pub fn find<'r, 'a>(rows: &'r [Row<'a>], family: &str) -> Option<&'r Row<'a>> {
    rows.iter()
        .find(|r| r.prefix().is_none() && r.matches(family))
        .or_else(|| rows.iter().find(|r| r.matches(family)))
}

/// What in `rows` disagrees with the definition ([`crate::table`]): each
/// family there has a row of its own with its kind, unit and dimension,
/// and a source in exactly the writers' columns of the writers that
/// publish it; no other row names a kernel or eBPF source. Empty when
/// they agree.
pub fn check(rows: &[Row<'_>]) -> Vec<String> {
    let mut bad = Vec::new();
    for f in FAMILIES {
        let Some(r) = rows
            .iter()
            .find(|r| r.prefix().is_none() && r.name == f.name)
        else {
            bad.push(format!("{}: no row of its own", f.name));
            continue;
        };
        if r.kind_of(f.name) != Some(f.kind) {
            bad.push(format!(
                "{}: kind {:?}, defined {:?}",
                f.name,
                r.kind,
                f.kind.as_str()
            ));
        }
        if r.unit_of(f.name) != Some(f.unit) {
            bad.push(format!(
                "{}: unit {:?}, defined {:?}",
                f.name, r.unit, f.unit
            ));
        }
        if r.dimension.unwrap_or("") != f.dimension {
            bad.push(format!(
                "{}: dimension {:?}, defined {:?}",
                f.name, r.dimension, f.dimension
            ));
        }
        for (w, column, cell) in [
            (Writer::Module, "kernel source", r.kernel_source),
            (Writer::Bpf, "eBPF writer", r.bpf_source),
            (Writer::Exportd, "userspace source", r.userspace_source),
        ] {
            if cell.is_some() != f.published_by(w) {
                bad.push(format!(
                    "{}: {column} {:?}, but the definition says {}published by {w:?}",
                    f.name,
                    cell.unwrap_or("—"),
                    if f.published_by(w) { "" } else { "not " }
                ));
            }
        }
    }
    for r in rows {
        let defined = FAMILIES
            .iter()
            .any(|f| r.matches(f.name) && r.prefix().is_none());
        if !defined && (r.kernel_source.is_some() || r.bpf_source.is_some()) {
            bad.push(format!(
                "{}: a kernel or eBPF source, but not in the definition (kmod/families/src/table.rs)",
                r.name
            ));
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_table_parses_and_every_unit_and_kind_maps() {
        let rows = rows();
        assert!(rows.len() >= 40, "{}", rows.len());
        for r in &rows {
            let probe = r.prefix().map_or(r.name.to_string(), |p| format!("{p}x"));
            assert!(r.kind_of(&probe).is_some(), "{r:?}");
            assert!(r.unit_of(&probe).is_some(), "{r:?}");
            if r.prefix().is_none() {
                perfabi::name::check_family_name(r.name).unwrap_or_else(|e| panic!("{r:?}: {e}"));
            }
            if let Some(d) = r.dimension {
                perfabi::name::check_dimension(d).unwrap_or_else(|e| panic!("{r:?}: {e}"));
            }
        }
        let rd = find(&rows, "disk.dev.read").unwrap();
        assert_eq!(rd.dimension, Some("device"));
        assert!(rd.kernel_source.unwrap().contains("block_rq_complete"));
        assert!(rd.userspace_source.unwrap().contains("field 4"));
        let lat = find(&rows, "disk.dev.request_latency").unwrap();
        assert_eq!(
            (lat.kind_of(lat.name), lat.userspace_source),
            (Some(Kind::Histogram), None)
        );
        let ctxt = find(&rows, "kernel.all.pswitch").unwrap();
        assert_eq!(ctxt.dimension, None);
        let vm = find(&rows, "mem.vmstat.nr_dirty").unwrap();
        assert_eq!(vm.unit_of("mem.vmstat.nr_dirty"), Some(Unit::PAGES));
        assert_eq!(vm.kind_of("mem.vmstat.pgfault"), Some(Kind::Counter));
        assert!(find(&rows, "mem.vmstat").is_none());
        assert!(find(&rows, "no.such").is_none());
    }

    #[test]
    fn the_readme_table_is_the_definition() {
        let bad = check(&rows());
        assert!(
            bad.is_empty(),
            "docs/families.md's families table: {bad:#?}"
        );
        // The prose under the table states the histograms' buckets.
        let h = crate::table::HIST_NS;
        let prose = format!("Histograms have {} log2 buckets of nanoseconds", h.n);
        assert!(README.contains(&prose), "docs/families.md: no \"{prose}\"");
        assert!(README.contains(&format!("(2^{})", h.first)));
    }

    #[test]
    fn a_table_that_disagrees_with_the_definition_is_reported() {
        let text = |edit: &dyn Fn(&str) -> String| edit(README);
        let rows_of = |t: &str| parse(t).map(|r| check(&r)).unwrap();
        let unit = text(&|r| {
            r.replacen(
                "| `disk.dev.read_bytes` | counter | bytes |",
                "| `disk.dev.read_bytes` | counter | count |",
                1,
            )
        });
        let bad = rows_of(&unit);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].starts_with("disk.dev.read_bytes: unit"), "{bad:?}");
        let gone = text(&|r| {
            let at = r.find("| `kernel.sched.migrations` |").unwrap();
            let end = at + r[at..].find('\n').unwrap() + 1;
            format!("{}{}", &r[..at], &r[end..])
        });
        assert_eq!(
            rows_of(&gone),
            ["kernel.sched.migrations: no row of its own"]
        );
        let bpf = text(&|r| {
            let at = r
                .find("| `kernel.softirqs` | counter | count | kind | — | — |")
                .unwrap();
            format!(
                "{}| `kernel.softirqs` | counter | count | kind | — | `irq:softirq_entry` |{}",
                &r[..at],
                &r[at + "| `kernel.softirqs` | counter | count | kind | — | — |".len()..]
            )
        });
        let bad = rows_of(&bpf);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(
            bad[0].starts_with("kernel.softirqs: a kernel or eBPF source"),
            "{bad:?}"
        );
    }

    #[test]
    fn malformed_tables_are_refused() {
        assert!(parse("no table").is_err());
        assert!(parse("<!-- families-table -->\n| a | b |\n|---|---|\n").is_err());
        let short = "<!-- families-table -->\n|h|\n|-|\n| `a` | counter | count |\n";
        assert!(parse(short).unwrap_err().contains("3 cells"));
        let ok = "<!-- families-table -->\n|h|\n|-|\n| `a.b` | gauge | KiB | — | — | — | `/proc/x` |\ntext\n| `c` | counter | count | — | — | — | — |\n";
        let rows = parse(ok).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].userspace_source, Some("/proc/x"));
        assert_eq!(rows[0].unit_of("a.b"), Some(Unit::KIB));
    }
}
