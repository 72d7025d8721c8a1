//! The instances of the DAMON instance domains: one per stream (kdamond,
//! target), `kdamond<PID>/target<N>`, and one per region of a stream's
//! latest aggregation, `kdamond<PID>/target<N>/region<I>`. Their ids come
//! from libpcp_pmda's instance cache ([`CachedIndom`]): a name keeps its id
//! for as long as it is remembered, across agent restarts, and no id is
//! ever given to two names, however many streams come and go.
//!
//! A stream that has not been in the segment for [`FORGET_AFTER`] is
//! forgotten with its regions (culled from the caches), so that the tables
//! do not grow without bound as kdamonds come and go; if it comes back, it
//! gets new ids.

use std::collections::HashMap;
use std::ffi::c_int;
use std::time::{Duration, Instant};

use perfabi::damon::Aggregation;

use crate::indom_cache::CachedIndom;

/// How long a stream absent from the segment keeps its instance ids.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// When a stream was last in the segment, and the most regions it had.
struct Seen {
    at: Instant,
    regions: usize,
}

/// The DAMON instance domains.
pub struct DamonInstances {
    streams: CachedIndom,
    regions: CachedIndom,
    forget_after: Duration,
    /// Every remembered stream, by instance name.
    seen: HashMap<String, Seen>,
    /// Stream instance id → index of its aggregation in the reading.
    pub stream_of: HashMap<c_int, usize>,
    /// Region instance id → (aggregation index, region index).
    pub region_of: HashMap<c_int, (usize, usize)>,
}

/// The instance name of a stream.
pub fn stream_name(a: &Aggregation) -> String {
    format!("kdamond{}/target{}", a.monitor_id, a.target_id)
}

impl DamonInstances {
    /// The instances of the caches `streams` and `regions` (as loaded),
    /// each remembered from `now` on; streams unseen for `forget_after`
    /// are forgotten.
    pub fn new(
        streams: CachedIndom,
        regions: CachedIndom,
        forget_after: Duration,
        now: Instant,
    ) -> DamonInstances {
        let mut seen: HashMap<String, Seen> = streams
            .names()
            .into_iter()
            .map(|(_, n)| {
                (
                    n,
                    Seen {
                        at: now,
                        regions: 0,
                    },
                )
            })
            .collect();
        // Saved regions belong to the stream named before "/region".
        for (_, n) in regions.names() {
            let Some((stream, i)) = n.rsplit_once("/region") else {
                continue;
            };
            let Ok(i) = i.parse::<usize>() else { continue };
            let s = seen.entry(stream.to_string()).or_insert(Seen {
                at: now,
                regions: 0,
            });
            s.regions = s.regions.max(i + 1);
        }
        DamonInstances {
            streams,
            regions,
            forget_after,
            seen,
            stream_of: HashMap::new(),
            region_of: HashMap::new(),
        }
    }

