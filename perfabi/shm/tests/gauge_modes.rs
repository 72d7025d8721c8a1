//! Gauge modes (`spec/PERFABI.md` §5.1, §15.4): a writer declares how a
//! gauge family merges across a directory's writers, and a reader decodes
//! the mode from the segment; a mode on another kind is refused.
#![cfg(not(loom))]

use perfabi::{Error, FamilySpec, GaugeMode, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};

#[test]
fn a_gauge_family_carries_its_mode_to_readers() {
    let dir = tempfile::tempdir().unwrap();
    let w = Writer::create(
        dir.path().join("seg"),
        &Config {
            nr_cpus: Some(2),
            max_instances: 16,
            damon_capacity: 64,
            ..Config::default()
        },
    )
    .unwrap();
    let modes = [
        GaugeMode::Sum,
        GaugeMode::Max,
        GaugeMode::Min,
        GaugeMode::All,
    ];
    for m in modes {
        let name = format!("pool.{}", m.as_str());
        let f = w
            .add_family(&FamilySpec::gauge(&name, "In use", "", Unit::COUNT, m))
            .unwrap();
        let g = w.add_member(f, "", &[]).unwrap();
        w.member_set(&g, 7).unwrap();
    }
    let s = w.snapshot().unwrap();
    for m in modes {
        let name = format!("pool.{}", m.as_str());
        let f = s.families.iter().find(|f| f.name == name).unwrap();
        assert_eq!(f.gauge_mode, m, "{name}");
        assert_eq!(f.kind, Kind::Gauge);
    }
    // A mode belongs to gauges only.
    for kind in [Kind::Counter, Kind::Peak] {
        let spec = FamilySpec {
            gauge_mode: GaugeMode::Max,
            ..FamilySpec::new("bad.mode", "", "", kind, Unit::COUNT)
        };
        assert_eq!(w.add_family(&spec), Err(Error::WrongKind), "{kind:?}");
    }
}
