//! The scrapes in flight and the memory their pages hold: at most
//! [`Limits::max_requests`] scrapes and [`Limits::max_page_bytes`] of pages
//! at once (one scrape always), each holding its place from before its
//! snapshot until its page is handed whole to the kernel. At either bound,
//! the scrape whose client has stopped reading the longest is closed to
//! make room; a scrape finding no such one is answered `503`.
//!
//! [`Limits::max_requests`]: crate::Limits::max_requests
//! [`Limits::max_page_bytes`]: crate::Limits::max_page_bytes

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::connections::{Conn, Table};

/// How long a scrape waits for the place of the one closed to make room
/// (a closed connection gives its place back at once; this bounds a race
/// with other scrapes for it).
const ROOM_WAIT: Duration = Duration::from_secs(1);

/// The bounds, and what is in flight.
pub(crate) struct Scrapes {
    max_count: usize,
    max_bytes: usize,
    in_flight: Mutex<InFlight>,
    /// A place was given back: a scrape waiting for room looks again.
    freed: Notify,
}

#[derive(Debug, Default)]
struct InFlight {
    count: usize,
    /// The pages' bytes, and the size of the last page (reserved for a
    /// scrape whose page is not rendered yet).
    bytes: usize,
    last_page: usize,
}

/// Which bound a scrape found full, with nothing to close to make room:
/// the reason of its `503`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// `--max-requests` scrapes in flight.
    Requests(usize),
    /// Pages in flight holding this many bytes, of the bound's.
    Memory(usize, usize),
}

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: f64 = (1 << 20) as f64;
        match *self {
            Full::Requests(n) => write!(
                f,
                "{n} scrapes in flight already (--max-requests), none stalled: try again"
            ),
            Full::Memory(held, max) => write!(
                f,
                "pages in flight hold {:.1} MiB already, of {:.1} (--max-page-memory), \
                 none stalled: try again",
                held as f64 / MIB,
                max as f64 / MIB
            ),
        }
    }
}

/// A scrape's place: its page's bytes count until it is dropped.
pub(crate) struct Place {
    scrapes: Arc<Scrapes>,
    conn: Weak<Conn>,
    bytes: usize,
}

impl Scrapes {
    /// At most `max_count` scrapes (at least one) and `max_bytes` of pages
    /// in flight.
    pub(crate) fn new(max_count: usize, max_bytes: usize) -> Self {
        Self {
            max_count: max_count.max(1),
            max_bytes,
            in_flight: Mutex::new(InFlight::default()),
            freed: Notify::new(),
        }
    }

    fn in_flight(&self) -> MutexGuard<'_, InFlight> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a scrape on `conn`, reserving the last page's size, if
    /// both bounds leave room (a first scrape always finds room).
    fn try_take(self: &Arc<Self>, conn: &Arc<Conn>) -> Result<Place, Full> {
        let bytes = {
            let mut s = self.in_flight();
            if s.count >= self.max_count {
                return Err(Full::Requests(s.count));
            }
            if s.count > 0 && s.bytes.saturating_add(s.last_page) > self.max_bytes {
                return Err(Full::Memory(s.bytes, self.max_bytes));
            }
            s.count += 1;
            s.bytes += s.last_page;
            s.last_page
        };
        conn.scrape_began();
        Ok(Place {
            scrapes: Arc::clone(self),
            conn: Arc::downgrade(conn),
            bytes,
        })
    }

    /// A place for a scrape on `conn`, reserving the size of the last
    /// page; see [`Scrapes::room`] for what happens at a bound.
    pub(crate) async fn take(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        table: &Table,
    ) -> Result<Place, Full> {
        self.room(table, || self.try_take(conn)).await
    }

    /// What `attempt` gives once it finds room. At a bound, the connection
    /// of the scrape whose client has stopped reading the longest (of
    /// those in `table`) is closed, and `attempt` tried again once its
    /// place is given back; which bound was full if none could be closed,
    /// or the room went to another scrape for [`ROOM_WAIT`].
    async fn room<T>(
        &self,
        table: &Table,
        mut attempt: impl FnMut() -> Result<T, Full>,
    ) -> Result<T, Full> {
        let until = Instant::now() + ROOM_WAIT;
        let mut closed_one = false;
        loop {
            // Registered before looking, so that a place given back after
            // the look wakes this wait.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let full = match attempt() {
                Ok(got) => return Ok(got),
                Err(full) => full,
            };
            if !closed_one {
                if !table.close_longest_stalled_scrape() {
                    return Err(full);
                }
                closed_one = true;
            }
            if tokio::time::timeout_at(until, freed).await.is_err() {
                return Err(full);
            }
        }
    }
}

