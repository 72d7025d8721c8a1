//! Python for the tests that check perfabi's pages with other projects'
//! parsers (`prometheus_client`'s OpenMetrics and text parsers): running a
//! script on an input, and finding the interpreters that have the parser.

use std::process::{Command, Stdio};

/// Runs the Python program `script` under `python` with `input` on its
/// standard input.
pub fn python_with(python: &str, script: &str, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut py = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (apt-get install python3)");
    py.stdin.take().unwrap().write_all(input).unwrap();
    py.wait_with_output().unwrap()
}

/// The Python interpreters that have `prometheus_client`'s OpenMetrics
/// parser: `python3` on the path and the system's `/usr/bin/python3` (often
/// another version of the module: Debian 12's is 0.16, pip's newer), each
/// once. Under CI (`CI` set) having none fails the test; elsewhere it is
/// reported as a skip (`PERFABI-SKIP <test>: …`) and the list is empty.
pub fn openmetrics_parsers(test: &str) -> Vec<String> {
    let found = find_openmetrics_parsers();
    if found.is_empty() {
        let reason =
            "no python3 with prometheus_client (apt-get install python3-prometheus-client)";
        assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
        println!("PERFABI-SKIP {test}: {reason}");
    }
    found
}

/// The interpreters of [`openmetrics_parsers`], with no verdict.
pub fn find_openmetrics_parsers() -> Vec<String> {
    let mut found: Vec<(String, String)> = Vec::new();
    for py in ["python3", "/usr/bin/python3"] {
        let out = Command::new(py)
            .args([
                "-c",
                "import sys, importlib.metadata as m\n\
                 import prometheus_client.openmetrics.parser\n\
                 print(sys.executable, m.version('prometheus_client'))",
            ])
            .output();
        let Ok(out) = out else { continue };
        if !out.status.success() {
            continue;
        }
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if found.iter().all(|(_, other)| *other != id) {
            found.push((py.to_string(), id));
        }
    }
    for (_, id) in &found {
        println!("OpenMetrics parser: {id}");
    }
    found.into_iter().map(|(py, _)| py).collect()
}
