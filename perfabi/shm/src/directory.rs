//! Segment directories (`spec/PERFABI.md` §15): where writers put their
//! segments so that one reader sees them all, and which names in such a
//! directory are segments.
//!
//! One home for the rules writers and readers share:
//!
//! * the default directory: `$PERFABI_DIR` if set and not empty, else
//!   `/dev/shm/perfabi-<euid>` ([`default_dir`]);
//! * how a writer prepares it ([`prepare`]: created `0755` if absent, then it
//!   must be owned by root or the writer's user and not replaceable by
//!   others, §11.1);
//! * segment file names, unique per process and per creation
//!   (`<name>.<pid>.<nonce>.perfabi`, [`SegmentName`]), so a restarted worker
//!   never reuses a dead one's file;
//! * what a reader lists ([`SegmentName::parse`]): every other entry (the
//!   writers' temporary files, the lock and kept files, anything else) is
//!   not a segment and is ignored.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::safe_open::{euid, Folder, PathError};

/// The environment variable naming the directory writers use by default.
pub const ENV_DIR: &str = "PERFABI_DIR";

/// The suffix of every segment file name in a directory.
pub const SEGMENT_SUFFIX: &str = ".perfabi";

/// The longest writer name in a segment file name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

pub mod lock;
pub mod reference;

pub use lock::{LOCK_NAME, OWNER_LOCK_NAME};

/// The directory's kept file: a segment holding dead writers' counts
/// (§15.5). Not a segment name: readers open it on its own.
pub const KEPT_NAME: &str = "kept.perfabi-kept";

/// The family of a kept file listing the folded segments' identities
/// (`<pid>.<nonce>`, one member each) and each kept family's reference
/// start ([`reference::KeptIndex`]); not presented to users.
pub const FOLDED_FAMILY: &str = "perfabi.folded";

/// The most segment files of accepted owners one listing keeps (§15.2):
/// past it, the rest are not kept and the listing says so (cost bounded by
/// a stated limit, §11.4). Entries of other names, and segment names of
/// owners not accepted, do not count.
pub const MAX_ENTRIES: usize = 65_536;

/// The most directory entries one listing reads, whatever their names
/// (§15.2): a name that is not a segment name costs its directory record
/// only; a segment name costs one `fstatat`. Past it, the rest are not
/// looked at and the listing says so.
pub const MAX_SCANNED: usize = 1 << 20;

/// The most segment names of owners not accepted that a listing names
/// one by one ([`Listing::refused`]); the rest are only counted.
pub const MAX_REFUSED_NAMED: usize = 16;

/// The default directory of segments: `$PERFABI_DIR` if set and not empty,
/// else `/dev/shm/perfabi-<euid>` (a folder per user, so one user's writers
/// never need another's folder).
pub fn default_dir() -> PathBuf {
    match std::env::var_os(ENV_DIR) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(format!("/dev/shm/perfabi-{}", euid())),
    }
}

/// Opens the directory `dir` for a writer, creating it (mode `0755` less
/// the umask) if it is absent (its parent must exist), and checks it as
/// §11.1 wants a writer's folder: owned by root or the caller, and sticky
/// if group or others may write it. A directory squatted by another user
/// (say `/dev/shm/perfabi-1000` made by uid 1001) is refused.
pub fn prepare(dir: &Path) -> Result<Folder, PathError> {
    match Folder::open(dir) {
        Ok(f) => {
            f.check_private()?;
            Ok(f)
        }
        Err(e) if e.not_found() => {
            let parent = crate::safe_open::folder_of(dir);
            let name = dir.file_name().ok_or_else(|| {
                PathError::new(
                    dir,
                    crate::safe_open::Problem::Io(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "names no directory: give a path such as /dev/shm/myapp",
                    )),
                )
            })?;
            let p = Folder::open(parent)?;
            p.mkdir(name, 0o755)
                .map_err(|e| PathError::new(dir, crate::safe_open::Problem::Io(e)))?;
            let f = Folder::open(dir)?;
            f.check_private()?;
            Ok(f)
        }
        Err(e) => Err(e),
    }
}

/// Whether `name` may name a writer in a segment file name: 1 to
/// [`MAX_NAME_LEN`] bytes of ASCII letters, digits, `_` and `-`.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `name` made valid ([`valid_name`]): other bytes become `_`, cut to
/// [`MAX_NAME_LEN`] bytes; an empty name becomes `perfabi`.
pub fn sanitize_name(name: &str) -> String {
    let s: String = name
        .bytes()
        .take(MAX_NAME_LEN)
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                b as char
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "perfabi".into()
    } else {
        s
    }
}

