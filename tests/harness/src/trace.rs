//! What a tree of processes writes to the file system, as `strace -f` sees
//! it: every successful call that creates, opens for writing, removes,
//! renames, links, changes the mode, owner or times of a path, or binds a
//! Unix socket to one, with the program that made it. A test runs what it
//! checks under [`traced`] and holds the paths to where they may be (the
//! PCP tests: below their own folder, never the machine's PCP tree).
//!
//! Paths are absolute: strace's `-y` prints the folder behind every file
//! descriptor, `AT_FDCWD` included, and the file an `openat` opened.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{run_limited, Finished};

/// The system calls traced: every call that takes a path and changes what
/// is there (or opens it for writing), and `bind` (a Unix socket's file);
/// and, to know each process's program and folder, `execve`, `chdir`,
/// `fchdir` and the calls that make processes.
const CALLS: &str = "trace=open,openat,creat,mkdir,mkdirat,unlink,unlinkat,rmdir,rename,renameat,\
renameat2,link,linkat,symlink,symlinkat,chmod,fchmodat,chown,lchown,fchownat,truncate,mknod,\
mknodat,utimensat,bind,execve,chdir,fchdir,clone,clone3,fork,vfork";

/// Where strace is installed.
pub const STRACE: &str = "/usr/bin/strace";

/// One write-like call that succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileWrite {
    /// The program the process ran (its last `execve`, or that of the
    /// process it was made by).
    pub program: String,
    /// The process (thread) id.
    pub pid: u32,
    /// The system call.
    pub call: String,
    /// The path it changed, absolute (strace's `-y` prints the folder of a
    /// descriptor; a relative path of a call without one is taken from the
    /// process's folder, followed through `chdir` and inherited at `fork`).
    pub path: PathBuf,
}

/// [`run_limited`] of `cmd` under `strace -f` (one trace file per process,
/// in `traces`), and the write-like calls of all its processes. Panics with
/// what to install if strace is missing.
pub fn traced(cmd: &Command, traces: &Path, limit: Duration) -> (Finished, Vec<FileWrite>) {
    assert!(
        Path::new(STRACE).exists(),
        "{STRACE} is missing: run tests/setup (Debian: apt-get install strace)"
    );
    let mut s = Command::new(STRACE);
    s.args([
        "-f", "-ff", "-y", "-ttt", "-qq", "-s", "4096", "-e", CALLS, "-o",
    ])
    .arg(traces.join("t"))
    .arg(cmd.get_program())
    .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => s.env(k, v),
            None => s.env_remove(k),
        };
    }
    let cwd = match cmd.get_current_dir() {
        Some(d) => {
            s.current_dir(d);
            d.to_path_buf()
        }
        None => std::env::current_dir().expect("the test's folder"),
    };
    let finished = run_limited(&mut s, limit);
    (finished, writes_in(traces, &cwd))
}

/// The write-like calls in the trace files `traces/t.PID` that strace
/// `-ff -y -ttt` wrote, in time order; `cwd` is the folder the first
/// process started in.
pub fn writes_in(traces: &Path, cwd: &Path) -> Vec<FileWrite> {
    use std::collections::HashMap;
    let mut events: Vec<(f64, u32, Call)> = Vec::new();
    let mut parent: HashMap<u32, u32> = HashMap::new();
    for e in std::fs::read_dir(traces).unwrap_or_else(|e| panic!("{}: {e}", traces.display())) {
        let path = e.expect("a trace file").path();
        let Some(pid) = path
            .file_name()
            .and_then(|n| n.to_str()?.strip_prefix("t.")?.parse::<u32>().ok())
        else {
            continue;
        };
        for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
            let Some((ts, rest)) = line.split_once(' ') else {
                continue;
            };
            let (Ok(ts), Some(call)) = (ts.parse::<f64>(), parse_line(rest)) else {
                continue;
            };
            if matches!(call.name.as_str(), "clone" | "clone3" | "fork" | "vfork") {
                if let Ok(child) = call
                    .ret
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("")
                    .parse()
                {
                    parent.insert(child, pid);
                }
                continue;
            }
            events.push((ts, pid, call));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Each process's program and folder, taken from its maker's when first
    // met (a process made before its maker's trace shows the clone: the
    // maker's state now, which a chdir in between is all that could change).
    let mut state: HashMap<u32, (String, PathBuf)> = HashMap::new();
    fn state_of<'a>(
        pid: u32,
        state: &'a mut HashMap<u32, (String, PathBuf)>,
        parent: &HashMap<u32, u32>,
        cwd: &Path,
    ) -> &'a mut (String, PathBuf) {
        if !state.contains_key(&pid) {
            let inherited = match parent.get(&pid) {
                Some(&p) if p != pid => state_of(p, state, parent, cwd).clone(),
                _ => ("?".to_string(), cwd.to_path_buf()),
            };
            state.insert(pid, inherited);
        }
        state.get_mut(&pid).expect("just inserted")
    }
    let mut out = Vec::new();
    for (_, pid, call) in events {
        let (program, dir) = state_of(pid, &mut state, &parent, cwd);
        match call.name.as_str() {
            "execve" => {
                if let Some(p) = call.strings().next() {
                    *program = p;
                }
            }
            "chdir" => {
                if let Some(p) = call.strings().next() {
                    *dir = dir.join(p);
                }
            }
            "fchdir" => {
                if let Some(p) = call.args.first().and_then(|a| fd_path(a)) {
                    *dir = p;
                }
            }
            _ => {
                for p in call.written() {
                    out.push(FileWrite {
                        program: program.clone(),
                        pid,
                        call: call.name.clone(),
                        path: dir.join(p),
                    });
                }
            }
        }
    }
    out
}

