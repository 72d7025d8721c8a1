//! The agent's own `Install` and `Remove` (PCP's pmdaproc.sh machinery)
//! against a pmcd with PCP's standard layout, in a private copy of the
//! machine's PCP configuration tree (a private `PCP_CONF`), inside private
//! PID and network namespaces: `pcp-agent/test/install-private-tree` does
//! the work and fails on any error line of Install, `pminfo -f perfabi`,
//! `pmval` and Remove, and on any change to the machine's own PCP files.
//!
//! The second test is its negative variant: the same run with `Install`
//! left to compile the help file (its `help_source` line removed, as before
//! the fix) must fail on newhelp's two error lines.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{exportd, AGENT};

/// The project's test convention (tests/harness `need_root`): without root
/// the test prints `PERFABI-SKIP <test>: <reason>`, which `tests/run`
/// counts as a failure unless expected; under CI (`CI` set) it fails.
fn need_root(test: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    let reason = "needs root (PCP's Install, PID and network namespaces)";
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} {reason}, and CI runs as root"
    );
    println!("PERFABI-SKIP {test}: {reason}");
    false
}

/// Runs the script on the pmda folder `pmda_dir`.
fn install_private_tree(pmda_dir: &Path) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("test/install-private-tree");
    Command::new(&script)
        .arg(AGENT)
        .arg(exportd())
        .env("PERFABI_PMDA_DIR", pmda_dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn install_pminfo_pmval_remove_in_a_private_pcp_tree_print_no_error_line() {
    if !need_root("install_pminfo_pmval_remove_in_a_private_pcp_tree_print_no_error_line") {
        return;
    }
    let pmda = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmda");
    let out = install_private_tree(&pmda);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    println!("{stdout}");
    assert!(
        out.status.success(),
        "install-private-tree failed ({}):\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("\nPCP-INSTALL PASS: "),
        "no PASS line:\n{stderr}"
    );
}

#[test]
fn install_compiling_the_help_file_is_caught_by_its_error_lines() {
    if !need_root("install_compiling_the_help_file_is_caught_by_its_error_lines") {
        return;
    }
    // The shipped folder, with Install's help_source line taken out: the
    // pmdaproc.sh default ("help") applies again, as before the fix.
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmda");
    for e in std::fs::read_dir(&shipped).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    let install = std::fs::read_to_string(shipped.join("Install")).unwrap();
    let without: String = install
        .lines()
        .filter(|l| !l.starts_with("help_source="))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        install.lines().count(),
        without.lines().count() + 1,
        "Install has one help_source= line"
    );
    std::fs::write(dir.path().join("Install"), without).unwrap();

    let out = install_private_tree(dir.path());
    let stdout = text(&out.stdout);
    // The error-line section only (the rest is the whole run's output).
    let caught: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("    Install: ") || l.starts_with("    Remove: "))
        .collect();
    println!("caught:\n{}", caught.join("\n"));
    assert!(!out.status.success(), "the run passed:\n{stdout}");
    assert!(
        caught.contains(&"    Install: Error Parsing ASCII PMNS: Cannot open \"root\"")
            && caught
                .iter()
                .any(|l| l.starts_with("    Install: newhelp: pmLoadASCIINameSpace(root, 1): ")),
        "newhelp's two error lines were not what failed the run:\n{stdout}"
    );
    assert!(
        stdout.contains("machine's PCP files: unchanged"),
        "the machine's PCP files were not shown unchanged:\n{stdout}"
    );
}
