//! The writers of other languages, as their users get them, for the tests
//! that run C and Python programs against perfabi-prometheus:
//! libperfabi built and installed by its Makefile into a private prefix
//! (`make`, then `make install PREFIX=…`: `perfabi.pc` for pkg-config, the
//! soname `libperfabi.so.0`), and the Python package `perfabi` with its
//! extension built as maturin builds it (a cdylib with pyo3's
//! `extension-module`), beside the package's Python files, for
//! `PYTHONPATH`.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use perfabi_test_harness::readme::repo_root;
use perfabi_test_harness::{run_limited, workspace};

/// Whether `cc`, `pkg-config`, `make` and `python3` are here; else a skip
/// of `test` (a failure under CI, where tests/setup installs them).
pub fn tools(test: &str) -> bool {
    for tool in ["cc", "pkg-config", "make", "python3"] {
        let ok = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let reason = format!("{tool} is missing (tests/setup installs it)");
            assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
            perfabi_test_harness::skip(test, &reason);
            return false;
        }
    }
    true
}

/// `cargo ARGS` in the running test's profile and target folder.
fn cargo(args: &[&str]) {
    let profile = workspace::profile_dir();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(args)
        .arg("-q")
        .env("CARGO_TARGET_DIR", workspace::target_dir());
    match profile.file_name().and_then(|d| d.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let st = cmd.status().expect("cargo runs");
    assert!(st.success(), "cargo {args:?}");
}

/// `make -C reader/capi ARGS` (its Cargo build in the test's target
/// folder), which must succeed.
fn make(args: &[&str]) {
    let f = run_limited(
        Command::new("make")
            .arg("-C")
            .arg(repo_root().join("reader/capi"))
            .args(args)
            .env("CARGO_TARGET_DIR", workspace::target_dir()),
        Duration::from_secs(900),
    );
    assert_eq!(
        f.code(),
        Some(0),
        "make {args:?}:\n{}\n{}",
        f.stdout,
        f.stderr
    );
}

/// libperfabi installed into `prefix` as its README says (`make`, then
/// `make install PREFIX=prefix`); `PKG_CONFIG_PATH` for it.
pub fn install_libperfabi(prefix: &Path) -> PathBuf {
    make(&[]);
    make(&["install", &format!("PREFIX={}", prefix.display())]);
    prefix.join("lib/pkgconfig")
}

/// `cc source $(pkg-config --cflags --libs perfabi) -o out`, against the
/// prefix `install_libperfabi` gave `pkg_config_path` for, with its
/// library folder as the program's run path.
pub fn compile_c(source: &Path, pkg_config_path: &Path, out: &Path) {
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "perfabi"])
        .env("PKG_CONFIG_PATH", pkg_config_path)
        .output()
        .unwrap();
    assert!(flags.status.success(), "pkg-config perfabi");
    let flags = String::from_utf8(flags.stdout).unwrap();
    let lib = pkg_config_path.parent().unwrap();
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(source)
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc {}: {}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The package `perfabi` (its Python files and the extension
/// `perfabi._perfabi`) under `dir`, built as maturin builds it
/// (pyproject.toml: pyo3's `extension-module`); `dir` is the folder for
/// `PYTHONPATH`.
pub fn python_package(dir: &Path) -> PathBuf {
    cargo(&[
        "rustc",
        "-p",
        "perfabi-python",
        "--lib",
        "--crate-type",
        "cdylib",
        "--features",
        "pyo3/extension-module",
    ]);
    let pkg = dir.join("perfabi");
    std::fs::create_dir_all(&pkg).unwrap();
    for e in std::fs::read_dir(repo_root().join("reader/python/python/perfabi")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "py") {
            std::fs::copy(&p, pkg.join(p.file_name().unwrap())).unwrap();
        }
    }
    std::fs::copy(
        workspace::profile_dir().join("lib_perfabi.so"),
        pkg.join("_perfabi.abi3.so"),
    )
    .unwrap();
    dir.to_path_buf()
}
