//! One daemon per segment path: an exclusive `flock` on `PATH.lock`, held
//! for the daemon's life, with the holder's pid written inside.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

/// The held lock (released when dropped or when the process ends).
pub struct PathLock {
    _file: File,
    path: PathBuf,
}

impl PathLock {
    /// Takes the lock of `segment`, or says who holds it.
    pub fn take(segment: &Path) -> Result<Self, String> {
        let mut name = segment.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(|e| format!("cannot open lock file {}: {e}", path.display()))?;
        if flock(&f, FlockOperation::NonBlockingLockExclusive).is_err() {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            return Err(format!(
                "another perfabi-exportd (pid {}) already writes {}: stop it first, or choose another --path",
                holder.trim(),
                segment.display()
            ));
        }
        f.set_len(0)
            .and_then(|()| f.rewind())
            .and_then(|()| writeln!(f, "{}", std::process::id()))
            .map_err(|e| e.to_string())?;
        Ok(Self { _file: f, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
