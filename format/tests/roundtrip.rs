//! Writer → Reader round trips over every field and edge value, and the damage rules:
//! truncation at any offset and bit flips never panic and never return events of a damaged
//! chunk.

use iodump_format::*;
use proptest::prelude::*;

fn header() -> Header {
    Header {
        wall_clock_ns: 1_767_225_600_000_000_000,
        monotonic_ns: 5_000_000_000,
        hostname: "db1.example".into(),
        kernel_release: "6.18.0".into(),
        tool_version: "iodump test".into(),
        recorder_argv: vec!["iodump".into(), "record".into(), "-d".into(), "sda".into()],
        command_argv: Some(vec!["fio".into(), "job file.fio".into()]),
        metadata: vec![("ticket".into(), "OPS-1".into()), ("".into(), "é\n".into())],
    }
}

fn edge_events() -> Vec<Event> {
    let mut v = Vec::new();
    let ops = Op::ALL;
    for i in 0..5000u64 {
        v.push(Event {
            timestamp_ns: 5_000_000_000 + i * 1234 + (i % 7) * 3,
            dev: DevT::new(8 + (i % 3) as u32, (i % 5) as u32),
            sector: if i % 11 == 0 { u64::MAX - i } else { i * 8 },
            bytes: match i % 6 {
                0 => 0,
                1 => u32::MAX,
                2 => 4096,
                3 => 511,
                4 => 1 << 20,
                _ => 512,
            },
            op: ops[(i % 7) as usize],
            flags: Flags((i % 128) as u8),
            pid: if i % 13 == 0 {
                u32::MAX
            } else {
                1000 + (i % 4) as u32
            },
            tid: (i % 17) as u32,
            path_id: (i % 300) as u32,
            queue_ns: if i % 3 == 0 {
                None
            } else {
                Some(i * 17 % 100_000)
            },
            latency_ns: if i == 7 {
                u64::MAX
            } else {
                100_000 + i * 31 % 5_000_000
            },
            error: if i % 97 == 0 { 5 } else { 0 },
            cpu: (i % 4) as u16,
            syscall: if i % 5 == 0 {
                None
            } else {
                Some(Syscall((i % 30) as u16))
            },
            dirtier_pid: if i % 2 == 0 { None } else { Some(i as u32 * 7) },
            cgroup_id: if i % 19 == 0 {
                u64::MAX
            } else {
                4026531835 + i % 3
            },
            upper: if i % 4 == 1 {
                Some(UpperIo {
                    dev: DevT::new(253, (i % 2) as u32),
                    timestamp_ns: 5_000_000_000 + i * 1234 - (i % 9) * 100,
                })
            } else {
                None
            },
        });
    }
    v
}

fn small_opts() -> WriterOptions {
    WriterOptions {
        segment_events: 1000,
        ..WriterOptions::default()
    }
}

