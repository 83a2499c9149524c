//! Parquet tables read back with the parquet crate's own reader match the trace.

use std::path::PathBuf;

use arrow_array::{Array, Int64Array, StringArray, TimestampMicrosecondArray};
use iodump_analyze::to_parquet::Partitioning;
use iodump_analyze::{convert, Input};
use iodump_format::Reader;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
}

fn read_all(p: &std::path::Path) -> Vec<arrow_array::RecordBatch> {
    let f = std::fs::File::open(p).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

#[test]
fn tables_match_the_trace() {
    let dir = std::env::temp_dir().join(format!("iodump-convert-{}", std::process::id()));
    let a = Reader::open(fixture("mixed-20k.iod")).unwrap();
    let b = Reader::open(fixture("oltp-5k.iod")).unwrap();
    let s = convert(
        &[
            Input {
                name: "mixed".into(),
                reader: &a,
            },
            Input {
                name: "oltp".into(),
                reader: &b,
            },
        ],
        &dir,
        Partitioning::default(),
    )
    .unwrap();
    assert_eq!(s.events, 25_000);
    let io = read_all(&dir.join("io.parquet"));
    let rows: usize = io.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 25_000);
    // Independent sums from the reader.
    let want_bytes: u64 = a.events().chain(b.events()).map(|e| e.bytes as u64).sum();
    let want_lat: u64 = a.events().chain(b.events()).map(|e| e.latency_ns).sum();
    let (mut bytes, mut lat, mut mixed_rows) = (0u64, 0u64, 0usize);
    for batch in &io {
        let by = batch.column_by_name("bytes").unwrap();
        let by = by.as_any().downcast_ref::<Int64Array>().unwrap();
        bytes += by.values().iter().map(|&x| x as u64).sum::<u64>();
        let l = batch.column_by_name("latency_ns").unwrap();
        lat += l
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .iter()
            .map(|&x| x as u64)
            .sum::<u64>();
        let t = batch.column_by_name("trace").unwrap();
        let t = t.as_any().downcast_ref::<StringArray>().unwrap();
        mixed_rows += (0..t.len()).filter(|&i| t.value(i) == "mixed").count();
    }
    assert_eq!(bytes, want_bytes);
    assert_eq!(lat, want_lat);
    assert_eq!(mixed_rows, 20_000);
    // First row: UTC timestamp in microseconds (rounded down) and exact in nanoseconds, the
    // monotonic clock as recorded, comm and path resolved.
    let first = a.events().next().unwrap();
    let batch = &io[0];
    let utc_ns = a.header().to_utc_ns(first.timestamp_ns);
    let ts = batch.column_by_name("timestamp").unwrap();
    let ts = ts
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .unwrap();
    assert_eq!(ts.timezone(), Some("UTC"));
    assert_eq!(ts.value(0), utc_ns.div_euclid(1000));
    let int = |name: &str| {
        batch
            .column_by_name(name)
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0)
    };
    assert_eq!(int("timestamp_ns"), utc_ns);
    assert_eq!(int("monotonic_ns") as u64, first.timestamp_ns);
    assert_eq!(int("sector") as u64, first.sector);
    // No unsigned type and no nanosecond timestamp in any table: engines such as Spark refuse
    // or widen them.
    for table in ["io", "processes", "files", "devices", "losses", "cgroups"] {
        let f = std::fs::File::open(dir.join(format!("{table}.parquet"))).unwrap();
        let b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
        let kv = b.metadata().file_metadata().key_value_metadata().unwrap();
        assert!(
            kv.iter()
                .any(|k| k.key == "iodump.layout" && k.value.as_deref() == Some("2")),
            "{table}: {kv:?}"
        );
        for f in b.schema().fields() {
            use arrow_schema::{DataType::*, TimeUnit};
            assert!(
                matches!(
                    f.data_type(),
                    Utf8 | Boolean | Int32 | Int64 | Timestamp(TimeUnit::Microsecond, Some(_))
                ),
                "{}: {}",
                f.name(),
                f.data_type()
            );
        }
    }
    let comm = batch.column_by_name("comm").unwrap();
    let comm = comm.as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(
        comm.value(0).as_bytes(),
        a.comm(first.pid, first.tid, 0).unwrap()
    );
    let path = batch.column_by_name("path").unwrap();
    let path = path.as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(
        path.value(0).as_bytes(),
        a.tables().path(first.path_id).unwrap().path.as_slice()
    );
    // Small tables.
    let files: usize = read_all(&dir.join("files.parquet"))
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(files, a.tables().path_count() + b.tables().path_count());
    let devices: usize = read_all(&dir.join("devices.parquet"))
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(devices, 14);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hive_partitions_by_host_and_date() {
    let dir = std::env::temp_dir().join(format!("iodump-convert-hive-{}", std::process::id()));
    let a = Reader::open(fixture("mixed-20k.iod")).unwrap();
    let b = Reader::open(fixture("oltp-5k.iod")).unwrap();
    let s = convert(
        &[
            Input {
                name: "mixed".into(),
                reader: &a,
            },
            Input {
                name: "oltp".into(),
                reader: &b,
            },
        ],
        &dir,
        Partitioning {
            host: true,
            date: true,
        },
    )
    .unwrap();
    assert_eq!(s.events, 25_000);
    let day = |r: &Reader| {
        let ns = r
            .header()
            .to_utc_ns(r.events().next().unwrap().timestamp_ns);
        iodump_format::summary::rfc3339_utc(ns)[..10].to_string()
    };
    for (r, n) in [(&a, 20_000usize), (&b, 5_000)] {
        let p = dir
            .join("io")
            .join(format!("host={}", r.header().hostname))
            .join(format!("date={}", day(r)))
            .join("part-0.parquet");
        let batches = read_all(&p);
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, n, "{}", p.display());
        // The partition key is in the path, not in the file.
        assert!(batches[0].schema().field_with_name("host").is_err());
        let files = dir
            .join("files")
            .join(format!("host={}", r.header().hostname))
            .join("part-0.parquet");
        assert!(files.exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
