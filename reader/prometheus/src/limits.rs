//! The bounds the endpoint keeps whatever its clients do: how long a
//! request head, an answer and an idle connection may take, how many
//! connections and scrapes it holds at once, and the open-file limit those
//! connections need.

use std::time::Duration;

/// Largest request head (request line and headers) read, in bytes; a
/// longer one is answered `431` and the connection closed. (hyper's
/// smallest read buffer, so the head is refused as soon as it outgrows it.)
pub const MAX_HEAD: usize = 8192;
/// Most headers in a request; more are answered `431`.
pub const MAX_HEADERS: usize = 64;
/// Default of [`Limits::read_timeout`].
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Default of [`Limits::write_timeout`].
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`Limits::idle_timeout`]: longer than Prometheus' default
/// scrape interval (1 min), so that its kept-alive connection is reused.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default of [`Limits::max_connections`].
pub const MAX_CONNECTIONS: usize = 1024;
/// Default of [`Limits::max_requests`] (node_exporter's
/// `--web.max-requests`).
pub const MAX_REQUESTS: usize = 40;
/// Default of [`Limits::max_page_bytes`]: 128 MiB, six pages of 20 MB (a
/// page of 4,000 counters on 64 CPUs, one series each).
pub const MAX_PAGE_BYTES: usize = 128 << 20;
/// File descriptors kept for everything but connections: the listener,
/// the segment, the runtime's epoll and event descriptors, standard I/O.
pub const RESERVED_FDS: u64 = 32;

/// What the endpoint allows each connection and all of them together.
///
/// A connection is *idle* from its accept, and again from the moment its
/// last answer was handed whole to the kernel, until the first byte of its
/// next request arrives; it is then *reading a head* until the head is
/// complete, and *answering* (taking the snapshot, rendering the page and
/// sending it) until the answer is sent whole. Each phase has its own
/// deadline, counted from its start; a connection whose deadline passes is
/// closed, whatever it was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a request head may take, from its first byte to its last
    /// (a client trickling it is answered `408` and closed when this
    /// passes).
    pub read_timeout: Duration,
    /// How long an answer may take, from the end of the request head to
    /// the last byte handed to the kernel (a client reading slowly is
    /// closed when this passes, whatever it has read).
    pub write_timeout: Duration,
    /// How long a connection may sit idle (before its first request, or
    /// between two requests on a kept-alive connection).
    pub idle_timeout: Duration,
    /// Most connections open at once. A connection accepted at the bound
    /// closes the one that has waited on its client the longest: idle
    /// (since its accept or its last answer), reading a head (since its
    /// first byte), or answering with its answer stalled, the client not
    /// reading (since the last byte it took, 100 ms ago at least). If none
    /// waits on its client (all have answers being prepared or read as
    /// they come), accepting waits until one does, or ends (each ends
    /// within its deadlines), and new connections wait in the kernel's
    /// listen queue.
    pub max_connections: usize,
    /// Most scrapes (`/metrics` answers, from before the snapshot until
    /// the page is handed whole to the kernel) in flight at once.
    ///
    /// A scrape beyond it, or beyond [`Limits::max_page_bytes`], closes
    /// the scrape whose answer has been stalled the longest (its client
    /// not reading) and takes its place; if none is stalled, it waits for
    /// room in line with the others (first come, first served; the first
    /// in line closes a scrape as soon as one stalls). It waits at most
    /// half its [`Limits::write_timeout`], and is answered `503` then.
    pub max_requests: usize,
    /// Most bytes the pages of the scrapes in flight hold together (each
    /// page is held whole until sent): a scrape is let in if its page, of
    /// the size of the last one, fits beside them; one scrape always is.
    pub max_page_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            read_timeout: READ_TIMEOUT,
            write_timeout: WRITE_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_requests: MAX_REQUESTS,
            max_page_bytes: MAX_PAGE_BYTES,
        }
    }
}

/// Raises the soft limit on open files to the hard one (as Go programs do
/// at start: the soft limit, often 1,024, is a guard for programs that use
/// `select`, which this one does not), and returns the soft limit now in
/// force (`None`: unlimited). If raising fails, the soft limit stays as it
/// was.
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (lim.current, lim.maximum) {
        if current < maximum
            && setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(maximum),
                    maximum: Some(maximum),
                },
            )
            .is_ok()
        {
            return Some(maximum);
        }
    }
    lim.current
}

/// `wanted` connections, or fewer if the open-file limit `open_files`
/// (after [`RESERVED_FDS`]) cannot hold them; at least one.
pub fn connections_within(wanted: usize, open_files: Option<u64>) -> usize {
    let room = open_files.map_or(u64::MAX, |n| n.saturating_sub(RESERVED_FDS));
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    wanted.min(room).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_fit_the_open_file_limit() {
        assert_eq!(connections_within(1024, None), 1024);
        assert_eq!(connections_within(1024, Some(20_000)), 1024);
        assert_eq!(connections_within(1024, Some(1024)), 1024 - 32);
        assert_eq!(connections_within(1024, Some(10)), 1);
    }

    /// After raising, the soft limit is the hard one (unless the hard one
    /// is unlimited).
    #[test]
    fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
        use rustix::process::{getrlimit, Resource};
        let now = raise_open_file_limit();
        let lim = getrlimit(Resource::Nofile);
        assert_eq!(now, lim.current);
        // An unlimited hard limit is left alone: no soft one is unlimited.
        if lim.maximum.is_some() {
            assert_eq!(lim.current, lim.maximum);
        }
    }
}
