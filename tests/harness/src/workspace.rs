//! The workspace's own programs for tests of other packages: found in the
//! build's profile folder (`target/debug`, `target/release`), brought up
//! to date there by Cargo first (a test of one package cannot name another
//! package's binary with `CARGO_BIN_EXE_*`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The profile folder of the running test program (`target/<profile>`,
/// whose `deps/` holds it).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .and_then(Path::parent)
        .expect("a test program lives in target/<profile>/deps")
        .to_path_buf()
}

/// Cargo's target folder of the running test program (where `make` and
/// nested Cargo runs must build, to share its artifacts).
pub fn target_dir() -> PathBuf {
    profile_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .to_path_buf()
}

/// The program `bin` of the workspace's package `package` in
/// `profile_dir`, brought up to date there by Cargo (in that profile; a
/// no-op when it is), or `bin` in `$PERFABI_TEST_BIN_DIR` if that is set
/// (as [`crate::bin`] does; nothing is built then).
pub fn workspace_bin(profile_dir: &Path, package: &str, bin: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("PERFABI_TEST_BIN_DIR") {
        return Path::new(&dir).join(bin);
    }
    let p = profile_dir.join(bin);
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "-q", "-p", package, "--bin", bin]);
    if let Some(target) = profile_dir.parent() {
        cargo.env("CARGO_TARGET_DIR", target);
    }
    match profile_dir.file_name().and_then(|d| d.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cargo.arg("--release");
        }
        Some(other) => {
            cargo.args(["--profile", other]);
        }
    }
    let st = cargo.status().expect("cargo runs");
    assert!(st.success(), "cargo build -p {package} --bin {bin}");
    assert!(p.exists(), "{} missing", p.display());
    p
}

/// `perfabi-cat` (package `perfabi-cat`), built in the running test's
/// profile by [`workspace_bin`] (or taken from `$PERFABI_TEST_BIN_DIR`).
pub fn perfabi_cat() -> PathBuf {
    workspace_bin(&profile_dir(), "perfabi-cat", "perfabi-cat")
}
