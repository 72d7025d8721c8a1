//! The generated header as C compilers take it: compiled strictly with
//! `perfabi.h` into a descriptor table (as the kernel module builds its
//! own), run, and compared with the Rust table field by field; and
//! compiled for the BPF target on its own, as the eBPF programs include it.

use std::path::{Path, PathBuf};
use std::process::Command;

use perfabi_families::table::{Group, Writer, FAMILIES};

fn dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The C program: every family's descriptor, placed at its enum index,
/// printed one line each, then each group's first and last index.
const PROGRAM: &str = r#"
#include <stdio.h>
#include "perfabi.h"
#include "perfabi_families.h"

struct fam {
	const char *id, *name, *help, *dimension;
	unsigned int kind;
	struct perfabi_unit unit;
	unsigned int layout, nr_buckets, log2_first, writers;
};

#define DESC(id, n, h, d, k, u, l, nb, l2, w) \
	[PERFABI_FAM_##id] = { #id, n, h, d, k, u, l, nb, l2, w },
static const struct fam fams[PERFABI_FAM_MAX] = { PERFABI_FAMILIES(DESC) };

int main(void)
{
	unsigned int i;

	for (i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		const struct fam *f = &fams[i];
		const struct perfabi_unit *u = &f->unit;

		printf("%s|%s|%s|%s|%u|%d %d %d %u %u %d %u|%u %u %u|%u\n", f->id, f->name,
		       f->help, f->dimension, f->kind, u->dim_space, u->dim_time, u->dim_count,
		       u->scale_space, u->scale_time, u->scale_count, u->quantity, f->layout,
		       f->nr_buckets, f->log2_first, f->writers);
	}
	printf("groups %d %d %d %d %d %d %d %d\n", PERFABI_FAM_BLOCK_FIRST, PERFABI_FAM_BLOCK_LAST,
	       PERFABI_FAM_NET_FIRST, PERFABI_FAM_NET_LAST, PERFABI_FAM_IRQ_FIRST,
	       PERFABI_FAM_IRQ_LAST, PERFABI_FAM_SCHED_FIRST, PERFABI_FAM_SCHED_LAST);
	printf("hist %d %d\n", PERFABI_FAM_HIST_BUCKETS, PERFABI_FAM_HIST_LOG2_FIRST);
	return 0;
}
"#;

/// What the program must print: the Rust table, in the same format.
fn expected() -> String {
    let mut s = String::new();
    for f in FAMILIES {
        let u = f.unit;
        let (layout, nb, l2) = f.buckets.map_or((0, 0, 0), |b| (1, b.n, b.first));
        let writers: u32 = Writer::ALL
            .iter()
            .filter(|w| f.published_by(**w))
            .map(|w| w.bit())
            .sum();
        s += &format!(
            "{}|{}|{}|{}|{}|{} {} {} {} {} {} {}|{layout} {nb} {l2}|{writers}\n",
            f.id,
            f.name,
            f.help,
            f.dimension,
            f.kind as u32,
            u.dim_space,
            u.dim_time,
            u.dim_count,
            u.scale_space,
            u.scale_time,
            u.scale_count,
            u.quantity
        );
    }
    s += "groups";
    for g in Group::ALL {
        let first = FAMILIES.iter().position(|f| f.group == g).unwrap();
        let last = FAMILIES.iter().rposition(|f| f.group == g).unwrap();
        s += &format!(" {first} {last}");
    }
    let h = perfabi_families::table::HIST_NS;
    s += &format!("\nhist {} {}\n", h.n, h.first);
    s
}

#[test]
fn the_header_compiles_into_the_rust_tables_descriptors() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("families.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = tmp.path().join("families");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(dir("../../spec"))
        .arg("-I")
        .arg(dir("../include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("C compiler `{cc}` not runnable ({e}); install gcc"));
    assert!(
        out.status.success(),
        "perfabi_families.h does not compile:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success(), "{run:?}");
    let printed = String::from_utf8(run.stdout).unwrap();
    let want = expected();
    for (c, r) in printed.lines().zip(want.lines()) {
        assert_eq!(c, r, "C (left) and the Rust table (right) differ");
    }
    assert_eq!(printed.lines().count(), want.lines().count());
}

/// The header on its own, for the BPF target (clang), as a CO-RE program
/// includes it beside vmlinux.h: no type, no kernel header needed.
#[test]
fn the_header_compiles_for_bpf_without_any_other_header() {
    let Some(clang) = ["clang-19", "clang"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
    else {
        println!(
            "PERFABI-SKIP the_header_compiles_for_bpf_without_any_other_header: no clang (apt-get install clang-19)"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("fam.bpf.c");
    std::fs::write(
        &src,
        r#"#include "perfabi_families.h"
#define ID(id, n, h, d, k, u, l, nb, l2, w) PERFABI_FAM_##id,
static const int order[] = { PERFABI_FAMILIES(ID) };
_Static_assert(sizeof(order) / sizeof(order[0]) == PERFABI_FAM_MAX, "every family");
_Static_assert(PERFABI_FAM_HIST_BUCKETS > 1, "buckets");
int first_sched(void) { return order[PERFABI_FAM_SCHED_FIRST]; }
"#,
    )
    .unwrap();
    let out = Command::new(clang)
        .args(["-target", "bpf", "-O2", "-Wall", "-Werror", "-c", "-I"])
        .arg(dir("../include"))
        .arg(&src)
        .arg("-o")
        .arg(tmp.path().join("fam.bpf.o"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perfabi_families.h does not compile for BPF:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
