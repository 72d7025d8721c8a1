//! The open connections: what each is doing (idle, reading a head,
//! answering) and since when, hence its deadline; and the bound on how many
//! are open, kept by closing the one that has waited on its client the
//! longest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::limits::Limits;

/// How long the writes of an answer must have found the socket full, with
/// nothing written since, for the answer to count as stalled: its client
/// has stopped reading. A client reading its page as it comes leaves them
/// blocked for milliseconds at a time.
pub(crate) const STALLED_AFTER: Duration = Duration::from_millis(100);

/// How often an admission at the bound, or a scrape waiting for room,
/// looks again for a connection to close (connections go idle, and
/// answers stall, without anything waking them).
pub(crate) const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// What a connection is doing, as far as its deadline goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the first byte of a request (after the accept, or after
    /// the last answer was handed whole to the kernel).
    Idle,
    /// Between the first byte of a request head and its end.
    Head,
    /// From the end of the head to the last byte of the answer handed to
    /// the kernel.
    Answer,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// When `phase` began.
    since: Instant,
    /// The answer's body was dropped by hyper (sent to its buffer, or not
    /// to be sent): the answer ends at the next flush.
    body_done: bool,
    /// Closed to make room for a new connection: its task drops it.
    evicted: bool,
    /// How it ends, once its task closes it.
    ending: Ending,
    /// Since when the writes of its answer have found the socket full,
    /// nothing written since: it waits for its client to read.
    blocked_since: Option<Instant>,
    /// What answers whose bodies hyper has taken hold until hyper's buffer
    /// is handed whole to the kernel (a scrape's place among
    /// `--max-requests`: the page is in hyper's buffer until then).
    held: Vec<Held>,
    /// Scrape places it holds (see `scrapes`).
    scrapes: usize,
}

/// What an answer holds until it is sent (dropped then).
pub(crate) struct Held {
    _dropped_when_sent: Box<dyn Send>,
}