fn write_trace(events: &[Event], opts: WriterOptions) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), &header(), opts).unwrap();
    w.add_device(Device {
        dev: DevT::new(8, 0),
        name: "sda".into(),
        partition_of: None,
        sector_size: 512,
        start_sector: 0,
        bio_based: false,
        label: String::new(),
        stacked_on: Vec::new(),
    })
    .unwrap();
    w.add_device(Device {
        dev: DevT::new(8, 1),
        name: "sda1".into(),
        partition_of: Some(DevT::new(8, 0)),
        sector_size: 4096,
        start_sector: 2048,
        bio_based: false,
        label: String::new(),
        stacked_on: Vec::new(),
    })
    .unwrap();
    w.add_device(Device {
        dev: DevT::new(254, 0),
        name: "dm-0".into(),
        partition_of: None,
        sector_size: 512,
        start_sector: 0,
        bio_based: true,
        label: "vg-lv".into(),
        stacked_on: vec![DevT::new(8, 1), DevT::new(8, 0)],
    })
    .unwrap();
    w.add_process(Process {
        tid: 1001,
        pid: 1000,
        comm: b"mysqld".to_vec(),
        cgroup_id: 42,
        args: Some(b"/usr/sbin/mysqld --datadir=/var/lib/a b,\"c\"\n\xff".to_vec()),
    })
    .unwrap();
    w.add_path(PathEntry {
        path_id: 1,
        dev: DevT::new(8, 1),
        inode: 12,
        kind: PathKind::File,
        truncated: false,
        deleted: true,
        path: b"/var/lib/a b,\"c\"\n\xff.ibd".to_vec(),
        generation: Some(u32::MAX),
    })
    .unwrap();
    w.add_cgroup(iodump_format::cgroup::Cgroup {
        id: 42,
        path: "/system.slice/docker-0123456789abcdef.scope".into(),
        identity: iodump_format::cgroup::Identity {
            runtime: Some(iodump_format::cgroup::Runtime::Docker),
            container_id: Some("0123456789abcdef".into()),
            ..Default::default()
        },
    })
    .unwrap();
    for (i, e) in events.iter().enumerate() {
        w.push(e).unwrap();
        if i == events.len() / 2 {
            w.add_loss(Loss {
                cpu: 1,
                reason: LossReason::RingBufferFull,
                count: 17,
                start_ns: 1,
                end_ns: 2,
            })
            .unwrap();
            // The same tid seen again with a new comm (pid reuse).
            w.add_process(Process {
                tid: 1001,
                pid: 1001,
                comm: b"fio".to_vec(),
                cgroup_id: 43,
                args: None,
            })
            .unwrap();
        }
    }
    w.finish(EndInfo {
        end_monotonic_ns: 9_000_000_000,
        command_exit_status: Some(3),
        ..EndInfo::default()
    })
    .unwrap()
}

