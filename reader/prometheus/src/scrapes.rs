//! The scrapes in flight and the memory their pages hold: at most
//! [`Limits::max_requests`] scrapes and [`Limits::max_page_bytes`] of pages
//! at once (one scrape always), each holding its place from before its
//! snapshot until its page is handed whole to the kernel. At either bound,
//! the scrape whose client has stopped reading the longest is closed to
//! make room, and scrapes waiting for room get it in the order they came,
//! each waiting at most half its send deadline (`503` then).
//!
//! [`Limits::max_requests`]: crate::Limits::max_requests
//! [`Limits::max_page_bytes`]: crate::Limits::max_page_bytes

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::connections::{Conn, Table, LOOK_AGAIN};

/// The bounds, and what is in flight.
pub(crate) struct Scrapes {
    max_count: usize,
    max_bytes: usize,
    /// How long a scrape waits for room at most.
    wait: Duration,
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
    /// The scrapes waiting for room, first come first served (their
    /// tickets), and the next ticket.
    line: VecDeque<u64>,
    next_ticket: u64,
}

/// Which bound a scrape found full, with nothing to close to make room:
/// the reason of its `503`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// `--max-requests` scrapes in flight.
    Requests(usize),
    /// Pages in flight holding this many bytes, of the bound's.
    Memory(usize, usize),
    /// This many scrapes waiting for room already.
    Waiting(usize),
}

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: f64 = (1 << 20) as f64;
        match *self {
            Full::Requests(n) => write!(
                f,
                "{n} scrapes in flight already (--max-requests): try again"
            ),
            Full::Memory(held, max) => write!(
                f,
                "pages in flight hold {:.1} MiB already, of {:.1} (--max-page-memory): \
                 try again",
                held as f64 / MIB,
                max as f64 / MIB
            ),
            Full::Waiting(n) => write!(f, "{n} scrapes waiting for room already: try again"),
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
    /// in flight; a scrape waits for room `wait` at most.
    pub(crate) fn new(max_count: usize, max_bytes: usize, wait: Duration) -> Self {
        Self {
            max_count: max_count.max(1),
            max_bytes,
            wait,
            in_flight: Mutex::new(InFlight::default()),
            freed: Notify::new(),
        }
    }

    fn in_flight(&self) -> MutexGuard<'_, InFlight> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves a place in `s`, of the last page's size, if both bounds
    /// leave room (a first scrape always finds room); the bytes reserved.
    fn reserve(&self, s: &mut InFlight) -> Result<usize, Full> {
        if s.count >= self.max_count {
            return Err(Full::Requests(s.count));
        }
        if s.count > 0 && s.bytes.saturating_add(s.last_page) > self.max_bytes {
            return Err(Full::Memory(s.bytes, self.max_bytes));
        }
        s.count += 1;
        s.bytes += s.last_page;
        Ok(s.last_page)
    }

    fn place(self: &Arc<Self>, conn: &Arc<Conn>, bytes: usize) -> Place {
        conn.scrape_began();
        Place {
            scrapes: Arc::clone(self),
            conn: Arc::downgrade(conn),
            bytes,
        }
    }

    /// A place for a scrape on `conn`, if there is room now and no scrape
    /// waits for it.
    #[cfg(test)]
    fn try_take(self: &Arc<Self>, conn: &Arc<Conn>) -> Result<Place, Full> {
        let bytes = {
            let mut s = self.in_flight();
            if !s.line.is_empty() {
                return Err(Full::Waiting(s.line.len()));
            }
            self.reserve(&mut s)?
        };
        Ok(self.place(conn, bytes))
    }

    /// A place for a scrape on `conn`, reserving the size of the last
    /// page; see [`Scrapes::room`] for what happens at a bound.
    pub(crate) async fn take(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        table: &Table,
    ) -> Result<Place, Full> {
        let bytes = self.room(table, false, |s| self.reserve(s)).await?;
        Ok(self.place(conn, bytes))
    }

    /// What `attempt` gives once it finds room (`attempt` changes nothing
    /// but the last page's size when it finds none).
    ///
    /// A scrape finding no room closes the connection of the scrape whose
    /// client has stopped reading the longest, and goes ahead of the line
    /// for the room that makes: it tries again each time a place is given
    /// back, and closes another once its own has given its place back (to
    /// another scrape). With none to close, it waits in line for a place
    /// given back, first come first served, the first in line looking
    /// again for one to close every [`LOOK_AGAIN`]. A scrape that has
    /// waited its `wait` fails with the bound it found full.
    ///
    /// A scrape that has its place already (`ahead`: room for its rendered
    /// page) goes ahead from the start: behind the line it would wait for
    /// the room it holds.
    async fn room<T>(
        &self,
        table: &Table,
        mut ahead: bool,
        mut attempt: impl FnMut(&mut InFlight) -> Result<T, Full>,
    ) -> Result<T, Full> {
        let until = Instant::now() + self.wait;
        let mut line = InLine {
            scrapes: self,
            ticket: None,
        };
        let mut looked = false;
        // The connection it closed for room, if any.
        let mut mine: Option<Weak<Conn>> = None;
        loop {
            // Registered before looking, so that a place given back (or the
            // line moving) after the look wakes this wait.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let (full, first) = {
                let mut s = self.in_flight();
                let first = ahead
                    || match line.ticket {
                        None => s.line.is_empty(),
                        Some(t) => s.line.front() == Some(&t),
                    };
                let full = if first {
                    match attempt(&mut s) {
                        Ok(got) => return Ok(got), // leaving the line
                        Err(full) => full,
                    }
                } else {
                    Full::Waiting(s.line.len())
                };
                if !ahead && line.ticket.is_none() {
                    let t = s.next_ticket;
                    s.next_ticket += 1;
                    s.line.push_back(t);
                    line.ticket = Some(t);
                }
                (full, first)
            };
            // The first in line and those ahead look each time (once the
            // one they closed, if any, has given its place back); the
            // others once, when they come.
            let waiting_for_mine = mine
                .as_ref()
                .and_then(Weak::upgrade)
                .is_some_and(|c| c.holds_scrape());
            if !waiting_for_mine {
                mine = None;
                if first || !looked {
                    mine = table.close_longest_stalled_scrape();
                    if mine.is_some() && !ahead {
                        ahead = true;
                        line.leave();
                    }
                }
            }
            looked = true;
            let look_again = if first && mine.is_none() {
                until.min(Instant::now() + LOOK_AGAIN)
            } else {
                until
            };
            if tokio::time::timeout_at(look_again, freed).await.is_err() && look_again >= until {
                return Err(full);
            }
        }
    }
}