impl Held {
    /// `what`, held until the answer is sent.
    pub(crate) fn new(what: impl Send + 'static) -> Self {
        Self {
            _dropped_when_sent: Box::new(what),
        }
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

/// How a connection closed by its task ([`Conn::expire`]) ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Not closed by its task (yet), or closed by the client.
    Open,
    /// Idle: closed in good order.
    Closed,
    /// Its request head did not arrive whole by the deadline: told so
    /// (`408`), then closed.
    HeadTimedOut,
    /// In the middle of an answer, or closed to make room while not idle:
    /// reset, so that what the kernel still holds for it is dropped, not
    /// sent.
    Aborted,
}

/// One connection's phase, shared by its I/O (which sees the bytes), its
/// service (which sees the requests and answers) and its task (which
/// closes it when its deadline passes or it is evicted).
#[derive(Debug)]
pub(crate) struct Conn {
    state: Mutex<State>,
    /// Notified when the deadline may have moved or the connection was
    /// evicted: its task re-reads it.
    changed: Notify,
}

impl Conn {
    fn new() -> Self {
        Self {
            state: Mutex::new(State {
                phase: Phase::Idle,
                since: Instant::now(),
                body_done: false,
                evicted: false,
                ending: Ending::Open,
                blocked_since: None,
                held: Vec::new(),
                scrapes: 0,
            }),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn enter(&self, s: &mut State, phase: Phase) {
        s.phase = phase;
        s.since = Instant::now();
        s.blocked_since = None;
        self.changed.notify_one();
    }

    /// Bytes of a request arrived: an idle connection now reads a head.
    pub(crate) fn bytes_read(&self) {
        let mut s = self.state();
        if s.phase == Phase::Idle && !s.evicted {
            self.enter(&mut s, Phase::Head);
        }
    }

    /// A whole request head was read: the answer begins.
    pub(crate) fn request(&self) {
        let mut s = self.state();
        s.body_done = false;
        self.enter(&mut s, Phase::Answer);
    }

    /// hyper dropped the answer's body: what is left of it sits in hyper's
    /// buffer, handed to the kernel before the next flush completes; what
    /// the answer `held` is kept until then.
    pub(crate) fn body_done(&self, held: Option<Held>) {
        let mut s = self.state();
        s.body_done = true;
        s.held.extend(held);
    }

    /// Everything hyper had buffered was handed to the kernel: the answers
    /// whose bodies it took are sent (what they held is dropped), and if
    /// the last one's body is done the connection is idle.
    pub(crate) fn flushed(&self) {
        let sent = {
            let mut s = self.state();
            if s.phase == Phase::Answer && s.body_done {
                s.body_done = false;
                self.enter(&mut s, Phase::Idle);
            }
            std::mem::take(&mut s.held)
        };
        drop(sent); // outside the lock: a place's drop may wake others
    }

    /// A write of the answer found the socket full (`true`: the client is
    /// not reading), or went through (`false`).
    pub(crate) fn write_stalled(&self, stalled: bool) {
        let mut s = self.state();
        if !stalled {
            s.blocked_since = None;
        } else if s.blocked_since.is_none() {
            s.blocked_since = Some(Instant::now());
        }
    }

    /// It took a scrape place.
    pub(crate) fn scrape_began(&self) {
        self.state().scrapes += 1;
    }

    /// Whether it holds a scrape place.
    pub(crate) fn holds_scrape(&self) -> bool {
        self.state().scrapes > 0
    }

    /// It gave a scrape place back.
    pub(crate) fn scrape_ended(&self) {
        let mut s = self.state();
        s.scrapes = s.scrapes.saturating_sub(1);
    }

    /// When the connection must be closed: the end of its phase's time, or
    /// now if it was evicted.
    pub(crate) fn deadline(&self, limits: &Limits) -> Instant {
        let s = self.state();
        if s.evicted {
            return s.since; // in the past
        }
        s.since
            + match s.phase {
                Phase::Idle => limits.idle_timeout,
                Phase::Head => limits.read_timeout,
                Phase::Answer => limits.write_timeout,
            }
    }

    /// Its deadline passed, or it was evicted (its task closes it now):
    /// how it ends.
    pub(crate) fn expire(&self) {
        let mut s = self.state();
        s.ending = match (s.phase, s.evicted) {
            (Phase::Idle, _) => Ending::Closed,
            (Phase::Head, false) => Ending::HeadTimedOut,
            _ => Ending::Aborted,
        };
    }

    /// How it ends (see [`Conn::expire`]).
    pub(crate) fn ending(&self) -> Ending {
        self.state().ending
    }

    /// Whether it was closed to make room.
    #[cfg(test)]
    pub(crate) fn evicted(&self) -> bool {
        self.state().evicted
    }

    /// Waits until the deadline may have moved.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Since when it has waited on its client, if it does: idle (since it
    /// became idle), reading a head (since its first byte), or answering
    /// with its answer stalled (since its writes found the socket full,
    /// [`STALLED_AFTER`] ago at least). An answer being prepared, or sent
    /// as fast as it is read, waits on no client.
    fn waiting_since(s: &State) -> Option<Instant> {
        if s.evicted {
            return None;
        }
        match s.phase {
            Phase::Idle | Phase::Head => Some(s.since),
            Phase::Answer => s.blocked_since.filter(|t| t.elapsed() >= STALLED_AFTER),
        }
    }

    /// Evicts the connection if it waits on its client and `which` picks
    /// it; returns whether it did.
    fn evict_if_waiting(&self, which: impl Fn(&State) -> bool) -> bool {
        let mut s = self.state();
        let waiting = which(&s) && Self::waiting_since(&s).is_some();
        if waiting {
            s.evicted = true;
            self.changed.notify_one();
        }
        waiting
    }
}

/// The open connections, at most `limit`.
#[derive(Debug)]
pub(crate) struct Table {
    limit: usize,
    conns: Mutex<Conns>,
    /// A connection ended: an accept waiting for room may go on.
    freed: Notify,
}

#[derive(Debug, Default)]
struct Conns {
    next: u64,
    open: HashMap<u64, Arc<Conn>>,
}

/// A connection's place in the [`Table`], given back when dropped.
pub(crate) struct Slot {
    table: Arc<Table>,
    id: u64,
    /// The connection's phase.
    pub(crate) conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.conns().open.remove(&self.id);
        self.table.freed.notify_one();
    }
}

impl Table {
    /// A table of at most `limit` connections (at least one).
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            conns: Mutex::new(Conns::default()),
            freed: Notify::new(),
        }
    }

    fn conns(&self) -> MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many connections are open.
    pub(crate) fn len(&self) -> usize {
        self.conns().open.len()
    }

