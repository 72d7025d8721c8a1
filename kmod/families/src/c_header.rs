//! The C header generated from [`crate::table`]:
//! `kmod/include/perfabi_families.h`.
//!
//! It is checked in, not generated at build time, so that the kernel
//! module builds with nothing but Kbuild (a DKMS or distribution build of
//! the module has no Rust toolchain), and the eBPF programs with nothing
//! but clang; `perfabi-families --check` (in `tests/run`) and this
//! crate's tests fail when it is not [`header`]'s text.
//!
//! The header is plain C, no type of its own and nothing kernel-only:
//! an enum of family indices, each subsystem's first and last index, the
//! writers' bits, and `PERFABI_FAMILIES(X)`, an X-macro that calls `X`
//! once per family with its descriptor (name, help, dimension, kind,
//! unit, bucket layout, writers), for the includer to build its own table
//! from. Kinds, units and bucket layouts are `perfabi.h`'s macros.

use std::fmt::Write as _;

use perfabi::{Kind, Unit};

use crate::table::{Family, Group, Writer, FAMILIES, HIST_NS};

/// The header's path, from the repository's root.
pub const PATH: &str = "kmod/include/perfabi_families.h";

/// `perfabi.h`'s name of a kind.
fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Counter => "PERFABI_KIND_COUNTER",
        Kind::Gauge => "PERFABI_KIND_GAUGE",
        Kind::Peak => "PERFABI_KIND_PEAK",
        Kind::Histogram => "PERFABI_KIND_HISTOGRAM",
    }
}

/// `perfabi.h`'s name of a unit (its `PERFABI_UNIT_*` macros).
fn unit(u: Unit) -> Result<&'static str, String> {
    [
        (Unit::NONE, "PERFABI_UNIT_NONE"),
        (Unit::BYTES, "PERFABI_UNIT_BYTES"),
        (Unit::KIB, "PERFABI_UNIT_KIB"),
        (Unit::NS, "PERFABI_UNIT_NS"),
        (Unit::US, "PERFABI_UNIT_US"),
        (Unit::MS, "PERFABI_UNIT_MS"),
        (Unit::SECONDS, "PERFABI_UNIT_SECONDS"),
        (Unit::COUNT, "PERFABI_UNIT_COUNT"),
        (Unit::PAGES, "PERFABI_UNIT_PAGES"),
        (Unit::RATIO, "PERFABI_UNIT_RATIO"),
        (Unit::BYTES_PER_SECOND, "PERFABI_UNIT_BYTES_PER_SECOND"),
    ]
    .into_iter()
    .find(|&(v, _)| v == u)
    .map(|(_, n)| n)
    .ok_or_else(|| format!("unit {u:?} has no PERFABI_UNIT_* macro in perfabi.h"))
}

