//! A terminal for tests of perfabi-cat's views redrawn in place: a
//! private tmux server (its own socket) with one 160×40 pane running `sh`,
//! what it shows, its variables (`alternate_on`, `cursor_flag`,
//! `pane_pid`), keys typed into it, and whether its shell has its terminal
//! back after a view.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of one test alone (its own socket); killed on drop.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// A private tmux server at `socket` with one 160×40 session, `live`,
    /// running `sh` with the prompt `live$ `; waits for the prompt.
    pub fn start(socket: &Path) -> Tmux {
        let tmux = Tmux {
            socket: socket.to_path_buf(),
        };
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "live",
            "-x",
            "160",
            "-y",
            "40",
            "env PS1='live$ ' sh",
        ]);
        wait_for(Duration::from_secs(10), || {
            tmux.capture()
                .iter()
                .any(|l| l.starts_with("live$"))
                .then_some(())
        })
        .expect("the shell's prompt");
        tmux
    }

    /// `tmux -S socket args…`; its stdout, or a panic with its stderr.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The pane's text, one string a row.
    pub fn capture(&self) -> Vec<String> {
        self.run(&["capture-pane", "-p", "-t", "live"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A pane variable (`alternate_on`, `cursor_flag`, `pane_pid`).
    pub fn var(&self, name: &str) -> String {
        self.run(&[
            "display-message",
            "-p",
            "-t",
            "live",
            &format!("#{{{name}}}"),
        ])
        .trim()
        .to_string()
    }

    /// Types `text`, then Enter.
    pub fn type_line(&self, text: &str) {
        self.run(&["send-keys", "-t", "live", "-l", text]);
        self.run(&["send-keys", "-t", "live", "Enter"]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `limit`.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether tmux runs here; if not, a skip (a failure under CI, where
/// tests/setup installs it).
pub fn have_tmux(test: &str) -> bool {
    if Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return true;
    }
    let reason = "no tmux (apt-get install tmux; tests/setup does)";
    assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
    crate::skip(test, reason);
    false
}

/// Whether the shell in the pane has its terminal back: `stty -a` shows
/// canonical mode and echo on.
pub fn shell_is_cooked(tmux: &Tmux, marker: &str) {
    tmux.type_line(&format!("stty -a; echo {marker}"));
    let screen = wait_for(Duration::from_secs(10), || {
        let s = tmux.capture();
        s.iter().any(|l| l.trim() == marker).then(|| s.join("\n"))
    })
    .unwrap_or_else(|| panic!("no {marker} from the shell:\n{}", tmux.capture().join("\n")));
    let flags: Vec<&str> = screen.split_whitespace().collect();
    for flag in ["icanon", "echo", "isig"] {
        assert!(
            flags.contains(&flag),
            "terminal left without {flag}:\n{screen}"
        );
    }
}

/// The process the shell of the pane runs now (perfabi-cat).
pub fn shell_child(tmux: &Tmux) -> Option<i32> {
    let sh: i32 = tmux.var("pane_pid").parse().ok()?;
    let kids = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).ok()?;
    kids.split_whitespace().next()?.parse().ok()
}
