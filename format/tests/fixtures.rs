//! The committed fixtures still read back (files written by earlier builds stay readable),
//! decode to exactly what `synth` generates for the same parameters, and their damage is
//! reported where it was made.

use std::path::PathBuf;

use iodump_format::*;
use iodump_synth::{self as synth, SynthParams, SynthSink, Workload};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
}

#[derive(Default)]
struct Events(Vec<Event>);
impl SynthSink for Events {
    type Error = ();
    fn device(&mut self, _: &Device) -> Result<(), ()> {
        Ok(())
    }
    fn process(&mut self, _: &Process) -> Result<(), ()> {
        Ok(())
    }
    fn path(&mut self, _: &PathEntry) -> Result<(), ()> {
        Ok(())
    }
    fn event(&mut self, e: &Event) -> Result<(), ()> {
        self.0.push(*e);
        Ok(())
    }
    fn loss(&mut self, _: &Loss) -> Result<(), ()> {
        Ok(())
    }
}

fn generated(workload: Workload, events: u64, seed: u64) -> Vec<Event> {
    let mut s = Events::default();
    synth::generate(
        &SynthParams {
            events,
            workload,
            seed,
        },
        &mut s,
    )
    .unwrap();
    s.0
}

fn segments(r: &Reader) -> Vec<Option<Vec<Event>>> {
    r.batches()
        .map(|(_, b)| b.ok().map(|b| b.iter().collect()))
        .collect()
}

#[test]
fn intact_fixtures_decode_to_the_synth_events() {
    for (name, w, n, seed, seg) in [
        ("oltp-5k.iod", Workload::Oltp, 5000, 11, 1000),
        ("mixed-20k.iod", Workload::Mixed, 20000, 12, 4000),
    ] {
        let r = Reader::open(fixture(name)).unwrap();
        assert!(r.validate().is_empty(), "{name}");
        assert!(r.has_footer() && r.end().is_some());
        let want = generated(w, n, seed);
        let got: Vec<Event> = r.events().collect();
        assert_eq!(got.len(), want.len(), "{name}");
        assert!(got == want, "{name}: decoded events differ from synth");
        assert_eq!(r.segments().len() as u64, n / seg);
        // Every path and thread an event names is in the tables.
        for e in &got {
            assert!(r.tables().path(e.path_id).is_some() || e.path_id == 0);
            assert!(r.comm(e.pid, e.tid, 0).is_some());
        }
        assert_eq!(r.header().hostname, format!("synth-{}", w.name()));
        // Written by format 1.0: no command lines; readers fall back to the comm.
        assert_eq!(r.version(), (1, 0));
        assert!(r.tables().processes().all(|p| p.args.is_none()));
        assert!(r.tables().paths().all(|p| p.generation.is_none()));
        let e = &got[0];
        assert_eq!(r.args(e.pid, e.tid, 0), r.comm(e.pid, e.tid, 0));
    }
}

#[test]
fn bitflip_fixture_loses_exactly_one_segment() {
    let good = Reader::open(fixture("oltp-5k.iod")).unwrap();
    let bad = Reader::open(fixture("oltp-5k-bitflip.iod")).unwrap();
    let damage = bad.validate();
    assert_eq!(damage.len(), 1, "{damage:?}");
    assert!(matches!(
        damage[0].kind,
        DamageKind::ChecksumMismatch { .. }
    ));
    assert_eq!(damage[0].chunk, Some("events"));
    let (g, b) = (segments(&good), segments(&bad));
    assert_eq!(g.len(), b.len());
    let lost: Vec<usize> = (0..b.len()).filter(|&i| b[i].is_none()).collect();
    assert_eq!(lost, vec![2]);
    for i in 0..g.len() {
        if i != 2 {
            assert_eq!(g[i], b[i], "segment {i}");
        }
    }
    let flipped_at = std::fs::metadata(fixture("oltp-5k.iod")).unwrap().len() / 2;
    let s = bad.segments()[2];
    assert!(s.offset <= flipped_at && flipped_at < s.offset + s.chunk_bytes);
    assert_eq!(damage[0].offset, s.offset);
}

#[test]
fn truncated_fixture_keeps_the_segments_before_the_cut() {
    let good = Reader::open(fixture("mixed-20k.iod")).unwrap();
    let cut = Reader::open(fixture("mixed-20k-truncated.iod")).unwrap();
    let d = cut.damage();
    assert_eq!(d.len(), 1);
    assert!(matches!(d[0].kind, DamageKind::Truncated { .. }));
    assert!(cut.end().is_none());
    let (g, c) = (segments(&good), segments(&cut));
    assert_eq!(c.len(), 2);
    assert_eq!(&g[..2], &c[..]);
}
