//! Tests of the generated traces as a whole: header, determinism, counts, sink errors, and
//! each workload's character (sequentiality, latencies, rates). The sink that records calls
//! is shared with the generator's own tests.

use std::collections::{HashMap, HashSet};

use iodump_format::*;

use crate::*;

/// Every call a sink receives, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Call {
    Device(Device),
    Process(Process),
    Path(PathEntry),
    Event(Event),
    Loss(Loss),
}

/// A sink that records every call.
#[derive(Default)]
pub(crate) struct Record(pub(crate) Vec<Call>);

impl SynthSink for Record {
    type Error = ();
    fn device(&mut self, d: &Device) -> Result<(), ()> {
        self.0.push(Call::Device(d.clone()));
        Ok(())
    }
    fn process(&mut self, p: &Process) -> Result<(), ()> {
        self.0.push(Call::Process(p.clone()));
        Ok(())
    }
    fn path(&mut self, p: &PathEntry) -> Result<(), ()> {
        self.0.push(Call::Path(p.clone()));
        Ok(())
    }
    fn event(&mut self, e: &Event) -> Result<(), ()> {
        self.0.push(Call::Event(*e));
        Ok(())
    }
    fn loss(&mut self, l: &Loss) -> Result<(), ()> {
        self.0.push(Call::Loss(*l));
        Ok(())
    }
}

pub(crate) fn params(workload: Workload, events: u64, seed: u64) -> SynthParams {
    SynthParams {
        events,
        workload,
        seed,
    }
}

/// The calls of generating `events` events of `w` with `seed`, and the summary.
pub(crate) fn record(w: Workload, events: u64, seed: u64) -> (Vec<Call>, SynthSummary) {
    let mut r = Record::default();
    let sum = generate(&params(w, events, seed), &mut r).unwrap();
    (r.0, sum)
}

/// The events among `calls`.
pub(crate) fn events(calls: &[Call]) -> impl Iterator<Item = &Event> {
    calls.iter().filter_map(|c| match c {
        Call::Event(e) => Some(e),
        _ => None,
    })
}

#[test]
fn header_describes_the_run() {
    let h = header(&params(Workload::Oltp, 1234, 42));
    assert_eq!(h.hostname, "synth-oltp");
    assert_eq!(h.kernel_release, "6.18.0-synth");
    assert!(h.tool_version.starts_with("iodump ") && h.tool_version.ends_with(" synth"));
    assert_eq!(
        h.recorder_argv,
        [
            "iodump",
            "synth",
            "--workload",
            "oltp",
            "--events",
            "1234",
            "--seed",
            "42"
        ]
    );
    assert!(h.metadata.contains(&("workload".into(), "oltp".into())));
    assert!(h.metadata.contains(&("seed".into(), "42".into())));
    assert_eq!(h.monotonic_ns, MONO_BASE_NS);
    assert_eq!(h.wall_clock_ns, WALL_BASE_NS + 42_000_000_000);
    assert_eq!(h, header(&params(Workload::Oltp, 1234, 42)));
}

#[test]
fn deterministic_per_params() {
    for w in Workload::ALL {
        let (a, sa) = record(w, 30_000, 7);
        let (b, sb) = record(w, 30_000, 7);
        assert_eq!(sa, sb);
        assert!(a == b, "{} not deterministic", w.name());
        let (c, _) = record(w, 30_000, 8);
        assert!(a != c, "{}: seed has no effect", w.name());
        // A shorter run is a prefix of a longer one.
        let (d, _) = record(w, 10_000, 7);
        assert_eq!(&a[..d.len()], &d[..]);
    }
}

