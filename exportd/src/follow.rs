//! Following devices: the instances of a source's families come and go
//! with the devices (disks, interfaces, IRQs) its `/proc` file lists.
//!
//! At every refresh a source calls [`Follow::begin`], then
//! [`Follow::see`] for each device the file lists (which registers a new
//! one as one member per family), then [`Follow::end`], which deletes the
//! members of every device not seen. A device that returns is registered
//! again: the writer gives it its old instance number under a new
//! registration id (spec §5.3), so readers see a new registration. So is a
//! device whose counters went back: one removed and another made under
//! its name between two refreshes (`ip link del wg0; ip link add wg0`),
//! never the old registration's counters going backwards.
//!
//! The segment's tables are sized at start ([`crate::proc_source::Need`]): a
//! device that appears when they are full is not published, counted in
//! `exportd.skipped_instances` and logged once, and the existing instances
//! stay as they are. It is tried again after some member was deleted. A
//! device whose name cannot be an instance string (spec §5.3) is skipped
//! the same way, and never retried.

use std::collections::{HashMap, HashSet};

use perfabi::text::escape;
use perfabi::Semantics;
use perfabi_shm::writer::{FamilyId, InstanceId, MemberId, Writer};

/// The most device names whose skip is logged; later ones are only
/// counted, so a churn of new names cannot grow the log or the set.
const MAX_LOGGED: usize = 64;

/// What the sources share across refreshes: the exporter's count of
/// skipped devices and what was logged of them.
pub struct Room {
    skipped: InstanceId,
    /// Members deleted so far, by any source: a device refused for want of
    /// room is tried again only once this changed.
    freed: u64,
    logged: HashSet<String>,
}

impl Room {
    /// The name of the counter of skipped devices.
    pub const SKIPPED: &'static str = "exportd.skipped_instances";

    /// The 1.0 instances [`Room::new`] registers.
    pub const INSTANCES: usize = 1;

    /// Registers the `exportd.skipped_instances` counter in `w`.
    pub fn new(w: &Writer) -> Result<Self, perfabi::Error> {
        Ok(Self {
            skipped: w.add(Self::SKIPPED, "count", Semantics::Counter)?,
            freed: 0,
            logged: HashSet::new(),
        })
    }

    /// Counts one skipped device and logs `why` once per `what` and name.
    fn skip(&mut self, w: &Writer, what: &str, name: &str, why: impl FnOnce() -> String) {
        let _ = w.adjust(self.skipped, 1);
        if self.logged.len() > MAX_LOGGED {
            return;
        }
        let key = format!("{what} {name}");
        if self.logged.contains(&key) {
            return;
        }
        if self.logged.len() == MAX_LOGGED {
            eprintln!(
                "perfabi-exportd: {MAX_LOGGED} devices skipped so far; further ones are only counted in {}",
                Self::SKIPPED
            );
        } else {
            // The kernel takes any byte but `/` and NUL in a device name
            // (an interface named ESC ] 0 ; … BEL retitles the terminal
            // that reads this log): escaped.
            eprintln!(
                "perfabi-exportd: {what} {}: {}",
                escape(name.as_bytes()),
                why()
            );
        }
        self.logged.insert(key);
    }
}

/// One device's members, in the order of [`Follow`]'s families, and the
/// counts last published for it.
struct Device {
    members: Vec<MemberId>,
    seen: u64,
    last: Vec<u64>,
}

/// Why a device is not published.
struct Refused {
    seen: u64,
    /// `Some(freed)`: no room when [`Room::freed`] was this; `None`: its
    /// name cannot be an instance string.
    room_at: Option<u64>,
}

/// The devices of one source and their members in its families.
pub struct Follow {
    what: &'static str,
    families: Vec<FamilyId>,
    live: HashMap<String, Device>,
    refused: HashMap<String, Refused>,
    pass: u64,
}

impl Follow {
    /// Follows devices of kind `what` (`disk`, for log lines), each a
    /// member of every family of `families`.
    pub fn new(what: &'static str, families: Vec<FamilyId>) -> Self {
        Self {
            what,
            families,
            live: HashMap::new(),
            refused: HashMap::new(),
            pass: 0,
        }
    }

    /// The live devices' instance strings.
    pub fn instances(&self) -> impl Iterator<Item = &str> {
        self.live.keys().map(String::as_str)
    }

    /// Starts a refresh.
    pub fn begin(&mut self) {
        self.pass += 1;
    }

    /// The counts last given to [`see`](Self::see) for `instance`, if it
    /// is live.
    pub fn last(&self, instance: &str) -> Option<&[u64]> {
        self.live.get(instance).map(|d| d.last.as_slice())
    }

