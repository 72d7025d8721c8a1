//! Compiles the BPF programs (`src/bpf/perfabi.bpf.c`, CO-RE) with clang and
//! generates their libbpf-rs skeleton into `OUT_DIR`.
//!
//! The compiler is `$CLANG` if set, else `clang-19` if it is on the PATH
//! (Debian 12's package, installed by `tests/setup`), else `clang`. `-mcpu=v3`
//! for the BPF atomics with a fetched result (fully ordered: see the
//! program's header comment).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/perfabi.bpf.c";

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

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let skel = out.join("perfabi.skel.rs");
    let obj = out.join("perfabi.bpf.o");
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
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
            "cannot build {SRC} (clang 19 and the kernel's libbpf headers are needed; \
             tests/setup installs clang-19): {e:#}"
        );
    }
    // The folder: the object's headers (seg.bpf.h, ...) are its parts.
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=../include/perfabi_families.h");
    println!("cargo:rerun-if-env-changed=CLANG");
}
