//! What the endpoint's tests share: `perfabi-prometheus` started on a
//! loopback port (this build's, or the one in `$PERFABI_TEST_BIN_DIR` to
//! see an older build fail them), its log, and requests on connections the
//! test holds (kept alive, read by length).

#![allow(dead_code)] // each test file uses its own part

pub mod certs;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use perfabi_test_harness::http::{read_response, Response};
use perfabi_test_harness::KillOnDrop;

/// A running endpoint: killed on drop.
pub struct Running {
    process: KillOnDrop,
    /// Where it listens.
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Running {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// What it has logged so far, a line each.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// `perfabi-prometheus SEGMENT --listen 127.0.0.1:0 ARGS…`, once it says
/// where it serves (`http://` or `https://`).
pub fn start(segment: &Path, args: &[&str]) -> Running {
    start_under(&[], segment, args)
}

/// [`start`], run by `wrapper` (a program and its arguments, such as
/// `prlimit --nofile=64:64 --`) if not empty.
pub fn start_under(wrapper: &[&str], segment: &Path, args: &[&str]) -> Running {
    let exe = perfabi_test_harness::bin(
        "perfabi-prometheus",
        env!("CARGO_BIN_EXE_perfabi-prometheus"),
    );
    let mut cmd = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let mut child = cmd
        .arg(segment)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", exe.display()));
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let process = KillOnDrop(child);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut addr = None;
    let mut line = String::new();
    while addr.is_none() {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!(
                "{} {args:?} ended: {:?}",
                exe.display(),
                log.lock().unwrap()
            );
        }
        eprintln!("[endpoint] {}", line.trim_end());
        log.lock().unwrap().push(line.trim_end().to_string());
        addr = line
            .split("://")
            .nth(1)
            .and_then(|s| s.strip_suffix("/metrics\n"))
            .map(|s| s.parse().unwrap());
    }
    // Keep reading its log (echoed) so that it never blocks on a full pipe.
    let lines = Arc::clone(&log);
    std::thread::spawn(move || {
        for l in stderr.lines().map_while(Result::ok) {
            eprintln!("[endpoint] {l}");
            lines.lock().unwrap().push(l);
        }
    });
    Running {
        process,
        addr: addr.unwrap(),
        log,
    }
}

/// A connection to `addr` whose reads give up after 20 s.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends `request` as is on `s` and reads one response (the head alone
/// for a `HEAD`); the connection stays open for the next.
pub fn exchange(s: &mut TcpStream, request: &[u8]) -> std::io::Result<Response> {
    s.write_all(request)?;
    read_response(&mut BufReader::new(&*s), request.starts_with(b"HEAD "))
}

/// `METHOD path` on `s`, kept alive, with `Accept` if given.
pub fn ask(
    s: &mut TcpStream,
    method: &str,
    path: &str,
    accept: Option<&str>,
) -> std::io::Result<Response> {
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    exchange(
        s,
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n{accept}\r\n").as_bytes(),
    )
}

/// Whether the server closed `s` (end of file or reset) within `within`;
/// false if it is still open then. Bytes sent meanwhile are read and
/// dropped.
pub fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    use std::io::Read;
    let end = std::time::Instant::now() + within;
    let mut buf = [0u8; 64 << 10];
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// `page` through prometheus_client's parser of `module` under `py`: one
/// line per sample, `TYPE NAME {labels} VALUE`, sorted labels.
pub fn parse(py: &str, module: &str, page: &str) -> String {
    let script = format!(
        "import sys\n\
         from {module} import text_string_to_metric_families\n\
         for f in text_string_to_metric_families(sys.stdin.read()):\n\
         \x20   for s in f.samples:\n\
         \x20       print(f.type, s.name, sorted(s.labels.items()), repr(float(s.value)))\n"
    );
    let out = perfabi_test_harness::python::python_with(py, &script, page.as_bytes());
    assert!(
        out.status.success(),
        "{py} {module} refused the page:\n{}\n{page}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