/// A C string literal of printable ASCII text.
fn string(s: &str) -> Result<String, String> {
    if !s.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return Err(format!("{s:?}: not printable ASCII"));
    }
    Ok(format!(
        "\"{}\"",
        s.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

/// The writers' mask of `f`, as C.
fn writers(f: &Family) -> String {
    Writer::ALL
        .iter()
        .filter(|w| f.published_by(**w))
        .map(|w| format!("PERFABI_FAM_BY_{}", w.c_name()))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The header's text, or what in the table cannot be written as C.
pub fn header() -> Result<String, String> {
    let mut h = String::new();
    h.push_str(
        "/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * perfabi_families.h - the families the kernel-side writers publish
 * (README.md, \"Families out of the box\"): their indices, subsystems and
 * descriptors, for the kernel module and the eBPF programs alike.
 *
 * GENERATED from kmod/families/src/table.rs by
 * `cargo run -p perfabi-families -- --write`: do not edit. tests/run fails
 * when it is not current (perfabi-families --check).
 *
 * Plain C: an enum and macros, no type and nothing kernel-only. The
 * descriptors use perfabi.h's PERFABI_KIND_*, PERFABI_UNIT_* and
 * PERFABI_BUCKETS_*: include perfabi.h (spec/) before expanding them.
 */
#ifndef _PERFABI_FAMILIES_H
#define _PERFABI_FAMILIES_H

",
    );
    let _ = write!(
        h,
        "/* Histograms: log2 buckets of ns, bucket k up to 2^({first} + k), the last +Inf. */
#define PERFABI_FAM_HIST_BUCKETS\t{n}
#define PERFABI_FAM_HIST_LOG2_FIRST\t{first}

/* The writers: bits of PERFABI_FAMILIES()'s @writers. */
#define PERFABI_FAM_BY_MODULE\t0x{:x}\t/* perfabi_sources.ko */
#define PERFABI_FAM_BY_BPF\t0x{:x}\t/* the eBPF writer */
#define PERFABI_FAM_BY_EXPORTD\t0x{:x}\t/* perfabi-exportd, from /proc */

/* The families' indices, each subsystem's consecutive. */
enum perfabi_fam {{
",
        Writer::Module.bit(),
        Writer::Bpf.bit(),
        Writer::Exportd.bit(),
        first = HIST_NS.first,
        n = HIST_NS.n,
    );
    for f in FAMILIES {
        let _ = writeln!(h, "\tPERFABI_FAM_{},\t/* {} */", f.id, f.name);
    }
    h.push_str("\tPERFABI_FAM_MAX\t/* non-ABI: the number of families */\n};\n\n");
    h.push_str("/* Each subsystem's first and last family (inclusive). */\n");
    for g in Group::ALL {
        let of: Vec<_> = FAMILIES.iter().filter(|f| f.group == g).collect();
        let (Some(first), Some(last)) = (of.first(), of.last()) else {
            return Err(format!("group {g:?} has no family"));
        };
        let _ = writeln!(
            h,
            "#define PERFABI_FAM_{}_FIRST\tPERFABI_FAM_{}",
            g.c_name(),
            first.id
        );
        let _ = writeln!(
            h,
            "#define PERFABI_FAM_{}_LAST\tPERFABI_FAM_{}",
            g.c_name(),
            last.id
        );
    }
    h.push_str(
        "
/*
 * An instance's run of value words, for a writer that keeps one run per
 * instance (the eBPF writer): its subsystem's families in index order, each
 * family's words consecutive (a counter 1, a histogram 2 + its buckets).
 * PERFABI_FAM_<id>_AT is where family id's words start in the run,
 * PERFABI_FAM_<subsystem>_WORDS the run's length.
 */
",
    );
    for f in FAMILIES {
        let _ = writeln!(h, "#define PERFABI_FAM_{}_AT\t{}", f.id, f.at());
    }
    for g in Group::ALL {
        let _ = writeln!(h, "#define PERFABI_FAM_{}_WORDS\t{}", g.c_name(), g.words());
    }
    h.push_str(
        "
/*
 * PERFABI_FAMILIES(X) calls X(id, name, help, dimension, kind, unit,
 * bucket_layout, nr_buckets, log2_first, writers) once per family, in
 * index order:
 *	id: the index's suffix (PERFABI_FAM_##id)
 *	name, help: string literals
 *	dimension: a string literal, \"\" for a family of one instance
 *	kind, unit: PERFABI_KIND_*, PERFABI_UNIT_*
 *	bucket_layout, nr_buckets, log2_first: a histogram's
 *		(PERFABI_BUCKETS_LOG2), else PERFABI_BUCKETS_NONE, 0, 0
 *	writers: PERFABI_FAM_BY_* bits
 */
#define PERFABI_FAMILIES(X) \\
",
    );
    for (i, f) in FAMILIES.iter().enumerate() {
        let (layout, nb, l2) = match f.buckets {
            Some(b) => ("PERFABI_BUCKETS_LOG2", b.n, b.first),
            None => ("PERFABI_BUCKETS_NONE", 0, 0),
        };
        let end = if i + 1 == FAMILIES.len() { "" } else { " \\" };
        let _ = write!(
            h,
            "\tX({}, {}, {}, {}, \\\n\t  {}, {}, {}, {}, {}, \\\n\t  {}){end}\n",
            f.id,
            string(f.name)?,
            string(f.help)?,
            string(f.dimension)?,
            kind(f.kind),
            unit(f.unit)?,
            layout,
            nb,
            l2,
            writers(f),
        );
    }
    h.push_str("\n#endif /* _PERFABI_FAMILIES_H */\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in header, as the kernel module and the eBPF programs
    /// include it.
    const CHECKED_IN: &str = include_str!("../../include/perfabi_families.h");

    #[test]
    fn the_checked_in_header_is_current() {
        assert!(
            header().unwrap() == CHECKED_IN,
            "{PATH} is not current: run `cargo run -p perfabi-families -- --write`"
        );
    }

    #[test]
    fn every_family_is_in_the_enum_and_the_x_macro_in_order() {
        let h = header().unwrap();
        let mut at = 0;
        for f in FAMILIES {
            let x = format!("\tX({}, \"{}\",", f.id, f.name);
            at += h[at..]
                .find(&x)
                .unwrap_or_else(|| panic!("{x} missing or out of order"));
        }
        assert!(h.contains("#define PERFABI_FAM_SCHED_LAST\tPERFABI_FAM_SCHED_LATENCY\n"));
        assert!(h.contains("\tPERFABI_FAM_DISK_READ,\t/* disk.dev.read */\n"));
        assert!(h.contains("PERFABI_UNIT_NS, PERFABI_BUCKETS_LOG2, 24, 10"));
    }

    #[test]
    fn text_c_cannot_hold_is_refused() {
        assert_eq!(string("a \"b\" \\").unwrap(), "\"a \\\"b\\\" \\\\\"");
        assert!(string("tab\there").is_err());
        assert!(unit(Unit::new(1, 1, 0, 0, 0, 0, 0)).is_err());
    }
}