/// This program's name, made valid for a segment file name (the file name
/// of `/proc/self/exe`'s link as the process was started, `argv[0]`'s last
/// component).
pub fn program_name() -> String {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let base = Path::new(&arg0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    sanitize_name(&base)
}

/// The name of a segment file in a directory:
/// `<name>.<pid>.<nonce>.perfabi`, the nonce 16 lowercase hex digits drawn
/// at random for each creation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentName {
    /// The writer's name ([`valid_name`]).
    pub name: String,
    /// The creating process's pid.
    pub pid: u32,
    /// Random per creation, never 0.
    pub nonce: u64,
}

impl SegmentName {
    /// A new name for a segment of the writer `name` in this process; an
    /// invalid `name` is refused with a message that says what is allowed.
    pub fn new(name: &str) -> io::Result<Self> {
        if !valid_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "invalid writer name \"{}\": use 1 to {MAX_NAME_LEN} ASCII letters, digits, '_' or '-'",
                    perfabi::text::escape(name.as_bytes())
                ),
            ));
        }
        let mut nonce = [0u8; 8];
        rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())?;
        Ok(Self {
            name: name.to_owned(),
            pid: std::process::id(),
            nonce: u64::from_ne_bytes(nonce) | 1,
        })
    }

    /// The segment this directory entry names, if it names one. Only names
    /// of exactly the form `<name>.<pid>.<nonce>.perfabi` are segments
    /// (pid in decimal without a leading zero, nonce 16 lowercase hex
    /// digits, not 0); temporary files (starting with `.`), the lock and
    /// kept files and anything else are not.
    pub fn parse(entry: &OsStr) -> Option<Self> {
        let s = std::str::from_utf8(entry.as_bytes()).ok()?;
        let rest = s.strip_suffix(SEGMENT_SUFFIX)?;
        let mut parts = rest.rsplitn(3, '.');
        let nonce = parts.next()?;
        let pid = parts.next()?;
        let name = parts.next()?;
        if !valid_name(name)
            || nonce.len() != 16
            || !nonce
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            || pid.is_empty()
            || pid.len() > 10
            || !pid.bytes().all(|b| b.is_ascii_digit())
            || (pid.len() > 1 && pid.starts_with('0'))
        {
            return None;
        }
        let nonce = u64::from_str_radix(nonce, 16).ok().filter(|&n| n != 0)?;
        let pid = pid.parse::<u32>().ok()?;
        Some(Self {
            name: name.to_owned(),
            pid,
            nonce,
        })
    }
}

impl SegmentName {
    /// The identity a kept file lists for it: `<pid>.<nonce>` (16 hex
    /// digits).
    pub fn identity(&self) -> String {
        format!("{}.{:016x}", self.pid, self.nonce)
    }
}

/// What [`list`] found in a directory.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// Segment names whose owner was accepted, sorted (at most
    /// [`MAX_ENTRIES`]).
    pub names: std::collections::BTreeSet<SegmentName>,
    /// Segment names whose owner was not accepted, with that owner: the
    /// first [`MAX_REFUSED_NAMED`] met.
    pub refused: Vec<(SegmentName, u32)>,
    /// How many segment names had an owner not accepted (all, named or
    /// not).
    pub refused_count: usize,
    /// Names starting with `.` (temporary files: a fold removes its own
    /// and dead writers'), at most [`MAX_ENTRIES`].
    pub hidden: Vec<std::ffi::OsString>,
    /// More than [`MAX_SCANNED`] entries: the rest were not looked at.
    pub truncated: bool,
    /// More than [`MAX_ENTRIES`] segment names of accepted owners: the
    /// rest were not kept.
    pub full: bool,
}

/// Lists the open directory `folder` (§15.2): at most [`MAX_SCANNED`]
/// entries are read. A name that is not a segment name is skipped at the
/// cost of its directory record (a name starting with `.` is kept in
/// [`Listing::hidden`]); a segment name is kept without a look if `known`
/// says the caller holds it open already (its owner checked then), else
/// looked at with one `fstatat` (no link followed, nothing opened) and
/// kept if `accept` takes its owner's uid, else counted as refused. So
/// entries of other users, of any name, never take the place of the
/// accepted owners' segments.
pub fn list(
    folder: &Folder,
    known: impl Fn(&SegmentName) -> bool,
    accept: impl Fn(u32) -> bool,
) -> io::Result<Listing> {
    list_within(folder, known, accept, MAX_SCANNED)
}

