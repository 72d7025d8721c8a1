//! The reader's side of a directory's fold lock (`spec/PERFABI.md` §15.5,
//! `perfabi_shm::directory::lock`): held to read while a directory is
//! listed and read, so that no fold (which holds it alone) runs meanwhile;
//! a read during which a fold replaced the lock is read again.

use std::path::Path;
use std::time::{Duration, Instant};

use perfabi_shm::directory::lock::{self, ReadLock, ReadLockError};
use perfabi_shm::directory::LOCK_NAME;
use perfabi_shm::safe_open::Folder;

use crate::Error;

fn busy(dir: &Path, patience: Duration, what: &str) -> Error {
    Error::Io(
        dir.join(LOCK_NAME),
        std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            format!("{what} for {patience:?} (the reader's busy timeout); read again"),
        ),
    )
}

/// Runs `read` under the read lock of `folder` (the directory `dir`),
/// taken within `patience`, and again while a fold replaced the lock
/// during it, until `patience` has passed since the first attempt; then
/// fails with a message to read again. Without a lock file this reader
/// may open (no fold ran yet, or another user's `0600` lock) it reads
/// once, without.
pub(super) fn read_under<T>(
    folder: &Folder,
    dir: &Path,
    patience: Duration,
    mut read: impl FnMut() -> Result<T, Error>,
) -> Result<T, Error> {
    let end = Instant::now() + patience;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let held: ReadLock = match lock::for_reader(folder, left) {
            Ok(l) => l,
            Err(ReadLockError::Busy) => {
                return Err(busy(dir, patience, "a fold held the directory's lock"))
            }
            Err(ReadLockError::Io(e)) => return Err(Error::Io(dir.join(LOCK_NAME), e)),
        };
        let out = read()?;
        match held.still_current(folder) {
            Ok(true) => return Ok(out),
            Ok(false) if Instant::now() < end => continue,
            Ok(false) => {
                return Err(busy(
                    dir,
                    patience,
                    "folds replaced the directory's lock during every read",
                ))
            }
            Err(e) => return Err(Error::Io(dir.join(LOCK_NAME), e)),
        }
    }
}
