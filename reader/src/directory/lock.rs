//! The reader's side of a directory's fold lock (`spec/PERFABI.md` §15.5):
//! held shared while a directory is listed and read, so that no fold
//! (which holds it exclusively) runs meanwhile.

use std::ffi::OsStr;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use perfabi_shm::directory::LOCK_NAME;
use perfabi_shm::safe_open::{FileKind, Folder};
use rustix::fs::FlockOperation;

use crate::Error;

/// Takes the lock of `folder` (the directory `dir`) shared, waiting up to
/// `patience` for a fold to finish. `None` when there is no lock file (no
/// fold has run) or this reader may not open it (another user's, mode
/// `0600`): it then reads without.
pub(super) fn shared(
    folder: &Folder,
    dir: &Path,
    patience: Duration,
) -> Result<Option<File>, Error> {
    let file = match folder.open_read(OsStr::new(LOCK_NAME), &[FileKind::Regular]) {
        Ok((f, _)) => f,
        Err(_) => return Ok(None),
    };
    let end = Instant::now() + patience;
    loop {
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
            Ok(()) => return Ok(Some(file)),
            Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => {
                return Err(Error::Io(
                    dir.join(LOCK_NAME),
                    std::io::Error::new(
                        std::io::ErrorKind::WouldBlock,
                        format!("a fold held the directory's lock longer than {patience:?}; read again ({e})"),
                    ),
                ))
            }
        }
    }
}