#[test]
fn exact_event_count_and_summary() {
    for w in Workload::ALL {
        for n in [0, 1, 2, 17, 5_000] {
            let (calls, sum) = record(w, n, 3);
            let count = |f: fn(&Call) -> bool| calls.iter().filter(|c| f(c)).count() as u64;
            assert_eq!(count(|c| matches!(c, Call::Event(_))), n);
            assert_eq!(sum.events, n);
            assert_eq!(sum.devices, count(|c| matches!(c, Call::Device(_))));
            assert_eq!(sum.devices, 7);
            assert_eq!(sum.processes, count(|c| matches!(c, Call::Process(_))));
            assert_eq!(sum.paths, count(|c| matches!(c, Call::Path(_))));
            let lost: u64 = calls
                .iter()
                .map(|c| if let Call::Loss(l) = c { l.count } else { 0 })
                .sum();
            assert_eq!(sum.lost_events, lost);
            let ts: Vec<u64> = events(&calls).map(|e| e.timestamp_ns).collect();
            assert_eq!(sum.first_timestamp_ns, ts.first().copied().unwrap_or(0));
            assert_eq!(sum.last_timestamp_ns, ts.last().copied().unwrap_or(0));
            if n == 0 {
                assert_eq!((sum.processes, sum.paths), (0, 0));
            }
        }
    }
}

#[test]
fn sink_errors_stop_generation() {
    struct Fail(u64);
    impl SynthSink for Fail {
        type Error = u64;
        fn device(&mut self, _: &Device) -> Result<(), u64> {
            Ok(())
        }
        fn process(&mut self, _: &Process) -> Result<(), u64> {
            Ok(())
        }
        fn path(&mut self, _: &PathEntry) -> Result<(), u64> {
            Ok(())
        }
        fn event(&mut self, _: &Event) -> Result<(), u64> {
            self.0 += 1;
            if self.0 == 100 {
                Err(self.0)
            } else {
                Ok(())
            }
        }
        fn loss(&mut self, _: &Loss) -> Result<(), u64> {
            Ok(())
        }
    }
    let mut s = Fail(0);
    assert_eq!(
        generate(&params(Workload::Mixed, 1000, 1), &mut s),
        Err(100)
    );
    assert_eq!(s.0, 100);
}

