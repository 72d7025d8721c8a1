//! Socket activation (`src/activation.rs`), with systemd's own tool:
//! `systemd-socket-activate` binds a loopback port, waits for the first
//! connection, then starts perfabi-prometheus with the socket as
//! descriptor 3 (`LISTEN_FDS=1`, `LISTEN_PID`), as `perfabi-prometheus.socket`
//! does. The endpoint answers that first scrape on the passed socket (not
//! on its `--listen` address); two passed sockets, or a Unix socket, are
//! refused with a message naming the `.socket` unit, exit status 1.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::http::{free_port, get_within};
use perfabi_test_harness::KillOnDrop;

const ACTIVATE: &str = "/usr/bin/systemd-socket-activate";

/// Whether systemd's tool is here; if not, the test's skip line.
fn have_activate(test: &str) -> bool {
    if Path::new(ACTIVATE).exists() {
        return true;
    }
    println!("PERFABI-SKIP {test}: no {ACTIVATE} (Debian: the systemd package)");
    false
}

/// `systemd-socket-activate -l L… perfabi-prometheus ARGS…`, once it
/// listens on every `L`; its standard error's lines come through the
/// channel.
fn activate(listen: &[String], args: &[&str]) -> (KillOnDrop, mpsc::Receiver<String>) {
    let exe = env!("CARGO_BIN_EXE_perfabi-prometheus");
    let mut cmd = Command::new(ACTIVATE);
    for l in listen {
        cmd.args(["-l", l]);
    }
    let mut child = cmd
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = KillOnDrop(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[activate] {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let until = Deadline::after(Duration::from_secs(30));
    let mut listening = 0;
    while listening < listen.len() {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.starts_with("Listening on ") => listening += 1,
            Ok(line) => panic!("{ACTIVATE}: {line}"),
            Err(mpsc::RecvTimeoutError::Timeout) if !until.passed() => {}
            Err(e) => until.fail(format_args!("{ACTIVATE} listening ({e})")),
        }
    }
    (child, rx)
}

/// The next line of `rx` that contains `what`, within 30 s.
fn line_with(rx: &mpsc::Receiver<String>, what: &str) -> String {
    let until = Deadline::after(Duration::from_secs(30));
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.contains(what) => return line,
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) if !until.passed() => {}
            Err(e) => until.fail(format_args!("a line with {what:?} ({e})")),
        }
    }
}

#[test]
fn the_socket_systemd_passes_is_served_and_listen_is_not_bound() {
    let test = "the_socket_systemd_passes_is_served_and_listen_is_not_bound";
    if !have_activate(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("perfabi.seg");
    let w = Writer::create(
        &seg,
        &Config {
            max_instances: 64,
            max_families: 4,
            max_members: 8,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let fam = w
        .add_family(&FamilySpec::new(
            "activated.requests",
            "Requests",
            "",
            Kind::Counter,
            Unit::NONE,
        ))
        .unwrap();
    let m = w.add_member(fam, "", &[]).unwrap();
    w.member_add(&m, 42).unwrap();

    let port = free_port();
    // --listen names another port: with a socket passed, it is not bound.
    let unused = free_port();
    let unused_arg = format!("127.0.0.1:{unused}");
    let (_activator, log) = activate(
        &[format!("127.0.0.1:{port}")],
        &[seg.to_str().unwrap(), "--listen", &unused_arg],
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // The first connection starts the endpoint, which answers it.
    let page = get_within(addr, "/metrics", &[], Duration::from_secs(30)).unwrap();
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("activated_requests_total 42"),
        "{}",
        page.body
    );
    let serving = line_with(&log, "serving ");
    assert!(
        serving.ends_with(&format!(
            "at http://127.0.0.1:{port}/metrics (socket passed by systemd)"
        )),
        "{serving}"
    );
    assert!(
        std::net::TcpStream::connect(format!("127.0.0.1:{unused}")).is_err(),
        "--listen 127.0.0.1:{unused} was bound as well"
    );
    println!("ACTIVATION PASS: the passed socket served (200, the counter), --listen not bound");
}

/// The endpoint's exit status and standard error when started by
/// `systemd-socket-activate` on `listen`.
fn refused(listen: &[String]) -> (Option<i32>, String) {
    let (mut activator, log) = activate(listen, &[]);
    // systemd-socket-activate starts the program on a first connection.
    let first = &listen[0];
    if let Ok(addr) = first.parse::<SocketAddr>() {
        let _ = std::net::TcpStream::connect(addr);
    } else {
        let _ = std::os::unix::net::UnixStream::connect(first);
    }
    let until = Deadline::after(Duration::from_secs(30));
    let status = loop {
        if let Some(s) = activator.0.try_wait().unwrap() {
            break s;
        }
        if until.passed() {
            until.fail("perfabi-prometheus exiting on the sockets it was passed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Its standard error ends with it: every line, to the end.
    let text: Vec<String> = log.iter().collect();
    (status.code(), text.join("\n"))
}

#[test]
fn two_sockets_or_a_unix_socket_are_refused_saying_what_the_unit_must_give() {
    let test = "two_sockets_or_a_unix_socket_are_refused_saying_what_the_unit_must_give";
    if !have_activate(test) {
        return;
    }
    let (a, b) = (free_port(), free_port());
    let (code, text) = refused(&[format!("127.0.0.1:{a}"), format!("127.0.0.1:{b}")]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("the sockets systemd passed (LISTEN_FDS): 2 sockets, and the endpoint serves one: give the .socket unit one ListenStream="),
        "{text}"
    );
    let dir = tempfile::tempdir().unwrap();
    let unix = dir.path().join("socket").to_str().unwrap().to_string();
    let (code, text) = refused(&[unix]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("the sockets systemd passed (LISTEN_FDS): ")
            && text.contains("give the .socket unit one ListenStream= of an address and port"),
        "{text}"
    );
    println!("ACTIVATION-REFUSED PASS: two sockets and a Unix socket refused, exit 1");
}
