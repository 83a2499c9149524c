//! Fuzzes the trace reader: any bytes must give a clean error or a reader whose every
//! accessor and segment decode returns without panicking.
#![no_main]

use iodump_format::segment::{col, Columns};
use iodump_format::Reader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for bytes in [data.to_vec(), {
        // Also behind a valid signature, so the fuzzer reaches chunk parsing quickly.
        let mut v = iodump_format::chunk::signature().to_vec();
        v.extend_from_slice(data);
        v
    }] {
        if let Ok(r) = Reader::from_bytes(bytes) {
            let _ = r.header();
            let _ = r.tables().devices().count();
            let _ = r.validate();
            let _ = r.events().count();
            // Projections: a framed segment's index and frames are checked apart.
            let mut b = iodump_format::EventBatch::default();
            let mut dec = iodump_format::SegmentDecoder::new();
            for want in [
                Columns::of(&[col::PATH_ID, col::BYTES, col::LATENCY_NS]),
                Columns::of(&[col::SECTOR, col::UPPER_DEV]),
            ] {
                for i in 0..r.segments().len() {
                    let _ = r.decode_segment_projected(i, want, &mut b, &mut dec);
                }
            }
            let _ = iodump_format::summary::summarize(&r);
        }
    }
});
