//! Helpers of the agent's tests: PCP's tools, each run in a private PCP
//! environment ([`private_env`]) so that nothing lands in the machine's PCP
//! folders, a private pmcd and pmproxy started by the project's own
//! scripts, and segments written in-process.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const AGENT: &str = env!("CARGO_BIN_EXE_pmdaperfabi");

/// The private PCP environment of `dir`, as `(name, value)` pairs: the
/// folders PCP writes into (`PCP_TMP_DIR`, `PCP_TMPFILE_DIR`,
/// `PCP_RUN_DIR`, `PCP_LOG_DIR`, `PCP_VAR_DIR`...) moved below `dir`,
/// which are made. Its one home is `pcp-agent/test/private-env`, which the
/// scripts starting pmcd and pmproxy source too; every PCP program a test
/// runs gets it ([`tool`], [`Pmcd::folders`]).
pub fn private_env(dir: &Path) -> Vec<(String, String)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("test/private-env");
    let out = run(Command::new(&script).arg(dir));
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
        .lines()
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("private-env printed {l:?}, not NAME=VALUE"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// PCP's program `name`, or a failure that says how to get it.
fn pcp_program(name: &str) -> PathBuf {
    ["/usr/bin", "/usr/lib/pcp/bin", "/usr/libexec/pcp/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("PCP's {name} is missing: run tests/setup (Debian: apt-get install pcp)")
        })
}

/// A PCP tool, run in the private PCP environment of `dir` ([`private_env`]).
pub fn tool(name: &str, dir: &Path) -> Command {
    let mut c = Command::new(pcp_program(name));
    c.envs(private_env(dir));
    c
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A free port on 127.0.0.1 for a server a test starts that cannot
/// choose its own (pmlogger's control port): one below the kernel's
/// ephemeral range ([`free_port`](perfabi_test_harness::http::free_port)).
/// pmcd and pmproxy choose theirs ([`Pmcd::start`], [`Pmproxy::start`]).
pub fn port() -> u16 {
    perfabi_test_harness::http::free_port()
}

/// The port a server script chose (PORT 0), from the file it wrote.
fn chosen_port(file: &Path) -> u16 {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the script writes it once its server answers)",
            file.display()
        )
    });
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {text:?} is not a port: {e}", file.display()))
}

/// Runs the script `pcp-agent/test/SCRIPT` with `args`; the script starts
/// a server and prints its pid once it answers, which is returned.
fn start_server<'a>(script: &str, args: impl IntoIterator<Item = &'a OsStr>) -> u32 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test")
        .join(script);
    // Bounded (beyond the script's own minute, so that it can say why):
    // a script whose server never answers is killed (with its
    // process group, the server included) and the test fails.
    let out = perfabi_test_harness::run_limited(
        Command::new(&path).args(args),
        std::time::Duration::from_secs(120),
    );
    assert!(
        out.status.is_some_and(|s| s.success()),
        "{script} did not start its server ({:?}): {}",
        out.status,
        out.stderr
    );
    out.stdout.trim().parse().unwrap()
}

/// Stops a server a script started: SIGTERM, then SIGKILL if it is still
/// there after 5 s; returns once it is gone, so that its folder can go.
fn stop_server(pid: u32) {
    use perfabi_test_harness::{send, Signal};
    let gone = || !Path::new(&format!("/proc/{pid}")).exists();
    send(pid, Signal::TERM);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !gone() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !gone() {
        send(pid, Signal::KILL);
    }
}

/// A private pmcd (see pcp-agent/test/private-pmcd); killed on drop.
pub struct Pmcd {
    pub dir: PathBuf,
    pub port: u16,
    pub pid: u32,
}

