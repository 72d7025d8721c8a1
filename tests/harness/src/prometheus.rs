//! A real Prometheus for the tests that check what it makes of a page:
//! Debian's `/usr/bin/prometheus` (2.42, installed by `tests/setup`; its
//! service is never started) on a free loopback port, with a private
//! storage folder, scraping its targets every second, asked through its
//! HTTP API, and killed on drop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{http, KillOnDrop};

/// Where Debian installs Prometheus.
pub const PROMETHEUS: &str = "/usr/bin/prometheus";

/// Whether Prometheus is installed. If it is not, a failure under CI (`CI`
/// set); elsewhere `PERFABI-SKIP <test>: …` is printed and the answer is
/// false.
pub fn available(test: &str) -> bool {
    crate::need_file(
        test,
        Path::new(PROMETHEUS),
        "apt-get install prometheus; tests/setup does",
    )
}

/// A page for Prometheus to scrape: `http://address metrics_path`.
#[derive(Debug, Clone)]
pub struct Target {
    /// The job's name (the `job` label of its series).
    pub job: String,
    /// `host:port`.
    pub address: SocketAddr,
    /// The page's path (`/metrics`).
    pub metrics_path: String,
}

impl Target {
    /// `job` at `http://address/metrics`.
    pub fn new(job: &str, address: SocketAddr) -> Target {
        Target {
            job: job.to_string(),
            address,
            metrics_path: "/metrics".to_string(),
        }
    }
}

/// `scrape_configs` of Prometheus' configuration for `targets`, one job each.
pub fn scrape_configs(targets: &[Target]) -> String {
    let mut yaml = String::from("scrape_configs:\n");
    for t in targets {
        yaml += &format!(
            "  - job_name: {}\n    metrics_path: {}\n    static_configs:\n      - targets: ['{}']\n",
            t.job, t.metrics_path, t.address
        );
    }
    yaml
}

/// A Prometheus the test started; killed on drop, its folder removed.
pub struct Prometheus {
    // Declared first: killed before its folder goes.
    _process: KillOnDrop,
    dir: tempfile::TempDir,
    /// Its address (`127.0.0.1:port`).
    pub address: SocketAddr,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` every second.
    pub fn start(targets: &[Target]) -> Prometheus {
        Prometheus::with_scrape_configs(&scrape_configs(targets))
    }

    /// Starts Prometheus with `scrape_configs` (YAML: the `scrape_configs:`
    /// key and its list, as a user would write it), under a `global`
    /// section that scrapes and evaluates every second; returns once its
    /// API answers.
    pub fn with_scrape_configs(scrape_configs: &str) -> Prometheus {
        Prometheus::with_flags(scrape_configs, &[])
    }

    /// [`with_scrape_configs`](Self::with_scrape_configs), with more
    /// command-line `flags` (`--enable-feature=native-histograms`).
    pub fn with_flags(scrape_configs: &str, flags: &[&str]) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("perfabi-prometheus.")
            .tempdir()
            .unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{scrape_configs}"),
        )
        .unwrap();
        let address = SocketAddr::from(([127, 0, 0, 1], http::free_port()));
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let process = KillOnDrop(
            Command::new(PROMETHEUS)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("tsdb").display()
                ))
                .arg(format!("--web.listen-address={address}"))
                .args(flags)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start prometheus"),
        );
        let p = Prometheus {
            _process: process,
            dir,
            address,
        };
        p.until(Duration::from_secs(30), "Prometheus is ready", |p| {
            http::get(p.address, "/-/ready", &[])
                .ok()
                .filter(|r| r.status == 200)
        });
        println!(
            "prometheus on {address}, configuration {}",
            config.display()
        );
        p
    }

    /// Its folder (configuration, log, storage).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `query` evaluated now: the first result's value and labels, if it
    /// has a finite one.
    pub fn query(&self, query: &str) -> Option<(f64, serde_json::Value)> {
        let path = format!("/api/v1/query?query={}", http::encode(query));
        let r = http::get(self.address, &path, &[]).ok()?;
        if r.status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
        let r = v["data"]["result"].get(0)?;
        let value: f64 = r["value"][1].as_str()?.parse().ok()?;
        value.is_finite().then(|| (value, r["metric"].clone()))
    }

    /// Polls `f` every half second until it answers, and returns its
    /// answer; past `within`, fails saying `what` with Prometheus' log.
    pub fn until<T>(
        &self,
        within: Duration,
        what: &str,
        mut f: impl FnMut(&Prometheus) -> Option<T>,
    ) -> T {
        let end = Instant::now() + within;
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                Instant::now() < end,
                "not within {within:?}: {what}; Prometheus' log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Polls `f` until its answer is settled (`Some((answer, true))`), and
    /// returns that answer; once `within` has passed, returns the next
    /// answer, settled or not, for the test to judge (rates take a few
    /// scrapes to settle). Fails if there is no answer at all by then.
    pub fn settle<T>(
        &self,
        within: Duration,
        what: &str,
        mut f: impl FnMut(&Prometheus) -> Option<(T, bool)>,
    ) -> T {
        let end = Instant::now() + within;
        self.until(within + Duration::from_secs(1), what, |p| {
            let (answer, settled) = f(p)?;
            (settled || Instant::now() > end).then_some(answer)
        })
    }
}
