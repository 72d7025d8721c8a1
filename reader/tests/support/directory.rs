//! What the segment-directory tests share: the writers' configuration, a
//! writer created under a directory name without folding, and the merged
//! view read back.

use std::path::Path;

use perfabi::{FamilySpec, Kind, Reading, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions, Scrape};
use perfabi_shm::directory::SegmentName;
use perfabi_shm::writer::{Config, MemberId, Writer};

/// The directory tests' writers: two CPUs, 64 instance slots and
/// `damon_capacity` DAMON slots (other settings default).
pub fn config(damon_capacity: u32) -> Config {
    Config {
        nr_cpus: Some(2),
        max_instances: 64,
        damon_capacity,
        ..Config::default()
    }
}

/// A writer in `dir` under the directory name of `name`, made by
/// [`Writer::create`], which never folds (unlike [`Writer::create_in`]).
pub fn create_unfolded(dir: &Path, name: &str, config: &Config) -> Writer {
    perfabi_shm::directory::prepare(dir).unwrap();
    let file = SegmentName::new(name).unwrap().to_string();
    Writer::create(dir.join(file), config).unwrap()
}

/// The merged view of `dir`, read once with the default options.
pub fn read(dir: &Path) -> Scrape {
    Directory::open(dir, DirectoryOptions::default())
        .unwrap()
        .read()
        .unwrap()
}

/// The merged value of the one series of `family` (`None`: no series).
pub fn total(s: &Scrape, family: &str) -> Option<Reading> {
    let f = s.families.iter().find(|f| f.family.name == family)?;
    assert!(f.readings.len() <= 1, "{family}: one series");
    f.readings.first().cloned()
}

/// Adds to `w` the counter family `app.requests` (help `help`, no
/// dimension) with one member that counted `n`; returns that member.
pub fn count_requests(w: &Writer, help: &str, n: i64) -> MemberId {
    let f = w
        .add_family(&FamilySpec::new(
            "app.requests",
            help,
            "",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let m = w.add_member(f, "", &[]).unwrap();
    w.member_add(&m, n).unwrap();
    m
}
