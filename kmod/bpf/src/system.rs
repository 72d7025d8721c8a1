//! What the kernel must offer before anything is loaded, checked up front
//! so that each missing piece gets its own one-line message
//! ([`crate::Error`]): BTF, the capabilities, lockdown, bpffs.

use std::path::Path;

use perfabi_shm::bpf_pin::BPF_FS_MAGIC;

use crate::error::Error;

/// Where bpffs is mounted by convention, and mounted by the loader if
/// nothing is there.
pub const BPFFS: &str = "/sys/fs/bpf";

/// `CAP_SYS_ADMIN`, `CAP_PERFMON`, `CAP_BPF` (`include/uapi/linux/capability.h`).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Checks BTF, the capabilities and lockdown.
pub fn preflight() -> Result<(), Error> {
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(Error::NoBtf);
    }
    if let Some(eff) = effective_caps() {
        let has = |c: u32| eff & (1u64 << c) != 0;
        if !(has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))) {
            return Err(Error::NoCapabilities);
        }
    }
    if let Ok(text) = std::fs::read_to_string("/sys/kernel/security/lockdown") {
        // "none [integrity] confidentiality": the mode in brackets.
        if let Some(mode) = text
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
        {
            if mode == "confidentiality" {
                return Err(Error::Lockdown(mode.to_string()));
            }
        }
    }
    Ok(())
}

/// The effective capability set (`/proc/self/status`, `CapEff`).
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Whether `dir` is on bpffs.
pub fn is_bpffs(dir: &Path) -> bool {
    // `f_type`'s integer type differs between targets.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::statfs(dir).is_ok_and(|s| s.f_type as u64 == BPF_FS_MAGIC)
}

/// Makes sure `folder` (the pin's folder) is on bpffs: if it is under
/// `/sys/fs/bpf` and nothing is mounted there, mounts bpffs there (mode
/// 0755: root alone adds entries, every user may look up a pin).
pub fn ensure_bpffs(folder: &Path) -> Result<(), Error> {
    let mut probe = folder;
    // The folder itself may not exist yet: its nearest existing ancestor.
    while !probe.exists() {
        match probe.parent() {
            Some(p) => probe = p,
            None => break,
        }
    }
    if is_bpffs(probe) {
        return Ok(());
    }
    let root = Path::new(BPFFS);
    if !folder.starts_with(root) {
        return Err(Error::NoBpffs {
            path: folder.to_path_buf(),
            why: "not on a bpffs mount, and only /sys/fs/bpf is mounted by perfabi-bpfd".into(),
        });
    }
    if is_bpffs(root) {
        return Ok(());
    }
    rustix::mount::mount(
        "bpf",
        root,
        "bpf",
        rustix::mount::MountFlags::empty(),
        c"mode=0755",
    )
    .map_err(|e| Error::NoBpffs {
        path: root.to_path_buf(),
        why: format!("mount failed: {e}"),
    })?;
    Ok(())
}