#[test]
fn seqwrite_is_sequential_per_stream() {
    let (calls, _) = record(Workload::SeqWrite, 200_000, 2);
    let mut end: HashMap<u32, u64> = HashMap::new();
    let (mut cont, mut total, mut big) = (0u64, 0u64, 0u64);
    let mut writeback = 0;
    for e in events(&calls) {
        if e.op != Op::Write || e.syscall == Some(Syscall::JOURNAL) {
            continue;
        }
        if e.bytes >= 128 * 1024 {
            big += 1;
        }
        if let Some(&prev) = end.get(&e.path_id) {
            total += 1;
            cont += (prev == e.sector) as u64;
        }
        end.insert(e.path_id, e.sector + e.bytes as u64 / 512);
        if e.syscall == Some(Syscall::WRITEBACK) && !e.flags.contains(Flags::META) {
            writeback += 1;
            assert!(e.dirtier_pid.is_some() && e.dirtier_pid != Some(e.pid));
        }
    }
    assert!(cont * 100 >= total * 90, "{cont}/{total} contiguous");
    assert!(big * 100 >= total * 80, "{big}/{total} large");
    assert!(writeback > 10_000);
    let commits = events(&calls)
        .filter(|e| e.flags.contains(Flags::PREFLUSH) && e.flags.contains(Flags::FUA))
        .count();
    assert!(commits > 0);
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn latencies_are_plausible() {
    let (calls, _) = record(Workload::Mixed, 200_000, 9);
    let lat = |f: &dyn Fn(&Event) -> bool| -> Vec<u64> {
        events(&calls)
            .filter(|e| f(e))
            .map(|e| e.latency_ns)
            .collect()
    };
    let nvme = lat(&|e| {
        e.dev.major() == 259 && e.op == Op::Read && e.bytes == 4096 && e.flags == Flags(0)
    });
    let m = median(nvme.clone());
    assert!((80_000..=150_000).contains(&m), "nvme 4k read median {m}");
    let slow = nvme.iter().filter(|&&l| l > 10 * m).count();
    assert!(
        slow * 1000 >= nvme.len() && slow * 100 <= nvme.len(),
        "{slow} slow of {}",
        nvme.len()
    );
    let zram = median(lat(&|e| e.dev.major() == 252));
    assert!((5_000..=20_000).contains(&zram), "zram median {zram}");
    let (calls2, _) = record(Workload::Oltp, 50_000, 9);
    let sata: Vec<u64> = events(&calls2)
        .filter(|e| e.dev.major() == 8 && e.op == Op::Read)
        .map(|e| e.latency_ns)
        .collect();
    if !sata.is_empty() {
        let m = median(sata);
        assert!((2_000_000..=8_000_000).contains(&m), "sata read median {m}");
    }
    // Not rounded.
    assert!(events(&calls).filter(|e| e.latency_ns % 1000 != 0).count() > 1000);
}

#[test]
fn workloads_have_their_character() {
    let (calls, _) = record(Workload::Mixed, 300_000, 4);
    let ev: Vec<&Event> = events(&calls).collect();
    let any = |f: &dyn Fn(&Event) -> bool| ev.iter().any(|e| f(e));
    assert!(any(&|e| e.op == Op::Discard));
    assert!(any(&|e| e.op == Op::Flush));
    assert!(any(
        &|e| e.flags.contains(Flags::READAHEAD) && e.syscall == Some(Syscall::READAHEAD)
    ));
    assert!(any(&|e| e.syscall == Some(Syscall::PAGE_FAULT)));
    assert!(any(&|e| e.syscall.is_none()));
    assert!(any(&|e| e.error == 5));
    let errors = ev.iter().filter(|e| e.error != 0).count();
    assert!(errors < 50, "{errors} errors");

    let (calls, _) = record(Workload::RandRead, 100_000, 4);
    let fio = events(&calls)
        .filter(|e| e.op == Op::Read && e.path_id as usize <= 200_000)
        .filter(|e| {
            matches!(
                e.syscall,
                Some(Syscall::IO_SUBMIT | Syscall::IO_URING_ENTER | Syscall::PREAD64)
            )
        })
        .count();
    assert!(fio > 70_000);
    let small = events(&calls)
        .filter(|e| e.op == Op::Read && e.bytes == 4096)
        .count();
    assert!(small > 60_000);

    let (calls, _) = record(Workload::Oltp, 100_000, 4);
    let ev: Vec<&Event> = events(&calls).collect();
    let count = |f: &dyn Fn(&Event) -> bool| ev.iter().filter(|e| f(e)).count();
    assert!(
        count(&|e| e.op == Op::Read && e.bytes == 16384 && e.syscall == Some(Syscall::PREAD64))
            > 40_000
    );
    assert!(count(&|e| e.flags.contains(Flags::SYNC) && e.flags.contains(Flags::FUA)) > 1_000);
    assert!(count(&|e| e.op == Op::Flush) > 100);
    assert!(
        count(&|e| e.syscall == Some(Syscall::JOURNAL) && e.flags.contains(Flags::META)) > 1_000
    );
    assert!(count(&|e| e.flags.contains(Flags::META) && e.op == Op::Read) > 100);
    let pids: HashSet<u32> = ev.iter().filter(|e| e.pid == 1423).map(|e| e.tid).collect();
    assert!(pids.len() >= 20, "mysqld threads: {}", pids.len());
}

#[test]
fn timestamps_follow_the_workload_rate() {
    for w in Workload::ALL {
        let (_, sum) = record(w, 200_000, 21);
        let secs = (sum.last_timestamp_ns - sum.first_timestamp_ns) as f64 / 1e9;
        let rate = 200_000.0 / secs;
        assert!(
            rate > w.iops() * 0.4 && rate < w.iops() * 2.5,
            "{}: {rate} IOPS",
            w.name()
        );
    }
}
