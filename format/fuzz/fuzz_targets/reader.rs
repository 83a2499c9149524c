//! Fuzzes the trace reader: any bytes must give a clean error or a reader whose every
//! accessor and segment decode returns without panicking.
#![no_main]

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
            let _ = iodump_format::summary::summarize(&r);
        }
    }
});
