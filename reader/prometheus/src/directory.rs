//! A directory of segments an endpoint serves (`spec/PERFABI.md` §15):
//! read as one at every scrape ([`perfabi_reader::directory::Directory`]:
//! new writers appear, gone ones leave, dead ones' counts stay), rendered
//! by the exposition that renders one segment, with the reader's own
//! gauges of what the read left out. A bad file or a conflicting family
//! never fails a scrape: it is a problem, logged once while it lasts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use perfabi_reader::directory::{Directory, DirectoryOptions, Problem};
use perfabi_reader::exposition::{self, Sink};
use perfabi_shm::safe_open::escape_path;

use crate::endpoint::Failure;

/// The most new problems logged by one scrape, one line each; the rest
/// are counted in one more line (a directory of 10,000 bad files costs
/// the log a few lines a scrape, not 10,000).
pub(crate) const MAX_LOGGED: usize = 20;

/// A directory, opened at the first scrape and again after a failed one,
/// and the problems logged and still present.
pub(crate) struct Served {
    path: PathBuf,
    opts: DirectoryOptions,
    dir: Option<Directory>,
    logged: BTreeSet<String>,
}

impl Served {
    /// The directory at `path`, read with `opts`.
    pub(crate) fn new(path: &Path, opts: DirectoryOptions) -> Self {
        Self {
            path: path.to_path_buf(),
            opts,
            dir: None,
            logged: BTreeSet::new(),
        }
    }

    /// One scrape: the directory read and handed to `sink` (a page's
    /// format), or the one-line reason the directory as a whole could not
    /// be read (then it is opened again at the next scrape).
    pub(crate) fn walk(&mut self, sink: &mut impl Sink) -> Result<(), Failure> {
        let reason = |e: perfabi_reader::Error| Failure {
            code: e.code(),
            reason: format!("cannot read the directory {}: {e}", escape_path(&self.path)),
        };
        let dir = match &mut self.dir {
            Some(d) => d,
            None => self
                .dir
                .insert(Directory::open(&self.path, self.opts.clone()).map_err(reason)?),
        };
        match dir.read() {
            Ok(scrape) => {
                let left_out = exposition::walk_directory(sink, &scrape);
                self.note(scrape.problems.iter().chain(&left_out));
                Ok(())
            }
            Err(e) => {
                self.dir = None;
                Err(reason(e))
            }
        }
    }

    /// Logs each of `problems` not logged since it last appeared (at most
    /// [`MAX_LOGGED`] a scrape, and how many wait their turn), and forgets
    /// those gone, so that one that comes back is logged again.
    fn note<'a>(&mut self, problems: impl Iterator<Item = &'a Problem>) {
        let now: BTreeSet<&str> = problems.map(|p| p.message.as_str()).collect();
        self.logged.retain(|m| now.contains(m.as_str()));
        let (mut said, mut unsaid) = (0usize, 0usize);
        for m in now {
            if self.logged.contains(m) {
                continue;
            }
            if said < MAX_LOGGED {
                // The reader's message escapes what it quotes.
                eprintln!("perfabi-prometheus: {m} (served without it)");
                self.logged.insert(m.to_string());
                said += 1;
            } else {
                unsaid += 1;
            }
        }
        if unsaid > 0 {
            eprintln!(
                "perfabi-prometheus: {unsaid} more problems in {}, logged at the next scrapes \
                 (perfabi_directory_problems counts them all)",
                escape_path(&self.path)
            );
        }
    }
}
