//! The segment-directory vectors of `spec/PERFABI.md` §15.6: directories
//! made of committed segment vectors under §15.2 names, with entries a
//! reader must not list, and their merged reading.
//!
//! Shared by `examples/make_dir_vectors.rs` (which writes them) and
//! `tests/spec_oracle_directory.rs` (which checks them).
#![allow(dead_code)]

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use perfabi_reader::directory::{Directory, DirectoryOptions, Scrape};
use perfabi_reader::Reading;

/// `(directory, [(file name, source vector or None for junk bytes)])`.
pub type DirVector = (
    &'static str,
    &'static [(&'static str, Option<&'static str>)],
);

/// Every directory vector.
pub const ALL: &[DirVector] = &[
    (
        "dir_merge",
        &[
            // Two copies of one valid 1.1 segment: every counter doubles.
            ("a.1.0000000000000001.perfabi", Some("family_every_kind")),
            ("b.2.0000000000000002.perfabi", Some("family_every_kind")),
            // The same families, but its gauge declares MAX. Every writer is
            // dead and all started at the same time, so the first file, a's,
            // is the reference (§15.4): c's gauge is left out, named as a
            // problem, and the rest merges thrice.
            (
                "c.3.0000000000000003.perfabi",
                Some("family_gauge_mode_max_is_valid"),
            ),
            // A segment refused on its own (an undefined kind).
            ("d.4.0000000000000004.perfabi", Some("family_bad_kind")),
            // A 1.0 segment: its entries are families of one instance.
            ("e.5.0000000000000005.perfabi", Some("valid_basic")),
            // Not segments: never opened.
            ("notes.txt", None),
            (".a.1.0000000000000001.perfabi.7.00000000000000aa.tmp", None),
            ("A.1.0000000000000001.perfabi.old", None),
            ("f.6.00000000000000FF.perfabi", None),
            ("g.07.00000000000000ff.perfabi", None),
        ],
    ),
    // A rolling upgrade (§15.4): version 1's writer, then version 2's,
    // started later (the reference of every family): the counter family
    // whose help version 2 reworded merges under the new help; the
    // histogram whose buckets it moved is version 2's alone, and version
    // 1's file is named as a problem of that family.
    (
        "dir_upgrade",
        &[
            ("app.1.0000000000000001.perfabi", Some("family_every_kind")),
            (
                "app.2.0000000000000002.perfabi",
                Some("family_upgraded_is_valid"),
            ),
        ],
    ),
    // A kept file (§15.5) that records the start of the writer whose
    // metadata its histogram keeps (3 s), and a dead writer's file
    // started at 2 s whose histogram's buckets differ: the kept family
    // ranks above it (§15.4), so its buckets are shown and the file's
    // counts of it are left out. Its counter families record no start
    // (ranked as started at 0): they take the file's reworded help.
    (
        "dir_kept",
        &[
            (
                "kept.perfabi-kept",
                Some("kept_records_a_reference_is_valid"),
            ),
            (
                "app.2.0000000000000002.perfabi",
                Some("family_upgraded_is_valid"),
            ),
        ],
    ),
    // Three segment files, read with `max_segments` 2 (`LIMITS`): the first
    // two in name order are merged, and the directory reports `limit`.
    (
        "dir_limit",
        &[
            ("a.1.0000000000000001.perfabi", Some("valid_basic")),
            ("a.2.0000000000000002.perfabi", Some("valid_basic")),
            ("b.1.0000000000000003.perfabi", Some("valid_basic")),
        ],
    ),
];

/// The vectors read with a `max_segments` of their own (§15.2).
pub const LIMITS: &[(&str, usize)] = &[("dir_limit", 2)];

/// The `max_segments` the vector `name` is read with.
pub fn max_segments(name: &str) -> usize {
    LIMITS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(DirectoryOptions::default().max_segments, |(_, m)| *m)
}

/// Makes the directory `name` of vector `files` under `out`, from the
/// segment vectors in `vectors`.
pub fn make(vectors: &Path, out: &Path, name: &str, files: &[(&str, Option<&str>)]) {
    let dir = out.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (file, src) in files {
        let bytes = match src {
            Some(v) => std::fs::read(vectors.join(format!("{v}.bin"))).unwrap(),
            None => b"not a segment\n".to_vec(),
        };
        std::fs::write(dir.join(file), bytes).unwrap();
        // Whatever the umask: a reader refuses a file others may write.
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

/// A copy of the committed directory `name` in `out`, with the modes a
/// writer gives its files (a checkout's depend on the umask).
pub fn copy_committed(vectors: &Path, out: &Path, name: &str) -> std::path::PathBuf {
    let dir = out.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for e in std::fs::read_dir(vectors.join(name)).unwrap() {
        let e = e.unwrap();
        let to = dir.join(e.file_name());
        std::fs::copy(e.path(), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    dir
}

/// One reading as the `.expect` shows it.
pub fn show(r: &Reading) -> String {
    match r {
        Reading::Unsigned(v) => v.to_string(),
        Reading::Signed(v) => v.to_string(),
        Reading::Histogram(h) => format!("count={} sum={} buckets={:?}", h.count, h.sum, h.buckets),
    }
}

/// The merged reading of a directory, as its `merged.expect` holds it:
/// files read, each family with its series, then each problem by file
/// name, code and family.
pub fn describe(s: &Scrape) -> String {
    let mut out = String::new();
    writeln!(out, "segments: {}", s.segments).unwrap();
    for f in &s.families {
        let fam = &f.family;
        writeln!(
            out,
            "family {} {} unit={:?} dimension={:?} gauge_mode={} writers={} help={:?}",
            fam.name,
            fam.kind.as_str(),
            fam.unit_text,
            fam.dimension,
            fam.gauge_mode.as_str(),
            f.writers,
            fam.help
        )
        .unwrap();
        for (m, r) in fam.members.iter().zip(&f.readings) {
            writeln!(
                out,
                "  series instance={:?} labels={:?} value={}",
                m.instance,
                m.labels,
                show(r)
            )
            .unwrap();
        }
    }
    for p in &s.problems {
        writeln!(
            out,
            "problem {} {} family={:?}",
            p.file.file_name().unwrap().to_string_lossy(),
            p.code,
            p.family.as_deref().unwrap_or("")
        )
        .unwrap();
    }
    out
}

/// Reads the directory `dir` (named as its vector) as the reference
/// reader does.
pub fn read(dir: &Path) -> Scrape {
    let name = dir.file_name().unwrap().to_string_lossy();
    let opts = DirectoryOptions {
        max_segments: max_segments(&name),
        ..DirectoryOptions::default()
    };
    Directory::open(dir, opts).unwrap().read().unwrap()
}
