//! The folder the agent keeps its own state in (the saved counter
//! numbers), opened and written as untrusted paths are (`perfabi_shm::safe_open`):
//! no symbolic link followed unless root or the agent's user owns it, the
//! folder owned by root or the agent's user and not writable by others, a
//! file read only if it is a regular file of the agent's user with one
//! link, and written whole to a new file that is then renamed over the old
//! one, so a crash leaves the old or the new contents, never a mix.
//!
//! By PCP's convention the folder is below `$PCP_VAR_DIR/config/pmda`
//! ([`default_path`]); that folder is group-writable (group `pcp`) on
//! Debian, so the agent keeps its files one level down, in a folder of its
//! own.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use perfabi_shm::safe_open::escape_path;
use perfabi_shm::safe_open::{euid, FileKind, Folder, Problem};

/// The agent's folder below PCP's `PCP_VAR_DIR` (`/var/lib/pcp` on most
/// systems): `$PCP_VAR_DIR/config/pmda/perfabi`.
pub fn default_path(pcp_var_dir: &Path) -> PathBuf {
    pcp_var_dir.join("config/pmda/perfabi")
}

/// An open state folder.
#[derive(Debug)]
pub struct StateDir {
    folder: Folder,
}

impl StateDir {
    /// Opens `path`, creating it (and its parents, mode 0755 less the
    /// umask) if it is missing; refuses a folder others could replace files
    /// in.
    pub fn open(path: &Path) -> Result<StateDir, String> {
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
        {
            // Refused or failed below; say the first reason.
            if !path.is_dir() {
                return Err(format!("cannot create {}: {e}", escape_path(path)));
            }
        }
        let folder = Folder::open(path).map_err(|e| e.to_string())?;
        folder.check_private().map_err(|e| e.to_string())?;
        Ok(StateDir { folder })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.folder.path()
    }

    /// The contents of `name`, at most `limit` bytes; `None` if there is no
    /// such file. Anything but a regular file of the agent's user with one
    /// link is refused.
    pub fn read(&self, name: &str, limit: u64) -> Result<Option<String>, String> {
        let os = OsStr::new(name);
        match self.folder.stat(os) {
            Ok(None) => return Ok(None),
            Ok(Some(_)) => {}
            Err(e) => return Err(format!("{}: {e}", self.shown(name))),
        }
        let uid = euid();
        let (file, _) = self
            .folder
            .open_read_checked(os, |e| match e.kind {
                FileKind::Regular if e.uid != uid => Err(Problem::Owner {
                    uid: e.uid,
                    expected: uid,
                }),
                FileKind::Regular if e.nlink != 1 => Err(Problem::Links(e.nlink)),
                FileKind::Regular if e.len > limit => Err(Problem::TooLarge { len: e.len, limit }),
                FileKind::Regular => Ok(()),
                k => Err(Problem::Kind(k)),
            })
            .map_err(|e| e.to_string())?;
        let mut bytes = Vec::new();
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: {e}", self.shown(name)))?;
        if bytes.len() as u64 > limit {
            return Err(format!(
                "{}: longer than {limit} bytes (it grew while read)",
                self.shown(name)
            ));
        }
        String::from_utf8(bytes).map(Some).map_err(|e| {
            format!(
                "{}: not UTF-8 text (byte {})",
                self.shown(name),
                e.utf8_error().valid_up_to()
            )
        })
    }

    /// Replaces `name` with `contents` (mode 0644 less the umask): written
    /// to a new file, flushed to disk, then renamed over `name`.
    pub fn write(&self, name: &str, contents: &str) -> Result<(), String> {
        let tmp = OsString::from(format!(".{name}.new"));
        // A leftover of a crash is ours to remove; create_new refuses
        // anything still there (a link planted since, say).
        if let Ok(Some(_)) = self.folder.stat(&tmp) {
            let _ = self.folder.unlink(&tmp);
        }
        let err = |e: std::io::Error| format!("{}: {e}", self.shown(name));
        let mut f = self.folder.create_new(&tmp, 0o644).map_err(err)?;
        let written = f.write_all(contents.as_bytes()).and_then(|()| f.sync_all());
        if let Err(e) = written {
            let _ = self.folder.unlink(&tmp);
            return Err(err(e));
        }
        drop(f);
        self.folder.rename(&tmp, OsStr::new(name)).map_err(|e| {
            let _ = self.folder.unlink(&tmp);
            err(e)
        })
    }

    /// Renames `name` to `name.bad` (replacing an older one), keeping a
    /// file that could not be read for a person to look at.
    pub fn set_aside(&self, name: &str) -> Result<String, String> {
        let bad = format!("{name}.bad");
        self.folder
            .rename(OsStr::new(name), OsStr::new(&bad))
            .map_err(|e| format!("{}: {e}", self.shown(name)))?;
        Ok(self.shown(&bad))
    }

    fn shown(&self, name: &str) -> String {
        escape_path(&self.folder.path().join(name)).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn written_files_read_back_and_replace_the_old_ones() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(&d.path().join("a/b")).unwrap();
        assert_eq!(s.read("x", 100).unwrap(), None);
        s.write("x", "one\n").unwrap();
        s.write("x", "two\n").unwrap();
        assert_eq!(s.read("x", 100).unwrap().as_deref(), Some("two\n"));
        assert!(!d.path().join("a/b/.x.new").exists());
        let e = s.read("x", 3).unwrap_err();
        assert!(e.contains("more than the limit of 3"), "{e}");
        // A leftover temporary file does not stop the next write.
        std::fs::write(d.path().join("a/b/.x.new"), "junk").unwrap();
        s.write("x", "three\n").unwrap();
        assert_eq!(s.read("x", 100).unwrap().as_deref(), Some("three\n"));
        assert_eq!(
            s.set_aside("x").unwrap(),
            d.path().join("a/b/x.bad").display().to_string()
        );
        assert_eq!(s.read("x", 100).unwrap(), None);
    }

    #[test]
    fn links_foreign_files_and_open_folders_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        std::fs::write(d.path().join("target"), "secret").unwrap();
        std::os::unix::fs::symlink(d.path().join("target"), d.path().join("link")).unwrap();
        let e = s.read("link", 100).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // Writing over a link replaces the link, never writes through it.
        s.write("link", "mine\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("target")).unwrap(),
            "secret"
        );
        std::fs::hard_link(d.path().join("target"), d.path().join("hard")).unwrap();
        let e = s.read("hard", 100).unwrap_err();
        assert!(e.contains("hard links"), "{e}");
        std::fs::create_dir(d.path().join("dir")).unwrap();
        let e = s.read("dir", 100).unwrap_err();
        assert!(e.contains("a directory"), "{e}");
        if euid() == 0 {
            std::fs::write(d.path().join("theirs"), "x").unwrap();
            std::os::unix::fs::chown(d.path().join("theirs"), Some(12345), None).unwrap();
            let e = s.read("theirs", 100).unwrap_err();
            assert!(e.contains("belongs to uid 12345"), "{e}");
        }
        std::fs::write(d.path().join("bin"), [0xffu8, 0xfe]).unwrap();
        let e = s.read("bin", 100).unwrap_err();
        assert!(e.contains("not UTF-8"), "{e}");
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = StateDir::open(&open).unwrap_err();
        assert!(e.contains("others could replace"), "{e}");
        let file = d.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(StateDir::open(&file.join("sub")).is_err());
    }
}