/// [`list`], reading at most `max_scanned` entries.
fn list_within(
    folder: &Folder,
    known: impl Fn(&SegmentName) -> bool,
    accept: impl Fn(u32) -> bool,
    max_scanned: usize,
) -> io::Result<Listing> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        folder.fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut out = Listing::default();
    let mut seen = 0usize;
    let mut entries = rustix::fs::Dir::read_from(&fd)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        seen += 1;
        if seen > max_scanned {
            out.truncated = true;
            break;
        }
        let Some(n) = SegmentName::parse(name) else {
            if name.as_bytes().starts_with(b".") && out.hidden.len() < MAX_ENTRIES {
                out.hidden.push(name.to_os_string());
            }
            continue;
        };
        // An entry that cannot be looked at is kept: its open reports why.
        let uid = if known(&n) {
            None
        } else {
            match folder.stat(name) {
                Ok(Some(e)) => Some(e.uid),
                Ok(None) => continue, // removed since it was listed
                Err(_) => None,
            }
        };
        if let Some(uid) = uid.filter(|&u| !accept(u)) {
            out.refused_count += 1;
            if out.refused.len() < MAX_REFUSED_NAMED {
                out.refused.push((n, uid));
            }
        } else if out.names.len() < MAX_ENTRIES {
            out.names.insert(n);
        } else {
            out.full = true;
        }
    }
    Ok(out)
}

impl fmt::Display for SegmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{:016x}{SEGMENT_SUFFIX}",
            self.name, self.pid, self.nonce
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_not_segments() {
        let n = SegmentName::new("web-worker_1").unwrap();
        let s = n.to_string();
        assert_eq!(SegmentName::parse(OsStr::new(&s)), Some(n.clone()));
        assert_eq!(n.pid, std::process::id());
        for bad in [
            "",
            ".perfabi",
            "a.1.0000000000000000.perfabi",
            "a.01.00000000000000ff.perfabi",
            "a.1.00000000000000FF.perfabi",
            "a.1.00000000000000ff.perfabi.tmp",
            ".a.1.00000000000000ff.perfabi.5.0123456789abcdef.tmp",
            "a.b.1.00000000000000ff.perfabi",
            "a.99999999999.00000000000000ff.perfabi",
            "fold.lock",
            "fold.owner.lock",
            ".fold.lock.1.00000000000000ff.tmp",
            "kept.perfabi-kept",
        ] {
            assert_eq!(SegmentName::parse(OsStr::new(bad)), None, "{bad}");
        }
        assert!(SegmentName::parse(OsStr::new("a.1.00000000000000ff.perfabi")).is_some());
        assert!(SegmentName::new("a.b").is_err());
        assert!(SegmentName::new(&"x".repeat(65)).is_err());
        assert_eq!(sanitize_name("my app.py"), "my_app_py");
        assert_eq!(sanitize_name(""), "perfabi");
    }

    /// Entries of other names cost only their record and never count
    /// toward [`MAX_ENTRIES`]; segment names of owners not accepted are
    /// counted apart; the scan itself stops at its bound, and says so.
    #[test]
    fn other_entries_never_take_a_segments_place_and_the_scan_is_bounded() {
        let top = tempfile::tempdir().unwrap();
        for k in 0..100 {
            std::fs::File::create(top.path().join(format!("junk{k}"))).unwrap();
        }
        std::fs::File::create(
            top.path()
                .join(".w.1.00000000000000ff.perfabi.7.00000000000000aa.tmp"),
        )
        .unwrap();
        for k in 1..=3 {
            std::fs::File::create(top.path().join(format!("w.{k}.00000000000000ff.perfabi")))
                .unwrap();
        }
        let folder = Folder::open(top.path()).unwrap();
        let all = list(&folder, |_| false, |uid| uid == euid()).unwrap();
        assert_eq!(all.names.len(), 3);
        assert_eq!(all.hidden.len(), 1);
        assert!(!all.truncated && !all.full && all.refused_count == 0);
        let none = list(&folder, |_| false, |_| false).unwrap();
        assert!(none.names.is_empty());
        assert_eq!((none.refused_count, none.refused.len()), (3, 3));
        assert!(none.refused.iter().all(|(_, uid)| *uid == euid()));
        // A name the caller holds open is kept without a look.
        let held = list(&folder, |n| n.pid == 1, |_| false).unwrap();
        assert_eq!((held.names.len(), held.refused_count), (1, 2));
        let cut = list_within(&folder, |_| false, |_| true, 50).unwrap();
        assert!(cut.truncated);
        assert!(cut.names.len() <= 3);
        let exact = list_within(&folder, |_| false, |_| true, 104).unwrap();
        assert!(!exact.truncated);
        assert_eq!(exact.names.len(), 3);
    }

    #[test]
    fn two_creations_never_share_a_name() {
        let a = SegmentName::new("w").unwrap();
        let b = SegmentName::new("w").unwrap();
        assert_ne!(a.to_string(), b.to_string());
    }
}
