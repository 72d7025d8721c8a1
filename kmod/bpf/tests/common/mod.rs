//! What the eBPF writer's tests share: whether they can run, a folder of
//! their own in bpffs, the daemon started and waited for, and reading a
//! family's values by instance.
#![allow(dead_code)] // each test binary uses some of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use perfabi_bpf::Options;
use perfabi_reader::{Liveness, Segment};
use perfabi_test_harness::deadline::Deadline;

/// Whether the test can run here; if not, says why (`PERFABI-SKIP`).
pub fn can_run(test: &str) -> bool {
    if !perfabi_test_harness::need_root(test) {
        return false;
    }
    perfabi_test_harness::need_file(
        test,
        Path::new("/sys/kernel/btf/vmlinux"),
        "a kernel with BTF (CONFIG_DEBUG_INFO_BTF=y)",
    )
}

/// A folder of the test's own in bpffs (made by the writer, or by
/// [`TestDir::make`]), removed with its pins when dropped.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(name: &str) -> Self {
        let d = PathBuf::from(format!(
            "/sys/fs/bpf/perfabi-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        TestDir(d)
    }

    /// Makes the folder (bpffs mounted by a writer start first).
    pub fn make(&self) {
        perfabi_bpf::system::ensure_bpffs(&self.0).unwrap();
        std::fs::create_dir_all(&self.0).unwrap();
    }

    pub fn pin(&self) -> PathBuf {
        self.0.join("kernel")
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn options(dir: &TestDir) -> Options {
    Options {
        pin: dir.pin(),
        ..Options::default()
    }
}

/// The total of a counter family (its one member, every CPU).
pub fn total(seg: &mut Segment, name: &str) -> u64 {
    let mut h = seg.family_handle(name).unwrap();
    let mut out = perfabi_reader::FamilyValues::default();
    seg.read_family(&mut h, &mut out).unwrap();
    (0..out.nr_cpus()).map(|c| out.words(0, c)[0]).sum()
}

/// A family's values for `instance`, summed over the CPUs (every word:
/// a counter's one, a histogram's count, sum and buckets); `None` while the
/// family has no such member.
pub fn instance_words(seg: &mut Segment, family: &str, instance: &str) -> Option<Vec<u64>> {
    let mut h = seg.family_handle(family).ok()?;
    let mut out = perfabi_reader::FamilyValues::default();
    seg.read_family(&mut h, &mut out).ok()?;
    let m = h
        .family()
        .members
        .iter()
        .position(|m| m.instance == instance)?;
    let mut sum = vec![0u64; out.words(m, 0).len()];
    for c in 0..out.nr_cpus() {
        for (s, w) in sum.iter_mut().zip(out.words(m, c)) {
            *s += w;
        }
    }
    Some(sum)
}

/// Starts `perfabi-bpfd` on `pin` with a 200 ms heartbeat promise and waits
/// until a reader finds it alive; the reader reports the writer's state
/// rather than refusing to read once it is gone. The child is the caller's
/// to wait for.
pub fn start_daemon(pin: &Path) -> (Child, Segment) {
    let opts = perfabi_reader::Options {
        max_silence: Duration::from_millis(600),
        recheck: Duration::from_millis(50),
        require_live: false,
        ..Default::default()
    };
    start_daemon_by(
        Command::new(env!("CARGO_BIN_EXE_perfabi-bpfd")),
        pin,
        opts,
        "perfabi-bpfd's pin, alive",
    )
}

/// Runs `cmd` (`perfabi-bpfd` itself, or a wrapper that runs its
/// arguments, such as `nsenter`) with `--heartbeat-ms 200 --pin PIN` added,
/// and waits until a reader opened with `opts` finds the writer alive
/// (`what` names that in a failure). Fails the test if the child exits
/// first. The child is the caller's to wait for (the lint sees only this
/// function's paths).
#[allow(clippy::zombie_processes)]
pub fn start_daemon_by(
    mut cmd: Command,
    pin: &Path,
    opts: perfabi_reader::Options,
    what: &str,
) -> (Child, Segment) {
    let mut child = cmd
        .args(["--heartbeat-ms", "200", "--pin"])
        .arg(pin)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let up = Deadline::after(Duration::from_secs(30));
    loop {
        if let Ok(mut s) = Segment::open_with(pin, opts.clone()) {
            if s.info().is_ok_and(|i| i.liveness == Liveness::Kernel) {
                return (child, s);
            }
        }
        if up.passed() || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            up.fail(what);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the reader's view of the writer satisfies `want`.
pub fn wait_liveness(seg: &mut Segment, what: &str, want: impl Fn(&Liveness) -> bool) -> Liveness {
    let d = Deadline::after(Duration::from_secs(20));
    loop {
        let l = seg.status().map(|(_, l)| l);
        if let Ok(l) = l {
            if want(&l) {
                return l;
            }
        }
        d.assert(!d.passed(), what);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[allow(unused_imports)] // each test binary uses some of it
pub use perfabi_test_harness::kernel_work::{ping_pong, ping_pong_until, Loop};

/// What another user's `perfabi-cat` prints of `pin` (a copy of the
/// program in a folder that user can reach); fails the test if it fails.
pub fn cat_as_other_user(pin: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cat = perfabi_test_harness::executable_copy(
        &perfabi_test_harness::workspace::perfabi_cat(),
        bin.path(),
    );
    let mut cmd = Command::new(&cat);
    cmd.arg(pin);
    let out = perfabi_test_harness::as_other_user(&mut cmd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