    /// A place for a connection just accepted: at the bound, the
    /// connection that has waited on its client the longest (idle, reading
    /// a head, or with its answer stalled) is closed to make room, and its
    /// place taken once it is closed (a connection counts until its socket
    /// is closed, so that the bound holds for descriptors too); if none
    /// waits on its client, waits until one does, or ends.
    pub(crate) async fn admit(self: &Arc<Self>) -> Slot {
        loop {
            // Registered before looking, so that a connection ending after
            // the look wakes this wait.
            let freed = self.freed.notified();
            {
                let mut conns = self.conns();
                if conns.open.len() < self.limit {
                    let id = conns.next;
                    conns.next += 1;
                    let conn = Arc::new(Conn::new());
                    conns.open.insert(id, Arc::clone(&conn));
                    return Slot {
                        table: Arc::clone(self),
                        id,
                        conn,
                    };
                }
                // One closing already makes room: evict no more.
                if !conns.open.values().any(|c| c.state().evicted) {
                    let _ = Self::evict_longest_waiting(&conns, |_| true);
                }
            }
            // Woken when a connection ends; and looking again meanwhile,
            // for one gone idle or stalled since.
            let _ = tokio::time::timeout(LOOK_AGAIN, freed).await;
        }
    }

    /// Closes the connection that has waited on its client the longest,
    /// if any waits (to make room, or to free a file descriptor); returns
    /// whether one was.
    pub(crate) fn close_longest_waiting(&self) -> bool {
        Self::evict_longest_waiting(&self.conns(), |_| true).is_some()
    }

    /// Closes the connection holding a scrape place whose answer has been
    /// stalled the longest, if any is, to make room for another scrape;
    /// the one closed.
    pub(crate) fn close_longest_stalled_scrape(&self) -> Option<Weak<Conn>> {
        Self::evict_longest_waiting(&self.conns(), |s| s.scrapes > 0)
    }