impl Place {
    /// Its page is rendered, `len` bytes: counted from now on instead of
    /// the size reserved, if it fits beside the other pages in flight (or
    /// its scrape is the only one); see [`Scrapes::room`] for what happens
    /// if it does not. The reservation was a guess (the last page's size,
    /// none before the first page), and pages grow with the segment.
    pub(crate) async fn page(&mut self, len: usize, table: &Table) -> Result<(), Full> {
        let scrapes = Arc::clone(&self.scrapes);
        scrapes.room(table, || self.try_page(len)).await
    }

    fn try_page(&mut self, len: usize) -> Result<(), Full> {
        let mut s = self.scrapes.in_flight();
        s.last_page = len;
        let others = s.bytes - self.bytes;
        if s.count > 1 && others.saturating_add(len) > self.scrapes.max_bytes {
            return Err(Full::Memory(others, self.scrapes.max_bytes));
        }
        s.bytes = others + len;
        self.bytes = len;
        Ok(())
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        {
            let mut s = self.scrapes.in_flight();
            s.count -= 1;
            s.bytes -= self.bytes;
        }
        if let Some(conn) = self.conn.upgrade() {
            conn.scrape_ended();
        }
        self.scrapes.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connections::Slot;

    /// The count bound, then the memory bound: before a page is rendered
    /// (the last page's size reserved) and once it is (its own size); one
    /// scrape always finds room, whatever its page's size.
    #[tokio::test]
    async fn both_bounds_and_one_scrape_always() {
        let table = Arc::new(Table::new(8));
        let slot = table.admit().await;
        let conn = &slot.conn;
        let scrapes = Arc::new(Scrapes::new(3, 1000));
        // No page yet: nothing reserved.
        let mut a = scrapes.try_take(conn).unwrap();
        let mut b = scrapes.try_take(conn).unwrap();
        a.try_page(300).unwrap();
        // 300 held and 300 reserved: room.
        let mut c = scrapes.try_take(conn).unwrap();
        assert_eq!(scrapes.try_take(conn).err(), Some(Full::Requests(3)));
        // b's page does not fit beside a's and c's reservation.
        assert_eq!(b.try_page(500), Err(Full::Memory(600, 1000)));
        drop(b);
        c.try_page(100).unwrap();
        // 400 held, 100 (the last page, c's) reserved: room; d's page
        // fits exactly.
        let mut d = scrapes.try_take(conn).unwrap();
        d.try_page(600).unwrap();
        drop((c, d));
        // 300 held and 600 (d's) reserved: room; another 600: none.
        let e = scrapes.try_take(conn).unwrap();
        assert_eq!(scrapes.try_take(conn).err(), Some(Full::Memory(900, 1000)));
        drop((a, e));
        // Alone, a scrape finds room however large its page.
        let mut f = scrapes.try_take(conn).unwrap();
        f.try_page(5000).unwrap();
        assert_eq!(scrapes.try_take(conn).err(), Some(Full::Memory(5000, 1000)));
        drop(f);
        let s = scrapes.in_flight();
        assert_eq!((s.count, s.bytes), (0, 0));
    }

    /// At the bound, a scrape closes the connection of the scrape stalled
    /// the longest and takes its place once given back; with none stalled,
    /// it is refused at once, saying which bound.
    #[tokio::test(start_paused = true)]
    async fn at_a_bound_the_scrape_stalled_the_longest_makes_room() {
        let table = Arc::new(Table::new(8));
        let scrapes = Arc::new(Scrapes::new(2, usize::MAX));
        let (a, b, c) = (
            table.admit().await,
            table.admit().await,
            table.admit().await,
        );
        a.conn.request();
        let pa = scrapes.take(&a.conn, &table).await.unwrap();
        tokio::time::advance(Duration::from_millis(10)).await;
        b.conn.request();
        let pb = scrapes.take(&b.conn, &table).await.unwrap();
        c.conn.request();
        // Neither stalled: refused at once.
        let t = Instant::now();
        assert_eq!(
            scrapes.take(&c.conn, &table).await.err(),
            Some(Full::Requests(2))
        );
        assert_eq!(t.elapsed(), Duration::ZERO);
        // Both stalled: a, answering the longer, is closed.
        a.conn.write_stalled(true);
        b.conn.write_stalled(true);
        let waiting = {
            let (scrapes, table, conn) = (
                Arc::clone(&scrapes),
                Arc::clone(&table),
                Arc::clone(&c.conn),
            );
            tokio::spawn(async move { scrapes.take(&conn, &table).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        let evicted = |s: &Slot| s.conn.evicted();
        assert!(evicted(&a) && !evicted(&b) && !waiting.is_finished());
        drop(pa); // its connection closed
        assert_eq!(waiting.await.unwrap(), Ok(()));
        drop(pb);
    }
}