/// One traced call that succeeded: its name, its arguments split at the
/// top level, and what it returned.
struct Call {
    name: String,
    args: Vec<String>,
    ret: String,
}

/// `name(args) = ret`, if the line is a call that did not fail.
fn parse_line(line: &str) -> Option<Call> {
    let open = line.find('(')?;
    let name = &line[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    // strace pads short calls: `mkdir("/a", 0777)         = 0`.
    let (args, ret) = line[open + 1..].rsplit_once(" = ")?;
    let args = args.trim_end().strip_suffix(')')?;
    if ret.starts_with('-') || ret.starts_with('?') {
        return None;
    }
    Some(Call {
        name: name.to_string(),
        args: split_args(args),
        ret: ret.to_string(),
    })
}

/// Splits at the commas outside quotes, braces, brackets and `<...>`.
fn split_args(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quoted, mut escaped) =
        (Vec::new(), String::new(), 0i32, false, false);
    for c in s.chars() {
        if quoted {
            cur.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '{' | '[' | '<' | '(' => depth += 1,
            '}' | ']' | '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// The text of a quoted argument `"..."` with strace's escapes undone.
fn unquote(arg: &str) -> Option<String> {
    let body = arg.strip_prefix('"')?;
    let body = body.strip_suffix("\"...").or(body.strip_suffix('"'))?;
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(u8::from_str_radix(&hex, 16).map_or('?', char::from));
            }
            Some(o) => out.push(o),
            None => {}
        }
    }
    Some(out)
}

/// The folder or file behind a descriptor printed by `-y` (`3</a/b>`,
/// `AT_FDCWD</a>`).
fn fd_path(arg: &str) -> Option<PathBuf> {
    let start = arg.find('<')?;
    let inner = arg[start + 1..].strip_suffix('>')?;
    inner.starts_with('/').then(|| PathBuf::from(inner))
}

