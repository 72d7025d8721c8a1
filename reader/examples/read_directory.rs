//! Workers write their own segments into one directory; one reader sees
//! them merged. `cargo run -p perfabi-reader --example read_directory [DIR]`
use perfabi::{FamilySpec, GaugeMode, Kind, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::writer::{Config, Writer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // $PERFABI_DIR, else /dev/shm/perfabi-<uid>
    let dir = std::env::args().nth(1).map(Into::into);
    let dir = dir.unwrap_or_else(perfabi_shm::directory::default_dir);

    // In each worker process, once: a segment of its own in the directory.
    let workers = (1..=2)
        .map(|_| Writer::create_in(&dir, "web", &Config::default()))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, w) in (1..).zip(&workers) {
        let spec = FamilySpec::new(
            "http.requests",
            "Requests served",
            "",
            Kind::Counter,
            Unit::COUNT,
        );
        w.member_add(&w.add_member(w.add_family(&spec)?, "", &[])?, 10 * i)?;
        let spec = FamilySpec::gauge(
            "http.in_flight",
            "Requests in flight",
            "",
            Unit::COUNT,
            GaugeMode::Max,
        );
        w.member_set(&w.add_member(w.add_family(&spec)?, "", &[])?, 2 + i)?;
    }

    // The reader: every segment of the directory, merged.
    let mut d = Directory::open(&dir, DirectoryOptions::default())?;
    let scrape = d.read()?;
    for f in &scrape.families {
        for (m, r) in f.family.members.iter().zip(&f.readings) {
            println!("{} {:?} = {:?}", f.family.name, m.labels, r);
        }
    }
    for p in &scrape.problems {
        eprintln!("left out: {p}"); // a bad file or a conflicting family, alone
    }
    Ok(())
}
