//! Compiles the BPF programs (CO-RE) with clang and generates their
//! libbpf-rs skeletons into `OUT_DIR`: the writer's (`src/bpf/perfabi.bpf.c`,
//! `perfabi.skel.rs`), and the floor the cost bench measures it against
//! (`src/bpf/floor.bpf.c`, `floor.skel.rs`, used by `bench/cost` only).
//!
//! The compiler is `$CLANG` if set, else `clang-19` if it is on the PATH
//! (Debian 12's package, installed by `tests/setup`), else `clang`. `-mcpu=v3`
//! for the BPF atomics with a fetched result (fully ordered: see the
//! program's header comment).

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// The BPF objects: (source, skeleton and object name in `OUT_DIR`).
const OBJECTS: [(&str, &str); 2] = [
    ("src/bpf/perfabi.bpf.c", "perfabi"),
    ("src/bpf/floor.bpf.c", "floor"),
];

fn clang() -> PathBuf {
    if let Some(c) = env::var_os("CLANG") {
        return c.into();
    }
    let on_path = |name: &str| {
        env::var_os("PATH")
            .map(|p| env::split_paths(&p).any(|d| d.join(name).is_file()))
            .unwrap_or(false)
    };
    if on_path("clang-19") {
        "clang-19".into()
    } else {
        "clang".into()
    }
}

/// Compiles `src` into `OUT_DIR/<name>.bpf.o` and its skeleton
/// `OUT_DIR/<name>.skel.rs`.
fn build(out: &Path, src: &str, name: &str) {
    let skel = out.join(format!("{name}.skel.rs"));
    let obj = out.join(format!("{name}.bpf.o"));
    if let Err(e) = SkeletonBuilder::new()
        .source(src)
        .obj(&obj)
        .clang(clang())
        .clang_args([
            "-O2",
            "-g",
            "-mcpu=v3",
            "-Wall",
            "-Werror",
            "-Isrc/bpf",
            "-I../include",
        ])
        .build_and_generate(&skel)
    {
        panic!(
            "cannot build {src} (clang 19 and the kernel's libbpf headers are needed; \
             tests/setup installs clang-19): {e:#}"
        );
    }
}

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (src, name) in OBJECTS {
        build(&out, src, name);
    }
    // The folder: every program and header in it, those added later too.
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=../include/perfabi_families.h");
    println!("cargo:rerun-if-env-changed=CLANG");
}
