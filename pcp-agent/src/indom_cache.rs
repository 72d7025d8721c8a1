//! An instance domain whose instance ids libpcp_pmda's instance cache
//! (`pmdaCache(3)`) gives out and keeps, as PCP's own dynamic agents do: a
//! name keeps its id while it is in the cache, ids are never given to
//! another name, and the cache is saved to (and loaded from) PCP's usual
//! file, `$PCP_VAR_DIR/config/pmda/<domain>.<serial>`, so that ids outlive
//! the agent. While a cache exists, libpcp_pmda answers instance requests
//! and walks fetches from it.
//!
//! libpcp_pmda opens that file itself (`fopen`), in a folder group `pcp`
//! may write on Debian; before each load and save the agent checks that
//! the file is absent or a regular file of its own user with one link, and
//! refuses (ids then live in memory only) anything else, such as a
//! symbolic link planted there.

use std::ffi::{c_int, CString};
use std::path::{Path, PathBuf};

use perfabi_shm::safe_open::escape_path;
use perfabi_shm::safe_open::{euid, FileKind, Folder};

use crate::ffi::*;

/// One cached instance domain.
pub struct CachedIndom {
    pcp: &'static Pcp,
    indom: pmInDom,
    /// `$PCP_VAR_DIR/config/pmda`, where libpcp_pmda keeps the file; `None`:
    /// ids are not saved.
    dir: Option<PathBuf>,
}

impl CachedIndom {
    /// The cache of `indom`, with the ids saved in `dir` (the folder
    /// libpcp_pmda uses, `$PCP_VAR_DIR/config/pmda`) loaded; `dir` `None`:
    /// nothing is loaded or saved. Returns a line to log if the saved ids
    /// could not be loaded.
    pub fn open(
        pcp: &'static Pcp,
        indom: pmInDom,
        dir: Option<&Path>,
    ) -> (CachedIndom, Option<String>) {
        let c = CachedIndom {
            pcp,
            indom,
            dir: dir.map(Path::to_path_buf),
        };
        let mut problem = None;
        if c.dir.is_some() {
            problem = match c.check_file() {
                Err(e) => Some(format!("instance ids not loaded: {e}")),
                Ok(false) => None,
                Ok(true) => {
                    let n = pcp.cache_op(indom, CacheOp::Load);
                    (n < 0).then(|| {
                        format!(
                            "instance ids not loaded from {}: {}",
                            escape_path(&c.file()),
                            pcp.err_str(n)
                        )
                    })
                }
            };
        }
        // A cache that exists (even empty) is what libpcp_pmda serves from.
        pcp.cache_op(indom, CacheOp::Inactive);
        (c, problem)
    }

    /// The instance domain.
    pub fn indom(&self) -> pmInDom {
        self.indom
    }

    /// `<domain>.<serial>`, the file's name (as `pmInDomStr` writes it).
    fn file(&self) -> PathBuf {
        let name = format!("{}.{}", self.indom >> 22, self.indom & 0x3f_ffff);
        self.dir.as_deref().unwrap_or(Path::new("")).join(name)
    }

    /// Whether the saved file exists; an error if it is anything but a
    /// regular file of the agent's user with one link.
    fn check_file(&self) -> Result<bool, String> {
        let Some(dir) = &self.dir else {
            return Ok(false);
        };
        let folder = match Folder::open(dir) {
            Ok(f) => f,
            Err(e) if e.not_found() => return Ok(false),
            Err(e) => return Err(e.to_string()),
        };
        let path = self.file();
        let name = path.file_name().expect("a file name");
        match folder.stat(name) {
            Ok(None) => Ok(false),
            Err(e) => Err(format!("{}: {e}", escape_path(&path))),
            Ok(Some(e)) if e.kind != FileKind::Regular => {
                Err(format!("{} is {}", escape_path(&path), e.kind.describe()))
            }
            Ok(Some(e)) if e.uid != euid() => Err(format!(
                "{} belongs to uid {}, not to this user (uid {})",
                escape_path(&path),
                e.uid,
                euid()
            )),
            Ok(Some(e)) if e.nlink != 1 => {
                Err(format!("{} has {} hard links", escape_path(&path), e.nlink))
            }
            Ok(Some(_)) => Ok(true),
        }
    }

    /// Marks every instance inactive (before the current ones are added).
    pub fn hide_all(&self) {
        self.pcp.cache_op(self.indom, CacheOp::Inactive);
    }

    /// The id of `name`, made active: its old id if the cache has it, else
    /// a new one, never given out before in this cache.
    pub fn add(&self, name: &str) -> Result<c_int, String> {
        let n = CString::new(name).map_err(|_| format!("instance name {name:?} holds a NUL"))?;
        let id = self.pcp.cache_store(self.indom, CacheStore::Add, &n);
        if id < 0 {
            return Err(format!("instance {name}: {}", self.pcp.err_str(id)));
        }
        Ok(id)
    }

    /// Forgets `name`: it is no longer served or saved (if it comes back,
    /// it gets a new id).
    pub fn cull(&self, name: &str) {
        if let Ok(n) = CString::new(name) {
            // An unknown name is an error we ignore.
            self.pcp.cache_store(self.indom, CacheStore::Cull, &n);
        }
    }

    /// Every name in the cache, active or not (with its id).
    pub fn names(&self) -> Vec<(c_int, String)> {
        let pcp = self.pcp;
        // Only active instances are walked: make all active, walk, hide.
        pcp.cache_op(self.indom, CacheOp::Active);
        pcp.cache_op(self.indom, CacheOp::WalkRewind);
        let mut out = Vec::new();
        loop {
            let inst = pcp.cache_op(self.indom, CacheOp::WalkNext);
            if inst < 0 {
                break;
            }
            if let Some(name) = pcp.cache_name(self.indom, inst) {
                out.push((inst, name));
            }
        }
        self.hide_all();
        out
    }

    /// Saves the cache if instances were added or culled since it was
    /// loaded or saved (and ids are saved at all).
    pub fn save(&self) -> Result<(), String> {
        if self.dir.is_none() {
            return Ok(());
        }
        self.check_file()
            .map_err(|e| format!("instance ids not saved: {e}"))?;
        let n = self.pcp.cache_op(self.indom, CacheOp::Save);
        if n < 0 {
            return Err(format!(
                "instance ids not saved to {}: {}",
                escape_path(&self.file()),
                self.pcp.err_str(n)
            ));
        }
        Ok(())
    }
}
