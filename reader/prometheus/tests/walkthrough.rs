//! The README's walk-through ("From a program to Prometheus"): a Python
//! program and a C program instrumented as the README shows, one
//! perfabi-prometheus serving the segment directory, and the real
//! Prometheus scraping it with the README's configuration. The script
//! (`reader/prometheus/examples/walkthrough.sh`, verbatim) runs as
//! written, with the installs it follows done as the README says them:
//! libperfabi by its Makefile into a private prefix (`PKG_CONFIG_PATH`,
//! `LD_LIBRARY_PATH`), the Python package built as maturin builds it
//! (`PYTHONPATH` standing for `pip install`), this build's
//! perfabi-prometheus (`BIN`), a private segment directory (`PERFABI_DIR`)
//! and a free loopback port (`LISTEN`).

use std::process::Command;
use std::time::Duration;

use perfabi_test_harness::prometheus::{self, Prometheus};
use perfabi_test_harness::readme::{self, repo_root};
use perfabi_test_harness::{http, run_limited, workspace};

mod common;
#[path = "workers/languages.rs"]
mod languages;

const TEST: &str = "the_readme_walkthrough_puts_a_python_and_a_c_program_in_prometheus";

#[test]
fn the_readme_walkthrough_puts_a_python_and_a_c_program_in_prometheus() {
    let script = readme::example("reader/prometheus/examples/walkthrough.sh");
    if !prometheus::available(TEST) || !languages::tools(TEST) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let pkg_config_path = languages::install_libperfabi(&tmp.path().join("prefix"));
    let python_path = languages::python_package(&tmp.path().join("python"));
    let profile = workspace::profile_dir();
    workspace::workspace_bin(&profile, "perfabi-prometheus", "perfabi-prometheus");
    let dir = tmp.path().join("perfabi-dir");
    let listen = format!("127.0.0.1:{}", http::free_port());
    let out = run_limited(
        Command::new("sh")
            .args(["-c", &script])
            .current_dir(repo_root())
            .env("BIN", &profile)
            .env("LISTEN", &listen)
            .env("PERFABI_DIR", &dir)
            .env("TMPDIR", tmp.path())
            .env("PKG_CONFIG_PATH", &pkg_config_path)
            .env("LD_LIBRARY_PATH", pkg_config_path.parent().unwrap())
            .env("PYTHONPATH", &python_path),
        Duration::from_secs(120),
    );
    println!("WALKTHROUGH {}", out.stdout.replace('\n', " | "));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "{:?}: {}",
        out.status,
        out.stderr
    );
    // The page: the Python program's 20 jobs over its two queues, the C
    // program's 1000 requests.
    let page: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("perfabi_"))
        .collect();
    let jobs: f64 = page
        .iter()
        .filter(|l| l.starts_with("perfabi_jobs_processed_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(jobs, 20.0, "{page:?}");
    assert!(
        page.contains(&"perfabi_myapp_requests_total{code=\"200\"} 1000"),
        "{page:?}"
    );
    // The trap stopped the endpoint.
    assert!(
        std::net::TcpStream::connect(&listen).is_err(),
        "the endpoint outlived the script"
    );

    // Then Prometheus, with the README's configuration, aimed at an
    // endpoint serving the same directory.
    let endpoint = common::start(&dir, &[]);
    let readme = readme::example("reader/prometheus/examples/prometheus.yml");
    let config = readme.replace("'127.0.0.1:9464'", &format!("'{}'", endpoint.addr));
    assert_ne!(
        config, readme,
        "the README's configuration names no 127.0.0.1:9464"
    );
    let prom = Prometheus::with_scrape_configs(&config);
    let (jobs, requests) = prom.until(
        Duration::from_secs(60),
        "Prometheus has both programs' counters",
        |p| {
            let jobs = p.query("sum(perfabi_jobs_processed_total)")?.0;
            let requests = p.query("perfabi_myapp_requests_total")?.0;
            Some((jobs, requests))
        },
    );
    assert_eq!((jobs, requests), (20.0, 1000.0));
    println!(
        "WALKTHROUGH PASS: the README's Python and C programs in Prometheus: \
         sum(perfabi_jobs_processed_total) {jobs}, perfabi_myapp_requests_total {requests}"
    );
}