    /// Device `instance` is listed with `counts` (cumulative counters,
    /// whatever the source publishes of it, in a fixed order): its
    /// members, one per family (those of a new device registered now, or
    /// again if a count went back), or `None` if it is not published
    /// (counted and logged once, see the module's doc).
    pub fn see(
        &mut self,
        w: &Writer,
        room: &mut Room,
        instance: &str,
        counts: &[u64],
    ) -> Option<&[MemberId]> {
        self.see_labelled(w, room, instance, counts, &[])
    }

    /// [`see`](Self::see), for a device whose members carry `labels`
    /// (spec §5.3) when they are registered; a label that cannot be one
    /// skips the device as a bad name does.
    pub fn see_labelled(
        &mut self,
        w: &Writer,
        room: &mut Room,
        instance: &str,
        counts: &[u64],
        labels: &[(&str, &str)],
    ) -> Option<&[MemberId]> {
        let pass = self.pass;
        if let Some(d) = self.live.get_mut(instance) {
            if !d.last.iter().zip(counts).any(|(a, b)| b < a) {
                d.seen = pass;
                d.last.clear();
                d.last.extend_from_slice(counts);
                // Reborrowed to return it: the map cannot change in between.
                return self.live.get(instance).map(|d| d.members.as_slice());
            }
            // Another device under the name: the old one's members go.
            for m in &d.members {
                if w.del_member(m).is_ok() {
                    room.freed += 1;
                }
            }
            self.live.remove(instance);
        }
        if let Some(r) = self.refused.get_mut(instance) {
            let retry = r.room_at.is_some_and(|at| at != room.freed);
            r.seen = pass;
            if !retry {
                return None;
            }
        }
        let members = match self.register(w, instance, labels) {
            Ok(m) => m,
            Err(e) => {
                let bad_name = e == perfabi::Error::BadInstance;
                let new = self
                    .refused
                    .insert(
                        instance.to_string(),
                        Refused {
                            seen: pass,
                            room_at: (!bad_name).then_some(room.freed),
                        },
                    )
                    .is_none();
                if new {
                    room.skip(w, self.what, instance, || match bad_name {
                        true => "its name cannot be an instance string (spec §5.3): not published"
                            .to_string(),
                        false if matches!(
                            e,
                            perfabi::Error::NoFamilyRoom | perfabi::Error::TableFull
                        ) =>
                        {
                            "not published: the segment's member or value table is full (see --max-members and --max-instances)".to_string()
                        }
                        false => format!("not published: {e}"),
                    });
                }
                return None;
            }
        };
        self.refused.remove(instance);
        let d = self.live.entry(instance.to_string()).or_insert(Device {
            members,
            seen: pass,
            last: counts.to_vec(),
        });
        Some(&d.members)
    }

    /// One member per family, or none: what was added is deleted again if
    /// a later family refuses it.
    fn register(
        &self,
        w: &Writer,
        instance: &str,
        labels: &[(&str, &str)],
    ) -> Result<Vec<MemberId>, perfabi::Error> {
        perfabi::name::check_instance(instance)?;
        if instance.is_empty() {
            return Err(perfabi::Error::BadInstance);
        }
        let mut members = Vec::with_capacity(self.families.len());
        for &f in &self.families {
            match w.add_external_member(f, instance, labels) {
                Ok(m) => members.push(m),
                Err(e) => {
                    for m in &members {
                        let _ = w.del_member(m);
                    }
                    return Err(e);
                }
            }
        }
        Ok(members)
    }

    /// Deletes the members of `instance`, if it is live (a device that is
    /// another one now: its next [`see`](Self::see) registers it again).
    pub fn forget(&mut self, w: &Writer, room: &mut Room, instance: &str) {
        if let Some(d) = self.live.remove(instance) {
            for m in &d.members {
                if w.del_member(m).is_ok() {
                    room.freed += 1;
                }
            }
        }
    }