/// A scrape's place in the line for room: left when dropped (and the
/// scrapes behind it told).
struct InLine<'a> {
    scrapes: &'a Scrapes,
    ticket: Option<u64>,
}

impl InLine<'_> {
    /// Leaves the line (the scrapes behind it told).
    fn leave(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.scrapes.in_flight().line.retain(|&x| x != t);
            self.scrapes.freed.notify_waiters();
        }
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.leave();
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
        let held = &mut self.bytes;
        scrapes
            .room(table, true, |s| fit(s, held, len, scrapes.max_bytes))
            .await
    }

    #[cfg(test)]
    fn try_page(&mut self, len: usize) -> Result<(), Full> {
        let scrapes = Arc::clone(&self.scrapes);
        let mut s = scrapes.in_flight();
        fit(&mut s, &mut self.bytes, len, scrapes.max_bytes)
    }
}

/// Counts a page of `len` bytes in `s` instead of the `held` bytes of its
/// place, if it fits within `max` beside the others (or its scrape is the
/// only one); either way, `len` is the last page's size from now on.
fn fit(s: &mut InFlight, held: &mut usize, len: usize, max: usize) -> Result<(), Full> {
    s.last_page = len;
    let others = s.bytes - *held;
    if s.count > 1 && others.saturating_add(len) > max {
        return Err(Full::Memory(others, max));
    }
    s.bytes = others + len;
    *held = len;
    Ok(())
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
    use crate::connections::{Slot, STALLED_AFTER};

    /// The count bound, then the memory bound: before a page is rendered
    /// (the last page's size reserved) and once it is (its own size); one
    /// scrape always finds room, whatever its page's size.
    #[tokio::test]
    async fn both_bounds_and_one_scrape_always() {
        let table = Arc::new(Table::new(8));
        let slot = table.admit().await;
        let conn = &slot.conn;
        let scrapes = Arc::new(Scrapes::new(3, 1000, Duration::from_secs(1)));
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

    /// At the bound, a scrape waits for room: it closes the connection of
    /// the scrape stalled the longest as soon as there is one, and takes
    /// its place once given back; it is refused, saying which bound, if
    /// none stalls within its wait.
    #[tokio::test(start_paused = true)]
    async fn at_a_bound_the_scrape_stalled_the_longest_makes_room() {
        let table = Arc::new(Table::new(8));
        let scrapes = Arc::new(Scrapes::new(2, usize::MAX, Duration::from_secs(5)));
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
        // Neither stalls: refused after its wait.
        let t = Instant::now();
        assert_eq!(
            scrapes.take(&c.conn, &table).await.err(),
            Some(Full::Requests(2))
        );
        assert_eq!(t.elapsed(), Duration::from_secs(5));
        // Both stall while it waits: a, answering the longer, is closed.
        let waiting = {
            let (scrapes, table, conn) = (
                Arc::clone(&scrapes),
                Arc::clone(&table),
                Arc::clone(&c.conn),
            );
            tokio::spawn(async move { scrapes.take(&conn, &table).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!a.conn.evicted() && !waiting.is_finished());
        a.conn.write_stalled(true);
        tokio::time::sleep(Duration::from_millis(10)).await;
        b.conn.write_stalled(true);
        tokio::time::sleep(STALLED_AFTER - Duration::from_millis(100)).await;
        assert!(!a.conn.evicted(), "stalled for less than STALLED_AFTER");
        tokio::time::sleep(Duration::from_millis(100) + LOOK_AGAIN).await;
        assert!(a.conn.evicted() && !b.conn.evicted() && !waiting.is_finished());
        drop(pa); // its connection closed
        assert_eq!(waiting.await.unwrap(), Ok(()));
        drop(pb);
    }

    /// Scrapes waiting for room, none to close for it, get it in the
    /// order they came: a place given back goes to the first in line, not
    /// to one that came later, even one that asks just as it is given back.
    #[tokio::test(start_paused = true)]
    async fn room_goes_to_the_first_in_line() {
        let table = Arc::new(Table::new(8));
        let scrapes = Arc::new(Scrapes::new(1, usize::MAX, Duration::from_secs(5)));
        let (a, b, c, d) = (
            table.admit().await,
            table.admit().await,
            table.admit().await,
            table.admit().await,
        );
        let later = |slot: &Slot| {
            slot.conn.request();
            let (scrapes, table, conn) = (
                Arc::clone(&scrapes),
                Arc::clone(&table),
                Arc::clone(&slot.conn),
            );
            tokio::spawn(async move { scrapes.take(&conn, &table).await })
        };
        a.conn.request();
        let pa = scrapes.take(&a.conn, &table).await.unwrap();
        let for_b = later(&b);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let for_c = later(&c);
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(pa);
        d.conn.request();
        assert_eq!(scrapes.try_take(&d.conn).err(), Some(Full::Waiting(2)));
        let pb = for_b.await.unwrap().unwrap();
        assert!(!for_c.is_finished());
        assert_eq!(scrapes.try_take(&d.conn).err(), Some(Full::Waiting(1)));
        drop(pb);
        drop(for_c.await.unwrap().unwrap());
        assert!(scrapes.try_take(&d.conn).is_ok());
        assert!(!a.conn.evicted() && !b.conn.evicted());
    }
}