    /// Evicts, of the connections `which` picks, the one that has waited
    /// on its client the longest; the one evicted. A client that
    /// sends its head in one piece and reads its answer as it comes waits
    /// on nothing but the endpoint; one that trickles its head or does not
    /// read is what the bounds must be kept against, as is one idle long.
    fn evict_longest_waiting(conns: &Conns, which: impl Fn(&State) -> bool) -> Option<Weak<Conn>> {
        // A connection may stop waiting between the look and the eviction:
        // try the next then.
        loop {
            let longest = conns
                .open
                .iter()
                .filter_map(|(id, c)| {
                    let s = c.state();
                    which(&s)
                        .then(|| Conn::waiting_since(&s))
                        .flatten()
                        .map(|t| (t, *id))
                })
                .min();
            let (_, id) = longest?;
            let conn = &conns.open[&id];
            if conn.evict_if_waiting(&which) {
                // Its task closes it at once, and frees its slot.
                return Some(Arc::downgrade(conn));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> Limits {
        Limits {
            read_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(3),
            ..Limits::default()
        }
    }

    /// Idle, then a head, then an answer, then idle again once the body is
    /// done and flushed: each phase's deadline, counted from its start.
    #[tokio::test(start_paused = true)]
    async fn each_phase_has_its_deadline() {
        let table = Arc::new(Table::new(4));
        let slot = table.admit().await;
        let c = &slot.conn;
        let t0 = Instant::now();
        assert_eq!(c.deadline(&limits()), t0 + Duration::from_secs(3));
        tokio::time::advance(Duration::from_millis(500)).await;
        c.bytes_read();
        let t1 = Instant::now();
        assert_eq!(c.deadline(&limits()), t1 + Duration::from_secs(1));
        c.bytes_read(); // more of the same head: the deadline stays
        assert_eq!(c.deadline(&limits()), t1 + Duration::from_secs(1));
        tokio::time::advance(Duration::from_millis(500)).await;
        c.request();
        let t2 = Instant::now();
        assert_eq!(c.deadline(&limits()), t2 + Duration::from_secs(2));
        c.flushed(); // the head of the answer flushed, the body not done
        c.bytes_read(); // a pipelined request: still answering
        assert_eq!(c.deadline(&limits()), t2 + Duration::from_secs(2));
        tokio::time::advance(Duration::from_millis(500)).await;
        c.body_done(None);
        assert_eq!(c.deadline(&limits()), t2 + Duration::from_secs(2));
        c.flushed();
        let t3 = Instant::now();
        assert_eq!(c.deadline(&limits()), t3 + Duration::from_secs(3));
    }

    /// Admits a connection in a task of its own (at the bound, it waits
    /// for an evicted one to be closed, which is the test's to do).
    fn admit_later(table: &Arc<Table>) -> tokio::task::JoinHandle<Slot> {
        let t = Arc::clone(table);
        tokio::spawn(async move { t.admit().await })
    }

    /// At the bound, the connection that has waited on its client the
    /// longest is evicted, whatever it waits for (a request, the rest of
    /// its head, the client reading its answer), and the new one takes its
    /// place once it is closed; one whose answer is being prepared or sent
    /// is never evicted, however old.
    #[tokio::test(start_paused = true)]
    async fn at_the_bound_the_connection_waiting_the_longest_makes_room() {
        let evicted = |s: &Slot| s.conn.state().evicted;
        let table = Arc::new(Table::new(3));
        let a = table.admit().await;
        a.conn.bytes_read(); // a head begun at 0 ms, never ended
        tokio::time::advance(Duration::from_millis(10)).await;
        let b = table.admit().await; // idle since 10 ms
        tokio::time::advance(Duration::from_millis(10)).await;
        let c = table.admit().await;
        c.conn.request(); // answering since 20 ms
        c.conn.write_stalled(true); // its client not reading from 20 ms
        tokio::time::advance(Duration::from_millis(10)).await;
        let d = admit_later(&table);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(evicted(&a), "a, in its head the longest, is closed");
        assert_eq!(a.conn.deadline(&limits()), a.conn.state().since);
        assert!(!evicted(&b) && !evicted(&c));
        assert!(!d.is_finished(), "d waits for a to be closed");
        assert_eq!(table.len(), 3);
        drop(a);
        let d = d.await.unwrap(); // idle since 31 ms
        assert_eq!(table.len(), 3);
        // c has not been stalled long enough to count: b goes.
        let e = admit_later(&table);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(evicted(&b) && !evicted(&c) && !evicted(&d));
        drop(b);
        let e = e.await.unwrap(); // idle since 32 ms
                                  // Now it has: waiting since 20 ms, before d and e.
        tokio::time::advance(STALLED_AFTER).await;
        let f = admit_later(&table);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(evicted(&c) && !evicted(&d) && !evicted(&e));
        drop(c);
        let f = f.await.unwrap();
        drop((d, e, f));
        assert_eq!(table.len(), 0);
    }

    /// An answer whose writes go through again waits on no client: it is
    /// not evicted, though older than every idle connection; nor is one
    /// whose writes have found the socket full for less than
    /// [`STALLED_AFTER`].
    #[tokio::test(start_paused = true)]
    async fn an_answer_read_as_it_comes_is_not_evicted() {
        let table = Arc::new(Table::new(2));
        let a = table.admit().await;
        a.conn.request();
        a.conn.write_stalled(true);
        tokio::time::advance(STALLED_AFTER * 2).await;
        a.conn.write_stalled(false);
        a.conn.write_stalled(true);
        tokio::time::advance(STALLED_AFTER / 2).await;
        let b = table.admit().await;
        let c = admit_later(&table);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(!a.conn.state().evicted && b.conn.state().evicted);
        drop(b);
        drop((a, c.await.unwrap()));
    }

    /// At the bound with none waiting on its client, an admission takes
    /// the place of one that goes idle (kept alive), without waiting for
    /// it to end: before, it waited for a connection to end, up to the
    /// idle deadline of one that had gone idle meanwhile.
    #[tokio::test(start_paused = true)]
    async fn an_admission_takes_the_place_of_one_gone_idle() {
        let table = Arc::new(Table::new(1));
        let a = table.admit().await;
        a.conn.request();
        let b = admit_later(&table);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!a.conn.state().evicted && !b.is_finished());
        a.conn.body_done(None);
        a.conn.flushed(); // a's answer sent: a is idle
        tokio::time::sleep(LOOK_AGAIN * 2).await;
        assert!(a.conn.state().evicted, "a, idle, is closed for b");
        drop(a);
        drop(b.await.unwrap());
    }

    /// At the bound with no connection waiting on its client, an admission
    /// waits until a connection ends.
    #[tokio::test(start_paused = true)]
    async fn with_none_waiting_on_its_client_an_admission_waits() {
        let table = Arc::new(Table::new(1));
        let a = table.admit().await;
        a.conn.request();
        let t = Arc::clone(&table);
        let waiting = tokio::spawn(async move { t.admit().await });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiting.is_finished());
        assert!(!a.conn.state().evicted);
        drop(a);
        let b = waiting.await.unwrap();
        assert_eq!(table.len(), 1);
        drop(b);
        assert_eq!(table.len(), 0);
    }
}