fn crc32fast_hash(b: &[u8]) -> u32 {
    // CRC-32 (IEEE), bitwise: independent of the crate's implementation.
    let mut crc = !0u32;
    for &x in b {
        crc ^= x as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn sorted(mut v: Vec<Event>) -> Vec<Event> {
    v.sort_by_key(|e| e.timestamp_ns);
    v
}

#[test]
fn round_trip_every_field() {
    let events = edge_events();
    let bytes = write_trace(&events, small_opts());
    let r = Reader::from_bytes(bytes).unwrap();
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    assert!(r.validate().is_empty());
    assert!(r.has_footer());
    assert_eq!(r.header(), &header());
    assert_eq!(r.segments().len(), 5);
    let back: Vec<Event> = r.events().collect();
    assert_eq!(back.len(), events.len());
    // Within a segment events are sorted by timestamp; these already are.
    assert_eq!(back, sorted(events.clone()));
    let end = r.end().unwrap();
    assert_eq!(end.events, 5000);
    assert_eq!(end.lost_events, 17);
    assert_eq!(end.command_exit_status, Some(3));
    assert_eq!(r.lost_events(), 17);
    let t = r.tables();
    assert_eq!(t.devices().count(), 3);
    assert_eq!(
        t.device(DevT::new(8, 1)).unwrap().partition_of,
        Some(DevT::new(8, 0))
    );
    let dm = t.device(DevT::new(254, 0)).unwrap();
    assert_eq!((dm.label.as_str(), dm.bio_based), ("vg-lv", true));
    assert_eq!(dm.stacked_on, [DevT::new(8, 1), DevT::new(8, 0)]);
    assert!(t.device(DevT::new(8, 1)).unwrap().label.is_empty());
    let p = t.path(1).unwrap();
    assert!(p.deleted && !p.truncated);
    assert_eq!(p.path, b"/var/lib/a b,\"c\"\n\xff.ibd");
    assert_eq!(p.generation, Some(u32::MAX));
    assert_eq!(r.comm(1000, 1001, 0), Some(&b"mysqld"[..]));
    assert_eq!(r.comm(1000, 1001, 4), Some(&b"fio"[..]));
    // The command line, kept as bytes; unknown (the 1.0 entry form): the comm.
    assert_eq!(
        r.args(1000, 1001, 0),
        Some(&b"/usr/sbin/mysqld --datadir=/var/lib/a b,\"c\"\n\xff"[..])
    );
    assert_eq!(r.args(1000, 1001, 4), Some(&b"fio"[..]));
    assert_eq!(r.version(), (1, 6));
    assert!(t.has_cgroup_table());
    let c = t.cgroup(42).unwrap();
    assert_eq!(c.path, "/system.slice/docker-0123456789abcdef.scope");
    assert_eq!(c.identity.label(), "docker:0123456789ab");
    assert!(t.cgroup(43).is_none());
    for s in r.segments() {
        let (a, b) = s.time_range_ns.unwrap();
        assert!(a <= b);
    }
}

#[test]
fn unsorted_input_is_sorted_within_segments() {
    let mut events = edge_events();
    events.truncate(900);
    events.reverse();
    let bytes = write_trace(&events, small_opts());
    let r = Reader::from_bytes(bytes).unwrap();
    let back: Vec<Event> = r.events().collect();
    assert_eq!(back, sorted(events));
}

#[test]
fn no_footer_reads_the_same() {
    let events = edge_events();
    let with = write_trace(&events, small_opts());
    let without = write_trace(
        &events,
        WriterOptions {
            footer: false,
            ..small_opts()
        },
    );
    assert!(without.len() < with.len());
    let a = Reader::from_bytes(with).unwrap();
    let b = Reader::from_bytes(without).unwrap();
    assert!(!b.has_footer());
    assert!(b.damage().is_empty());
    assert_eq!(
        a.events().collect::<Vec<_>>(),
        b.events().collect::<Vec<_>>()
    );
}

#[test]
fn parallel_decode_matches_sequential() {
    let events = edge_events();
    let r = Reader::from_bytes(write_trace(&events, small_opts())).unwrap();
    let par = r.par_map_segments(|_, b| b.clone());
    let seq: Vec<_> = r.batches().collect();
    assert_eq!(par.len(), seq.len());
    for ((i, a), (j, b)) in par.into_iter().zip(seq) {
        assert_eq!(i, j);
        assert_eq!(a.unwrap(), b.unwrap());
    }
}

#[test]
fn memory_limit_bounds_segment_size() {
    let w = Writer::new(
        Vec::new(),
        &header(),
        WriterOptions {
            memory_limit_bytes: 8 << 20,
            segment_events: 1 << 22,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let per = std::mem::size_of::<Event>() + 160;
    assert!(
        w.segment_events() * per <= 8 << 20,
        "{}",
        w.segment_events()
    );
    assert!(Writer::new(
        Vec::new(),
        &header(),
        WriterOptions {
            memory_limit_bytes: 1 << 20,
            ..WriterOptions::default()
        }
    )
    .is_err());
}

#[test]
fn every_zstd_minimum_match_reads_back_and_a_bad_one_is_refused() {
    let events = edge_events();
    for m in [0, 3, 5, 7] {
        let bytes = write_trace(
            &events,
            WriterOptions {
                zstd_min_match: m,
                ..small_opts()
            },
        );
        let r = Reader::from_bytes(bytes).unwrap();
        assert!(r.damage().is_empty(), "minimum match {m}");
        assert_eq!(r.events().collect::<Vec<_>>(), events, "minimum match {m}");
    }
    let bad = Writer::new(
        Vec::new(),
        &header(),
        WriterOptions {
            zstd_min_match: 99,
            ..WriterOptions::default()
        },
    );
    match bad {
        Err(WriteError::BadOptions { what }) => {
            assert!(what.contains("minimum match 99"), "{what}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a minimum match of 99 was accepted"),
    }
}

#[test]
fn file_round_trip_and_errors() {
    let dir = std::env::temp_dir().join(format!("iodump-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.iod");
    std::fs::write(&p, write_trace(&edge_events(), small_opts())).unwrap();
    let r = Reader::open(&p).unwrap();
    assert_eq!(r.events().count(), 5000);
    assert!(matches!(
        Reader::open(dir.join("missing.iod")),
        Err(ReadError::Io { .. })
    ));
    assert!(matches!(Reader::open(&dir), Err(ReadError::Io { .. })));
    std::fs::write(&p, b"hello, this is not a trace at all").unwrap();
    assert!(matches!(Reader::open(&p), Err(ReadError::NotATrace { .. })));
    let mut future = write_trace(&edge_events()[..10], small_opts());
    future[8] = 9;
    let crc = crc32fast_hash(&future[..12]);
    future[12..16].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        Reader::from_bytes(future),
        Err(ReadError::UnsupportedVersion { major: 9, .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bytes this thread has read through system calls so far (Linux), for checking that a hole
/// is jumped over rather than read.
fn thread_read_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
}

#[test]
fn sparse_holes_are_skipped_without_reading_them() {
    use std::io::{Seek, SeekFrom, Write};
    const HOLE: u64 = 64 << 30;
    let bytes = write_trace(&edge_events(), small_opts());
    let original = segment_map(&bytes);
    let cut = original[2].0 as usize;
    let dir = std::env::temp_dir().join(format!("iodump-holes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.iod");
    // The trace with a 64 GiB hole before its third segment and another after its end:
    // 128 GiB long, a few KiB on disk.
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(&bytes[..cut]).unwrap();
    f.seek(SeekFrom::Current(HOLE as i64)).unwrap();
    f.write_all(&bytes[cut..]).unwrap();
    f.set_len(bytes.len() as u64 + 2 * HOLE).unwrap();
    drop(f);
    let before = thread_read_bytes();
    let r = Reader::open(&p).unwrap();
    let read = thread_read_bytes().zip(before).map(|(a, b)| a - b);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(r.file_bytes(), bytes.len() as u64 + 2 * HOLE);
    assert_eq!(r.events().count(), 5000);
    assert!(r.end().is_some());
    let damage: Vec<(u64, &DamageKind)> = r.damage().iter().map(|d| (d.offset, &d.kind)).collect();
    let hole = DamageKind::BadChunkHeader {
        skipped_bytes: HOLE,
    };
    assert_eq!(damage.len(), 3, "{damage:?}");
    assert_eq!(damage[0], (cut as u64, &hole));
    assert_eq!(damage[1], (bytes.len() as u64 + HOLE, &hole));
    // The footer's offsets do not count the first hole.
    assert_eq!(damage[2].1, &DamageKind::BadFooter);
    if let Some(read) = read {
        assert!(read < 16 << 20, "read {read} bytes to open it");
    }
}

#[test]
fn concatenated_traces_stop_at_the_second() {
    let a = write_trace(&edge_events()[..3000], small_opts());
    let b = write_trace(&edge_events()[3000..], small_opts());
    for damaged_signature in [false, true] {
        let mut both = [&a[..], &b[..]].concat();
        if damaged_signature {
            both[a.len() + 1] ^= 1;
        }
        let r = Reader::from_bytes(both).unwrap();
        assert_eq!(r.events().count(), 3000);
        let d = r.damage().last().unwrap();
        let at = a.len() as u64 + if damaged_signature { 16 } else { 0 };
        assert_eq!(d.offset, at, "{d}");
        assert_eq!(
            d.kind,
            DamageKind::AnotherTrace {
                skipped_bytes: (a.len() + b.len()) as u64 - at
            }
        );
    }
}

/// Byte ranges `[start, end)` of every event segment chunk, with its events.
fn segment_map(bytes: &[u8]) -> Vec<(u64, u64, EventBatch)> {
    let r = Reader::from_bytes(bytes.to_vec()).unwrap();
    r.segments()
        .iter()
        .map(|s| {
            (
                s.offset,
                s.offset + s.chunk_bytes,
                r.decode_segment(s.index).unwrap(),
            )
        })
        .collect()
}

/// Reads `bytes` and checks every returned segment equals an original segment that lies
/// entirely outside `[lo, hi)` (the damaged bytes).
fn check_damaged(bytes: Vec<u8>, original: &[(u64, u64, EventBatch)], lo: u64, hi: u64) {
    let r = match Reader::from_bytes(bytes) {
        Ok(r) => r,
        Err(ReadError::NotATrace { .. }) => return,
        Err(e) => panic!("unexpected error {e}"),
    };
    let _ = r.validate();
    for s in r.segments() {
        if let Ok(b) = r.decode_segment(s.index) {
            let orig = original
                .iter()
                .find(|(start, _, _)| *start == s.offset)
                .expect("segment at an original offset");
            assert!(
                orig.1 <= lo || orig.0 >= hi,
                "segment overlapping damage decoded"
            );
            assert_eq!(b, orig.2);
        }
    }
}

#[test]
fn truncation_at_every_chunk_boundary_keeps_complete_chunks() {
    let bytes = write_trace(&edge_events(), small_opts());
    let original = segment_map(&bytes);
    for &(start, end, _) in &original {
        for cut in [start, start + 1, end - 1, end] {
            let r = Reader::from_bytes(bytes[..cut as usize].to_vec()).unwrap();
            let intact = original.iter().filter(|(_, e, _)| *e <= cut).count();
            let got = r.batches().filter(|(_, b)| b.is_ok()).count();
            assert_eq!(got, intact, "cut at {cut}");
            if cut != end && cut != start {
                assert!(!r.damage().is_empty(), "cut at {cut} not reported");
            }
            // A cut at a chunk boundary is only visible as a missing end chunk.
            assert!(r.end().is_none());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_truncation(cut_frac in 0.0f64..1.0) {
        let bytes = write_trace(&edge_events()[..3000], small_opts());
        let original = segment_map(&bytes);
        let cut = (bytes.len() as f64 * cut_frac) as usize;
        check_damaged(bytes[..cut].to_vec(), &original, cut as u64, u64::MAX);
        let r = Reader::from_bytes(bytes[..cut].to_vec());
        if let Ok(r) = r {
            let intact = original.iter().filter(|(_, e, _)| *e as usize <= cut).count();
            prop_assert_eq!(r.batches().filter(|(_, b)| b.is_ok()).count(), intact);
        }
    }

    #[test]
    fn random_bit_flips(pos_frac in 0.0f64..1.0, bit in 0u8..8, extra in proptest::option::of((0.0f64..1.0, 0u8..8))) {
        let bytes = write_trace(&edge_events()[..3000], small_opts());
        let original = segment_map(&bytes);
        let mut bad = bytes.clone();
        let pos = ((bytes.len() - 1) as f64 * pos_frac) as usize;
        bad[pos] ^= 1 << bit;
        let (mut lo, mut hi) = (pos as u64, pos as u64 + 1);
        if let Some((f, b)) = extra {
            let p2 = ((bytes.len() - 1) as f64 * f) as usize;
            bad[p2] ^= 1 << b;
            lo = lo.min(p2 as u64);
            hi = hi.max(p2 as u64 + 1);
            // Two flips: only segments outside both may decode; check the span conservatively
            // by checking each flip separately below.
            let _ = (lo, hi);
        }
        let r = Reader::from_bytes(bad.clone());
        if let Ok(r) = r {
            // A single flipped bit is always reported somewhere.
            if extra.is_none() {
                prop_assert!(!r.validate().is_empty(), "flip at {} bit {} not reported", pos, bit);
            }
            for s in r.segments() {
                if let Ok(b) = r.decode_segment(s.index) {
                    let orig = original.iter().find(|(st, _, _)| *st == s.offset);
                    prop_assert!(orig.is_some());
                    let orig = orig.unwrap();
                    prop_assert_eq!(&b, &orig.2);
                }
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        if let Ok(r) = Reader::from_bytes(data.clone()) {
            let _ = r.validate();
            let _ = r.events().count();
        }
        let mut with_magic = iodump_format::chunk::signature().to_vec();
        with_magic.extend_from_slice(&data);
        if let Ok(r) = Reader::from_bytes(with_magic) {
            let _ = r.validate();
            let _ = r.events().count();
        }
    }
}

/// Segments of at least `frames::FRAMED_MIN_ROWS` events are stored one zstd frame per
/// column (spec §4.5): they read back whole as before, any zstd decoder gives the raw
/// payload, a projection decodes only its columns (and what the sector column needs), and a
/// flipped byte in one frame is damage, never wrong values.
#[test]
fn framed_segments_read_whole_and_projected() {
    use iodump_format::frames::{parse_index, FRAMED_MIN_ROWS};
    use iodump_format::segment::{col, Columns};
    let mut events = Vec::new();
    for _ in 0..2 {
        events.extend(edge_events());
    }
    // latencies whose second byte plane is skewed random bytes (literals only codes it
    // smaller than zstd's matches do)
    let mut x = 88172645463325252u64;
    for (i, e) in events.iter_mut().enumerate() {
        e.timestamp_ns = 5_000_000_000 + i as u64 * 1000;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        e.latency_ns = 100_000 + (x & 0xff) + 256 * [0, 0, 0, 0, 1, 1, 2, 3][(x >> 8) as usize % 8];
    }
    let bytes = write_trace(&events, WriterOptions::default());
    let r = Reader::from_bytes(bytes.clone()).unwrap();
    assert!(r.damage().is_empty());
    assert_eq!(r.segments().len(), 1);
    let seg = &r.segments()[0];
    assert!(seg.events as usize >= FRAMED_MIN_ROWS);
    let at = seg.offset as usize + 32;
    let stored = &bytes[at..at + seg.header.stored_len as usize];
    let idx = parse_index(stored, seg.header.raw_len as usize)
        .unwrap()
        .expect("a framed segment");
    assert_eq!(idx.rows, events.len());
    assert_eq!(idx.frames.len(), col::COUNT);
    // Since 1.6 a column's planes are zstd frames of their own within its frame; without
    // plane frames (1.5's layout) each column is one zstd frame, and both read the same.
    let zstd_frames = |stored: &[u8], idx: &iodump_format::frames::Index| -> Vec<usize> {
        idx.frames
            .iter()
            .map(|f| {
                iodump_format::frames::zstd_frames(&stored[f.offset..f.offset + f.stored_len])
                    .unwrap()
                    .len()
            })
            .collect()
    };
    let counts = zstd_frames(stored, &idx);
    assert!(counts.iter().any(|&k| k > 1), "no plane frames: {counts:?}");
    // Planes coded as literals only where that is no larger: more frames without sequences
    // than zstd's match finder alone writes, a trace no larger, the same payload.
    let without_sequences = |stored: &[u8], idx: &iodump_format::frames::Index| -> usize {
        idx.frames
            .iter()
            .flat_map(|f| {
                iodump_format::frames::zstd_frames(&stored[f.offset..f.offset + f.stored_len])
                    .unwrap()
            })
            .filter(|z| iodump_format::literals::frame_has_sequences(z) == Some(false))
            .count()
    };
    // The trace written with other options: its bytes, reader, first segment's stored
    // payload, index and raw length.
    let other = |opts: WriterOptions| {
        let bytes = write_trace(&events, opts);
        let r = Reader::from_bytes(bytes.clone()).unwrap();
        let s = &r.segments()[0];
        let stored = bytes[s.offset as usize + 32..][..s.header.stored_len as usize].to_vec();
        let raw_len = s.header.raw_len as usize;
        let idx = parse_index(&stored, raw_len).unwrap().unwrap();
        (bytes, r, stored, idx, raw_len)
    };
    let (lz, rz, stz, idxz, rawz) = other(WriterOptions {
        literal_planes: false,
        ..WriterOptions::default()
    });
    let (lit_frames, lz_frames) = (
        without_sequences(stored, &idx),
        without_sequences(&stz, &idxz),
    );
    assert!(
        lit_frames > lz_frames,
        "{lit_frames} vs {lz_frames} frames without sequences"
    );
    assert!(
        bytes.len() <= lz.len(),
        "{} vs {} bytes",
        bytes.len(),
        lz.len()
    );
    assert_eq!(rz.events().collect::<Vec<_>>(), events);
    assert_eq!(
        zstd::bulk::decompress(&stz, rawz).unwrap(),
        zstd::bulk::decompress(stored, seg.header.raw_len as usize).unwrap()
    );
    let (_, r1, st1, idx1, raw1) = other(WriterOptions {
        plane_frames: false,
        ..WriterOptions::default()
    });
    assert!(zstd_frames(&st1, &idx1).iter().all(|&k| k == 1));
    assert_eq!(r1.events().collect::<Vec<_>>(), events);
    assert_eq!(
        zstd::bulk::decompress(&st1, raw1).unwrap(),
        zstd::bulk::decompress(stored, seg.header.raw_len as usize).unwrap()
    );
    assert_eq!(
        zstd::bulk::decompress(stored, seg.header.raw_len as usize)
            .unwrap()
            .len(),
        seg.header.raw_len as usize
    );
    let all: Vec<Event> = r.events().collect();
    assert_eq!(all, events);
    let whole = r.decode_segment(0).unwrap();
    // Three columns: those, and nothing else.
    let want = Columns::of(&[col::PATH_ID, col::BYTES, col::LATENCY_NS]);
    let mut b = EventBatch::default();
    let mut dec = SegmentDecoder::new();
    r.decode_segment_projected(0, want, &mut b, &mut dec)
        .unwrap();
    assert_eq!(b.len(), events.len());
    assert_eq!(b.path_id, whole.path_id);
    assert_eq!(b.bytes, whole.bytes);
    assert_eq!(b.latency_ns, whole.latency_ns);
    assert!(b.timestamp_ns.is_empty() && b.sector.is_empty() && b.queue_ns.values.is_empty());
    // The sector column brings what its sequential transform needs.
    r.decode_segment_projected(0, Columns::of(&[col::SECTOR]), &mut b, &mut dec)
        .unwrap();
    assert_eq!(b.sector, whole.sector);
    assert_eq!((&b.dev, &b.path_id), (&whole.dev, &whole.path_id));
    // Nullable columns keep their nulls.
    r.decode_segment_projected(
        0,
        Columns::of(&[col::UPPER_DEV, col::QUEUE_NS]),
        &mut b,
        &mut dec,
    )
    .unwrap();
    assert_eq!(b.upper_dev, whole.upper_dev);
    assert_eq!(b.queue_ns, whole.queue_ns);
    // A damaged frame: the projection that reads it reports damage, one that does not still
    // reads (the CRC covers the whole payload, so both are damage).
    let f = idx.frames[col::LATENCY_NS as usize - 1];
    let mut bad = bytes.clone();
    bad[at + f.offset + f.stored_len / 2] ^= 0x55;
    let rb = Reader::from_bytes(bad).unwrap();
    assert!(rb
        .decode_segment_projected(0, want, &mut b, &mut dec)
        .is_err());
    assert!(b.is_empty());
    // An index whose first frame names the second frame's column, the CRCs made to match (a
    // writer's bug, not a flipped bit): damage for a reader of every column too, as for a
    // projection (spec §4.5), never the events of a payload read past its index.
    let mut forged = bytes.clone();
    let varint_len = |b: &[u8]| b.iter().position(|x| x & 0x80 == 0).unwrap() + 1;
    let mut k = at + 12; // skippable frame magic and length, "IODX"
    k += varint_len(&forged[k..]); // rows
    k += varint_len(&forged[k..]); // frames
    assert_eq!(u64::from(forged[k]), idx.frames[0].column_id);
    forged[k] = idx.frames[1].column_id as u8;
    let stored_end = at + seg.header.stored_len as usize;
    let crc = crc32fast::hash(&forged[at..stored_end]);
    let h = seg.offset as usize;
    forged[h + 24..h + 28].copy_from_slice(&crc.to_le_bytes());
    let hcrc = crc32fast::hash(&forged[h..h + 28]);
    forged[h + 28..h + 32].copy_from_slice(&hcrc.to_le_bytes());
    let rf = Reader::from_bytes(forged).unwrap();
    assert!(rf.damage().is_empty(), "{:?}", rf.damage());
    assert!(rf.decode_segment(0).is_err());
    assert_eq!(rf.events().count(), 0);
    assert!(rf
        .decode_segment_projected(0, want, &mut b, &mut dec)
        .is_err());
}

/// A sink that takes `room` bytes, then fails as a full file system does.
struct Full {
    out: Vec<u8>,
    room: usize,
}

impl std::io::Write for Full {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = b.len().min(self.room - self.out.len());
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
        }
        self.out.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A segment that could not be written stays buffered: taken from the failed writer and
/// given to another, it is written there whole; the failed output cut at the bytes the
/// writer counts reads as a trace of the segments before, none damaged.
#[test]
fn a_segment_that_found_no_room_can_be_written_elsewhere() {
    let events = edge_events();
    // Room for about half the trace.
    let room = write_trace(&events, small_opts()).len() / 2;
    let mut w = Writer::new(
        Full {
            out: Vec::new(),
            room,
        },
        &header(),
        small_opts(),
    )
    .unwrap();
    let mut failed_at = None;
    for (i, e) in events.iter().enumerate() {
        if w.push(e).is_err() {
            failed_at = Some(i);
            break;
        }
    }
    let failed_at = failed_at.expect("the sink fills up");
    let pending = w.take_buffered();
    assert!(!pending.is_empty() && pending.len() <= 1000);
    assert_eq!(w.stats().events as usize, failed_at + 1 - pending.len());
    let mut cut = w.get_ref().out.clone();
    cut.truncate(w.stats().bytes_written as usize);
    let before = Reader::from_bytes(cut).unwrap();
    assert!(before.validate().is_empty());
    assert_eq!(before.events().count() as u64, w.stats().events);

    let mut next = Writer::new(Vec::new(), &header(), small_opts()).unwrap();
    next.extend_buffered(&pending);
    for e in &events[failed_at + 1..] {
        next.push(e).unwrap();
    }
    let after = Reader::from_bytes(next.finish(EndInfo::default()).unwrap()).unwrap();
    let mut all: Vec<Event> = before.events().collect();
    all.extend(after.events());
    all.sort_by_key(|e| e.timestamp_ns);
    assert_eq!(all, sorted(events), "every event, once");
}

/// A thread that exec'd or renamed itself while its events were buffered: the segment is
/// cut where its new entry came, so each event reads the name it had (a reader applies an
/// entry from the segment after it); a thread's first entry cuts nothing.
#[test]
fn a_new_name_mid_segment_applies_from_where_it_came() {
    let mut w = Writer::new(Vec::new(), &header(), small_opts()).unwrap();
    let entry = |tid: u32, comm: &[u8]| Process {
        tid,
        pid: tid,
        comm: comm.to_vec(),
        cgroup_id: 0,
        args: None,
    };
    let ev = |ts: u64, tid: u32| Event {
        timestamp_ns: ts,
        dev: DevT::new(8, 0),
        tid,
        pid: tid,
        bytes: 4096,
        ..Event::default()
    };
    w.add_process(entry(5, b"sh")).unwrap();
    for i in 0..3 {
        w.push(&ev(10 + i, 5)).unwrap();
    }
    // A new thread mid-segment: no cut.
    w.add_process(entry(6, b"cat")).unwrap();
    w.push(&ev(20, 6)).unwrap();
    // Thread 5 execs dd, then renames itself twice at one point.
    w.add_process(entry(5, b"dd")).unwrap();
    for i in 0..3 {
        w.push(&ev(30 + i, 5)).unwrap();
    }
    w.add_process(entry(5, b"x")).unwrap();
    w.add_process(entry(5, b"worker")).unwrap();
    w.push(&ev(40, 5)).unwrap();
    w.push(&ev(41, 6)).unwrap();
    let bytes = w.finish(EndInfo::default()).unwrap();
    let r = Reader::from_bytes(bytes).unwrap();
    let names: Vec<(u32, String)> = (0..r.segments().len())
        .flat_map(|s| {
            let b = r.decode_segment(s).unwrap();
            (0..b.len())
                .map(|i| {
                    let tid = b.tid[i];
                    let comm = &r.tables().process(tid, s).unwrap().comm;
                    (tid, String::from_utf8_lossy(comm).into_owned())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let want: Vec<(u32, String)> = [
        (5, "sh"),
        (5, "sh"),
        (5, "sh"),
        (6, "cat"),
        (5, "dd"),
        (5, "dd"),
        (5, "dd"),
        (5, "worker"),
        (6, "cat"),
    ]
    .iter()
    .map(|(t, c)| (*t, c.to_string()))
    .collect();
    assert_eq!(names, want);
    assert_eq!(r.segments().len(), 3);
}