    /// Makes the streams and regions of `damon` the current instances, at
    /// time `now`; forgets streams absent for longer than `forget_after`;
    /// saves the caches if they changed. Returns what went wrong, to log.
    pub fn update(&mut self, damon: &[Aggregation], now: Instant) -> Vec<String> {
        let mut problems = Vec::new();
        self.streams.hide_all();
        self.regions.hide_all();
        self.stream_of.clear();
        self.region_of.clear();
        for (ai, a) in damon.iter().enumerate() {
            let name = stream_name(a);
            match self.streams.add(&name) {
                Ok(id) => {
                    self.stream_of.insert(id, ai);
                }
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            }
            for ri in 0..a.regions.len() {
                match self.regions.add(&format!("{name}/region{ri}")) {
                    Ok(id) => {
                        self.region_of.insert(id, (ai, ri));
                    }
                    Err(e) => {
                        problems.push(e);
                        break;
                    }
                }
            }
            let s = self.seen.entry(name).or_insert(Seen {
                at: now,
                regions: 0,
            });
            s.at = now;
            s.regions = s.regions.max(a.regions.len());
        }
        let forget: Vec<String> = self
            .seen
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.at) > self.forget_after)
            .map(|(n, _)| n.clone())
            .collect();
        for name in forget {
            let s = self.seen.remove(&name).expect("listed above");
            for ri in 0..s.regions {
                self.regions.cull(&format!("{name}/region{ri}"));
            }
            self.streams.cull(&name);
        }
        for c in [&self.streams, &self.regions] {
            if let Err(e) = c.save() {
                problems.push(e);
            }
        }
        problems
    }

    /// Streams remembered (in the segment now or not long ago).
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::{indom, Pcp};
    use perfabi::damon::{Intervals, Region};
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};

    /// PCP's agent library, loaded once.
    fn pcp() -> &'static Pcp {
        static PCP: OnceLock<&'static Pcp> = OnceLock::new();
        PCP.get_or_init(|| Box::leak(Box::new(Pcp::load().expect("PCP's libpcp_pmda"))))
    }

    /// Its caches are process-wide: the tests take turns (and each uses
    /// its own domain).
    fn turn() -> std::sync::MutexGuard<'static, ()> {
        static TURN: Mutex<()> = Mutex::new(());
        TURN.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn instances(domain: u32, forget: Duration, now: Instant) -> DamonInstances {
        let (s, _) = CachedIndom::open(pcp(), indom(domain, 1), None);
        let (r, _) = CachedIndom::open(pcp(), indom(domain, 2), None);
        DamonInstances::new(s, r, forget, now)
    }

    fn stream(monitor: u64, regions: u64) -> Aggregation {
        Aggregation {
            monitor_id: monitor,
            target_id: 0,
            aggregation: 1,
            intervals: Intervals {
                sample_us: 5000,
                aggr_us: 100_000,
            },
            regions: (0..regions)
                .map(|i| Region {
                    start: i * 0x1000,
                    end: (i + 1) * 0x1000,
                    nr_accesses: 1,
                    age: 0,
                })
                .collect(),
        }
    }

    /// (name, id) of each current instance.
    type Ids = Vec<(String, c_int)>;

    /// Stream and region ids of the current instances, by name.
    fn ids(d: &DamonInstances, damon: &[Aggregation]) -> (Ids, Ids) {
        let mut s: Vec<_> = d
            .stream_of
            .iter()
            .map(|(id, &a)| (stream_name(&damon[a]), *id))
            .collect();
        let mut r: Vec<_> = d
            .region_of
            .iter()
            .map(|(id, &(a, i))| (format!("{}/region{i}", stream_name(&damon[a])), *id))
            .collect();
        s.sort();
        r.sort();
        (s, r)
    }

    #[test]
    fn every_stream_and_region_has_its_own_id_and_keeps_it() {
        let _turn = turn();
        let t0 = Instant::now();
        let mut d = instances(401, FORGET_AFTER, t0);
        let all: Vec<Aggregation> = (0..2100).map(|k| stream(1000 + k, 1 + k % 3)).collect();
        assert!(d.update(&all, t0).is_empty());
        let (streams, regions) = ids(&d, &all);
        assert_eq!(streams.len(), 2100);
        assert_eq!(
            regions.len(),
            (0..2100).map(|k| 1 + k % 3).sum::<u64>() as usize
        );
        for set in [&streams, &regions] {
            let distinct: HashSet<c_int> = set.iter().map(|(_, id)| *id).collect();
            assert_eq!(distinct.len(), set.len(), "one id per name");
        }
        // Fewer streams for a while, then all again: the same ids.
        let few = &all[2000..];
        assert!(d.update(few, t0 + Duration::from_secs(1)).is_empty());
        let (s_few, _) = ids(&d, few);
        assert!(s_few.iter().all(|x| streams.contains(x)));
        assert!(d.update(&all, t0 + Duration::from_secs(2)).is_empty());
        assert_eq!(ids(&d, &all), (streams, regions));
        assert_eq!(d.remembered(), 2100);
    }

    #[test]
    fn a_stream_gone_past_the_bound_is_forgotten_and_never_takes_an_old_id() {
        let _turn = turn();
        let t0 = Instant::now();
        let forget = Duration::from_secs(60);
        let mut d = instances(402, forget, t0);
        let (a, b) = (stream(1, 2), stream(2, 1));
        assert!(d.update(&[a.clone(), b.clone()], t0).is_empty());
        let (first, first_regions) = ids(&d, &[a.clone(), b.clone()]);
        // a is away, but not for long: remembered.
        assert!(d.update(std::slice::from_ref(&b), t0 + forget).is_empty());
        assert_eq!(d.remembered(), 2);
        // Away past the bound: forgotten, streams and regions.
        assert!(d
            .update(
                std::slice::from_ref(&b),
                t0 + forget + Duration::from_secs(1)
            )
            .is_empty());
        assert_eq!(d.remembered(), 1);
        let names: Vec<String> = d.streams.names().into_iter().map(|(_, n)| n).collect();
        assert_eq!(names, ["kdamond2/target0"]);
        assert_eq!(d.regions.names().len(), 1);
        // Back: new ids, none given out before; b keeps its own.
        assert!(d
            .update(&[a.clone(), b.clone()], t0 + forget * 2)
            .is_empty());
        let (again, again_regions) = ids(&d, &[a, b]);
        assert_eq!(again[1], first[1], "b keeps its id");
        let old: HashSet<c_int> = first.iter().map(|(_, i)| *i).collect();
        assert!(!old.contains(&again[0].1), "{first:?} {again:?}");
        let old: HashSet<c_int> = first_regions.iter().map(|(_, i)| *i).collect();
        assert!(again_regions
            .iter()
            .filter(|(n, _)| n.starts_with("kdamond1/"))
            .all(|(_, i)| !old.contains(i)));
    }
}