impl Pmcd {
    /// Starts pmcd on a port private-pmcd chooses (another if the first is
    /// taken before pmcd binds it), serving `segment` and `extra` agents.
    pub fn start(dir: &Path, segment: &Path, extra: &[&str]) -> Pmcd {
        let args = [
            dir.as_os_str(),
            OsStr::new("0"),
            AGENT.as_ref(),
            segment.as_os_str(),
        ];
        let pid = start_server(
            "private-pmcd",
            args.into_iter().chain(extra.iter().map(OsStr::new)),
        );
        let port = chosen_port(&dir.join("pmcd.port"));
        println!(
            "private pmcd (pid {pid}) on 127.0.0.1:{port}, folder {}",
            dir.display()
        );
        Pmcd {
            dir: dir.to_path_buf(),
            port,
            pid,
        }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A PCP client tool aimed at this pmcd, with its folders ([`Pmcd::folders`]).
    pub fn client(&self, name: &str) -> Command {
        let mut c = Command::new(pcp_program(name));
        self.folders(&mut c);
        c.arg("-h").arg(self.host());
        c
    }

    /// Gives `cmd` (a PCP client, or a script running some) the private
    /// PCP environment of the pmcd's folder, the one pmcd runs in
    /// ([`private_env`]): pmlogger keeps its control files in its
    /// `PCP_TMP_DIR`, not the machine's `/var/lib/pcp/tmp`, where pmcd's
    /// `pmcd.pmlogger` metrics look; its control socket in `PCP_RUN_DIR`,
    /// not `/run/pcp` (or `~/.pcp/run` where that is missing); the copy of
    /// its configuration in `PCP_TMPFILE_DIR`, not `/var/tmp`.
    pub fn folders<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        // pmlogger's control port: on loopback only (PMLOGGER_LOCAL, from
        // private-env; it listens on every address otherwise), on a free
        // port.
        cmd.envs(private_env(&self.dir))
            .env("PMLOGGER_PORT", port().to_string())
    }

    /// `pminfo -f` of `names`: metric → [(instance name, value text)].
    pub fn values(&self, names: &[&str]) -> BTreeMap<String, Vec<(Option<String>, String)>> {
        let out = run(self.client("pminfo").arg("-f").args(names));
        parse_pminfo(&stdout(&out))
    }

    /// One singular value of `name`, if it has one.
    pub fn value(&self, name: &str) -> Option<String> {
        self.values(&[name])
            .remove(name)?
            .into_iter()
            .next()
            .map(|(_, v)| v)
    }

    pub fn alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// The pid of the agent pmcd runs (its child running pmdaperfabi).
    pub fn agent_pid(&self) -> Option<u32> {
        let kids =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid)).ok()?;
        kids.split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .find(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("pmdaperfabi"))
            })
    }

    /// Stops the agent (SIGTERM, by its pid) and has pmcd start it again
    /// (SIGHUP), as an operator restarts a PMDA; returns once the new
    /// agent answers.
    pub fn restart_agent(&self) {
        let old = self.agent_pid().expect("pmcd runs the agent");
        perfabi_test_harness::send(old, perfabi_test_harness::Signal::TERM);
        eventually(10, "the agent stops", || {
            !Path::new(&format!("/proc/{old}")).exists()
                || std::fs::read_to_string(format!("/proc/{old}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        });
        perfabi_test_harness::send(self.pid, perfabi_test_harness::Signal::HUP);
        eventually(10, "pmcd starts the agent again", || {
            self.agent_pid().is_some_and(|p| p != old)
                && self.value("perfabi.segment.available").is_some()
        });
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("perfabi.log")).unwrap_or_default()
    }
}

impl Drop for Pmcd {
    fn drop(&mut self) {
        stop_server(self.pid);
    }
}

/// Where PCP's pmproxy is installed.
pub const PMPROXY: &str = "/usr/lib/pcp/bin/pmproxy";

/// A private pmproxy for a private pmcd (see
/// pcp-agent/test/private-pmproxy); killed on drop.
pub struct Pmproxy {
    pub dir: PathBuf,
    pub address: std::net::SocketAddr,
    pub pid: u32,
}

impl Pmproxy {
    /// Starts pmproxy on a port private-pmproxy chooses, for `pmcd`;
    /// returns once its `/metrics` serves the agent's metrics.
    pub fn start(dir: &Path, pmcd: &Pmcd) -> Pmproxy {
        let pmcd_port = pmcd.port.to_string();
        let pid = start_server(
            "private-pmproxy",
            [dir.as_os_str(), OsStr::new("0"), pmcd_port.as_ref()],
        );
        let port = chosen_port(&dir.join("pmproxy.port"));
        println!(
            "private pmproxy (pid {pid}) on 127.0.0.1:{port} for pmcd {}, folder {}",
            pmcd.host(),
            dir.display()
        );
        Pmproxy {
            dir: dir.to_path_buf(),
            address: ([127, 0, 0, 1], port).into(),
            pid,
        }
    }

    /// Its web API's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `GET /metrics?names=names`: status and page.
    pub fn metrics(&self, names: &str) -> (u16, String) {
        let path = format!(
            "/metrics?names={}",
            perfabi_test_harness::http::encode(names)
        );
        let r = perfabi_test_harness::http::get(self.address, &path, &[])
            .unwrap_or_else(|e| panic!("GET {path} of pmproxy: {e}"));
        (r.status, r.body)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pmproxy.log")).unwrap_or_default()
    }
}

impl Drop for Pmproxy {
    fn drop(&mut self) {
        stop_server(self.pid);
    }
}

/// The shipped pmlogger configuration (pcp-agent/pmda/pmlogger.config) at
/// a test's pace, every second instead of every 10 or 60, written to
/// `dir/pmlogger.config`; returns its path.
pub fn pmlogger_config_every_second(dir: &Path) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmda/pmlogger.config");
    let text = std::fs::read_to_string(&shipped).unwrap();
    let cfg = text
        .replace("every 10 seconds", "every 1 second")
        .replace("every 60 seconds", "every 1 second");
    assert_ne!(
        cfg,
        text,
        "{} names no interval to change",
        shipped.display()
    );
    let path = dir.join("pmlogger.config");
    std::fs::write(&path, cfg).unwrap();
    path
}

/// Parses `pminfo -f` output.
pub fn parse_pminfo(text: &str) -> BTreeMap<String, Vec<(Option<String>, String)>> {
    let mut out: BTreeMap<String, Vec<(Option<String>, String)>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            current = Some(line.trim().to_string());
            out.entry(line.trim().to_string()).or_default();
            continue;
        }
        let Some(m) = &current else { continue };
        let l = line.trim();
        if let Some(v) = l.strip_prefix("value ") {
            out.get_mut(m).unwrap().push((None, v.to_string()));
        } else if let Some(rest) = l.strip_prefix("inst [") {
            // inst [0 or "cpu0"] value 12
            let name = rest.split('"').nth(1).map(str::to_string);
            let v = rest
                .rsplit_once("] value ")
                .map(|(_, v)| v.to_string())
                .unwrap_or_default();
            out.get_mut(m).unwrap().push((name, v));
        }
    }
    out
}