impl Call {
    fn strings(&self) -> impl Iterator<Item = String> + '_ {
        self.args.iter().filter_map(|a| unquote(a))
    }

    /// Argument `i` as a path, joined to the folder of descriptor argument
    /// `dir` if there is one.
    fn path_at(&self, dir: Option<usize>, i: usize) -> Option<PathBuf> {
        let p = unquote(self.args.get(i)?)?;
        if p.starts_with('/') {
            return Some(PathBuf::from(p));
        }
        match dir.and_then(|d| fd_path(self.args.get(d)?)) {
            Some(base) if p.is_empty() => Some(base),
            Some(base) => Some(base.join(p)),
            None => Some(PathBuf::from(p)),
        }
    }

    /// Whether open flags (argument `i`) ask to write, create or truncate.
    fn writes_flags(&self, i: usize) -> bool {
        self.args.get(i).is_some_and(|f| {
            ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"]
                .iter()
                .any(|w| f.contains(w))
        })
    }

    /// The paths this call wrote.
    fn written(&self) -> Vec<PathBuf> {
        let at = |d, i| self.path_at(Some(d), i);
        let plain = |i| self.path_at(None, i);
        let one = |p: Option<PathBuf>| p.into_iter().collect::<Vec<_>>();
        match self.name.as_str() {
            // The file opened, as -y prints the descriptor returned.
            "openat" if self.writes_flags(2) => one(fd_path(&self.ret).or_else(|| at(0, 1))),
            "open" if self.writes_flags(1) => one(fd_path(&self.ret).or_else(|| plain(0))),
            "creat" => one(fd_path(&self.ret).or_else(|| plain(0))),
            "mkdir" | "unlink" | "rmdir" | "chmod" | "chown" | "lchown" | "truncate" | "mknod" => {
                one(plain(0))
            }
            "mkdirat" | "unlinkat" | "fchmodat" | "fchownat" | "mknodat" => one(at(0, 1)),
            "utimensat" => one(at(0, 1).or_else(|| self.args.first().and_then(|a| fd_path(a)))),
            "rename" => [plain(0), plain(1)].into_iter().flatten().collect(),
            "renameat" | "renameat2" => [at(0, 1), at(2, 3)].into_iter().flatten().collect(),
            "link" | "symlink" => one(plain(1)),
            "linkat" => one(at(2, 3)),
            "symlinkat" => one(at(1, 2)),
            "bind" => {
                // {sa_family=AF_UNIX, sun_path="/a/b"}; an abstract socket
                // (sun_path=@"...") has no file.
                let addr = self.args.get(1).map(String::as_str).unwrap_or("");
                match addr.split_once("sun_path=\"") {
                    Some((_, rest)) => unquote(format!("\"{rest}").trim_end_matches('}'))
                        .map(PathBuf::from)
                        .into_iter()
                        .collect(),
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(line: &str) -> Vec<PathBuf> {
        parse_line(line).map(|c| c.written()).unwrap_or_default()
    }

    #[test]
    fn each_kind_of_call_names_the_path_it_wrote() {
        let p = |s: &str| vec![PathBuf::from(s)];
        assert_eq!(
            written(r#"openat(AT_FDCWD</w>, "a/b", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</w/a/b>"#),
            p("/w/a/b")
        );
        assert_eq!(
            written(r#"openat(AT_FDCWD</w>, "/etc/x", O_RDONLY|O_CLOEXEC) = 3</etc/x>"#),
            Vec::<PathBuf>::new(),
            "a read"
        );
        assert_eq!(
            written(
                r#"openat(AT_FDCWD</w>, "/var/tmp/x", O_RDWR|O_CREAT|O_EXCL, 0600) = -1 EEXIST (File exists)"#
            ),
            Vec::<PathBuf>::new(),
            "a failure"
        );
        assert_eq!(
            written(r#"mkdirat(AT_FDCWD</w>, "d", 0755) = 0"#),
            p("/w/d")
        );
        assert_eq!(
            written(r#"mkdir("/w/e", 0777)         = 0"#),
            p("/w/e"),
            "padded"
        );
        assert_eq!(
            written(r#"unlink("/var/tmp/pmlogger_configX") = 0"#),
            p("/var/tmp/pmlogger_configX")
        );
        assert_eq!(
            written(r#"renameat2(AT_FDCWD</w>, "a", 3</v>, "b", RENAME_NOREPLACE) = 0"#),
            vec![PathBuf::from("/w/a"), PathBuf::from("/v/b")]
        );
        assert_eq!(
            written(r#"symlinkat("/etc/pcp/x", AT_FDCWD</w>, "l") = 0"#),
            p("/w/l"),
            "the link, not its target"
        );
        assert_eq!(
            written(
                r#"bind(3<socket:[9]>, {sa_family=AF_UNIX, sun_path="/run/pcp/pmcd.socket"}, 110) = 0"#
            ),
            p("/run/pcp/pmcd.socket")
        );
        assert_eq!(
            written(r#"bind(3<socket:[9]>, {sa_family=AF_UNIX, sun_path=@"abstract"}, 12) = 0"#),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            written(
                r#"bind(3<socket:[9]>, {sa_family=AF_INET, sin_port=htons(1), sin_addr=inet_addr("127.0.0.1")}, 16) = 0"#
            ),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            written(r#"utimensat(4</w/f>, NULL, NULL, 0) = 0"#),
            p("/w/f")
        );
        assert_eq!(written("+++ exited with 0 +++"), Vec::<PathBuf>::new());
    }

    #[test]
    fn a_traced_shell_s_writes_are_found_with_their_program() {
        if !Path::new(STRACE).exists() {
            crate::skip(
                "a_traced_shell_s_writes_are_found_with_their_program",
                "no /usr/bin/strace (apt-get install strace)",
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let traces = tempfile::tempdir().unwrap();
        let mut sh = Command::new("/bin/sh");
        sh.arg("-c")
            .arg("mkdir d && echo x > d/f && mv d/f d/g && /bin/rm d/g")
            .current_dir(dir.path());
        let (done, writes) = traced(&sh, traces.path(), Duration::from_secs(30));
        assert_eq!(done.code(), Some(0), "{done:?}");
        let d = dir.path().canonicalize().unwrap();
        let seen: Vec<(&str, &str, PathBuf)> = writes
            .iter()
            .map(|w| (w.program.as_str(), w.call.as_str(), w.path.clone()))
            .collect();
        for want in [
            ("/bin/sh", "openat", d.join("d/f")),
            ("/bin/rm", "unlinkat", d.join("d/g")),
        ] {
            assert!(
                seen.iter()
                    .any(|s| s.0 == want.0 && s.1 == want.1 && s.2 == want.2),
                "{want:?} not in {seen:?}"
            );
        }
        assert!(
            seen.iter().any(|s| s.2 == d.join("d")),
            "mkdir of d not in {seen:?}"
        );
        assert!(
            seen.iter()
                .any(|s| s.1.starts_with("rename") && s.2 == d.join("d/g")),
            "mv not in {seen:?}"
        );
    }
}