    /// Ends a refresh: deletes the members of every device not seen since
    /// [`begin`](Self::begin), and forgets refused devices that are gone.
    pub fn end(&mut self, w: &Writer, room: &mut Room) {
        let pass = self.pass;
        self.live.retain(|_, d| {
            if d.seen == pass {
                return true;
            }
            for m in &d.members {
                if w.del_member(m).is_ok() {
                    room.freed += 1;
                }
            }
            false
        });
        self.refused.retain(|_, r| r.seen == pass);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::{FamilySpec, Kind, Unit};
    use perfabi_shm::writer::Config;

    fn writer(dir: &std::path::Path, max_members: u32) -> Writer {
        let config = Config {
            nr_cpus: Some(2),
            max_instances: 64,
            max_families: 8,
            max_members,
            auto_heartbeat: false,
            ..Config::default()
        };
        Writer::create(dir.join("seg"), &config).unwrap()
    }

    fn family(w: &Writer, name: &str) -> FamilyId {
        w.add_family(&FamilySpec::new(
            name,
            "test",
            "device",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap()
    }

    fn live(w: &Writer, fam: &str) -> Vec<String> {
        let s = w.snapshot().unwrap();
        let mut v: Vec<String> = s
            .family(fam)
            .unwrap()
            .members
            .iter()
            .map(|m| m.instance.clone())
            .collect();
        v.sort();
        v
    }

    fn skipped(w: &Writer) -> u64 {
        let s = w.snapshot().unwrap();
        s.total(s.find(Room::SKIPPED).unwrap())
    }

    /// One refresh listing `devices`.
    fn pass(f: &mut Follow, w: &Writer, room: &mut Room, devices: &[&str]) -> usize {
        f.begin();
        let n = devices
            .iter()
            .filter(|d| f.see(w, room, d, &[0]).is_some())
            .count();
        f.end(w, room);
        n
    }

    #[test]
    fn devices_come_and_go_and_a_full_table_skips_new_ones_only() {
        let dir = tempfile::tempdir().unwrap();
        // Two families: 5 members hold two devices, not three.
        let w = writer(dir.path(), 5);
        let (a, b) = (family(&w, "t.a"), family(&w, "t.b"));
        let mut room = Room::new(&w).unwrap();
        let mut f = Follow::new("disk", vec![a, b]);
        assert_eq!(pass(&mut f, &w, &mut room, &["sda", "sdb"]), 2);
        assert_eq!(live(&w, "t.b"), ["sda", "sdb"]);
        let old = w.snapshot().unwrap().family("t.a").unwrap().members[0].clone();
        // sdc finds no room: skipped, counted once, the others intact; the
        // half-registered member (t.a) is taken back.
        for _ in 0..3 {
            assert_eq!(pass(&mut f, &w, &mut room, &["sda", "sdb", "sdc"]), 2);
        }
        assert_eq!(skipped(&w), 1);
        assert_eq!(live(&w, "t.a"), ["sda", "sdb"]);
        // sda goes: sdc gets its room at the next refresh.
        assert_eq!(pass(&mut f, &w, &mut room, &["sdb", "sdc"]), 1);
        assert_eq!(pass(&mut f, &w, &mut room, &["sdb", "sdc"]), 2);
        assert_eq!(live(&w, "t.a"), ["sdb", "sdc"]);
        // sda returns to a full table: skipped again, counted again.
        assert_eq!(pass(&mut f, &w, &mut room, &["sda", "sdb", "sdc"]), 2);
        assert_eq!(skipped(&w), 2);
        // A returning device is a new registration with its old number.
        assert_eq!(pass(&mut f, &w, &mut room, &["sda", "sdb"]), 1);
        assert_eq!(pass(&mut f, &w, &mut room, &["sda", "sdb"]), 2);
        let s = w.snapshot().unwrap();
        let new = s.family("t.a").unwrap().member("sda").unwrap();
        assert_eq!(new.instance_id, old.instance_id);
        assert_ne!(new.reg_id, old.reg_id);
    }

    #[test]
    fn a_name_that_cannot_be_an_instance_is_skipped_once() {
        let dir = tempfile::tempdir().unwrap();
        let w = writer(dir.path(), 16);
        let a = family(&w, "t.a");
        let mut room = Room::new(&w).unwrap();
        let mut f = Follow::new("interface", vec![a]);
        let long = "x".repeat(64);
        for _ in 0..3 {
            assert_eq!(
                pass(&mut f, &w, &mut room, &["eth0", "bad name", "", &long]),
                1
            );
        }
        assert_eq!(skipped(&w), 3);
        assert_eq!(live(&w, "t.a"), ["eth0"]);
        assert_eq!(f.instances().collect::<Vec<_>>(), ["eth0"]);
    }

    #[test]
    fn a_device_whose_counts_go_back_is_a_new_registration() {
        let dir = tempfile::tempdir().unwrap();
        let w = writer(dir.path(), 16);
        let a = family(&w, "t.a");
        let mut room = Room::new(&w).unwrap();
        let mut f = Follow::new("interface", vec![a]);
        let reg = |w: &Writer| {
            let s = w.snapshot().unwrap();
            s.family("t.a").unwrap().member("wg0").unwrap().reg_id
        };
        let mut see = |f: &mut Follow, counts: &[u64]| {
            f.begin();
            assert!(f.see(&w, &mut room, "wg0", counts).is_some());
            f.end(&w, &mut room);
        };
        see(&mut f, &[10, 5]);
        let first = reg(&w);
        // Counts that grow, or stay: the same registration.
        see(&mut f, &[12, 5]);
        assert_eq!(reg(&w), first);
        assert_eq!(f.last("wg0"), Some(&[12, 5][..]));
        // One that goes back (wg0 deleted and made again between two
        // refreshes): a new registration, never a counter going back.
        see(&mut f, &[13, 1]);
        let second = reg(&w);
        assert_ne!(second, first);
        assert_eq!(live(&w, "t.a"), ["wg0"]);
        see(&mut f, &[14, 2]);
        assert_eq!(reg(&w), second);
    }
}