/// Polls `f` until it is true or `secs` pass.
pub fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "not within {secs} s: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// perfabi-cat, built beside the agent by `cargo test --workspace` (built
/// here, in the agent's profile, if it is not).
pub fn perfabi_cat() -> PathBuf {
    perfabi_test_harness::workspace::workspace_bin(agent_profile(), "perfabi-cat", "perfabi-cat")
}

/// The profile folder the agent was built in (`target/debug`...).
fn agent_profile() -> &'static Path {
    Path::new(AGENT).parent().expect("the agent is in a folder")
}

/// The Python that has PCP's `pcp` module (Debian's `/usr/bin/python3`;
/// another Python first on PATH may lack it), run in the private PCP
/// environment of `dir` ([`private_env`]); a failure that says how to get
/// it if it is missing.
pub fn pcp_python(dir: &Path) -> Command {
    let py = Path::new("/usr/bin/python3");
    assert!(
        py.exists(),
        "/usr/bin/python3 is missing: run tests/setup (Debian: apt-get install python3-pcp)"
    );
    let ok = Command::new(py)
        .args(["-c", "import pcp.pmapi"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "/usr/bin/python3 has no pcp module: run tests/setup (Debian: apt-get install python3-pcp)"
    );
    let mut c = Command::new(py);
    c.envs(private_env(dir));
    c
}

/// PCP's pmrep, run by [`pcp_python`] (`/usr/bin/pmrep` starts `pmpython`,
/// which may find another Python first on PATH) in the private PCP
/// environment of `dir`; a failure that says how to get it if it is missing.
pub fn pmrep(dir: &Path) -> Command {
    let rep = Path::new("/usr/bin/pmrep");
    assert!(
        rep.exists(),
        "pmrep is missing: run tests/setup (Debian: apt-get install pcp)"
    );
    let mut c = pcp_python(dir);
    c.arg(rep);
    c
}

/// perfabi-exportd of the same build profile as the agent.
pub fn exportd() -> PathBuf {
    perfabi_test_harness::workspace::workspace_bin(
        agent_profile(),
        "perfabi-exportd",
        "perfabi-exportd",
    )
}
