//! Parquet layouts: datasets of iodump 0.1.0's first tables (layout 1, `tests/data/layout1-*`)
//! still load; a file of a layout this iodump does not know is one error line asking to
//! convert again, from both engines.

use std::path::{Path, PathBuf};

use iodump_analyze::query::Dataset;
use iodump_analyze::to_parquet::Partitioning;
use iodump_analyze::{convert, onepass, AnalyzeError, Input};
use iodump_format::Reader;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

/// The layout number in a file's key-value metadata (None: no such key, layout 1).
fn layout_of(p: &Path) -> Option<String> {
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(p).unwrap()).unwrap();
    let kv = b.metadata().file_metadata().key_value_metadata().cloned();
    kv.unwrap_or_default()
        .into_iter()
        .find(|k| k.key == iodump_analyze::layout::LAYOUT_KEY)
        .and_then(|k| k.value)
}

#[test]
fn layout_1_datasets_load_like_the_trace() {
    let trace = data("layout1.iod");
    for (dir, io) in [
        ("layout1-flat", "io.parquet"),
        (
            "layout1-hive",
            "io/host=synth-mixed/date=2026-01-15/part-0.parquet",
        ),
    ] {
        let dir = data(dir);
        assert_eq!(layout_of(&dir.join(io)), None, "not a layout-1 file?");
        let d = Dataset::load_parquet(&dir, None).unwrap();
        let t = Dataset::load(
            &iodump_analyze::InputPath::expand(std::slice::from_ref(&trace)).unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(d.io.height(), 600);
        for c in [
            "ts_ns",
            "sector",
            "bytes",
            "latency_ns",
            "queue_ns",
            "pid",
            "path_id",
        ] {
            assert_eq!(
                d.io.column(c).unwrap().as_materialized_series(),
                t.io.column(c).unwrap().as_materialized_series(),
                "{c}"
            );
        }
        let (a, b) = (
            onepass::summary(
                &iodump_analyze::InputPath::expand(std::slice::from_ref(&dir)).unwrap(),
                None,
                &|_| {},
            )
            .unwrap()
            .frame,
            onepass::summary(
                &iodump_analyze::InputPath::expand(std::slice::from_ref(&trace)).unwrap(),
                None,
                &|_| {},
            )
            .unwrap()
            .frame,
        );
        assert!(a.equals(&b), "{a}\n{b}");
    }
}

#[test]
fn a_later_layout_is_one_error_line_asking_to_convert_again() {
    let dir = std::env::temp_dir().join(format!("iodump-layout-{}", std::process::id()));
    let r = Reader::open(data("layout1.iod")).unwrap();
    let input = Input {
        name: "layout1.iod".into(),
        reader: &r,
    };
    convert(&[input], &dir, Partitioning::default()).unwrap();
    let io = dir.join("io.parquet");
    assert_eq!(layout_of(&io).as_deref(), Some("2"));
    // The same rows, in a file that says it is of layout 3.
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&io).unwrap()).unwrap();
    let schema = b.schema().clone();
    let batches: Vec<_> = b.build().unwrap().map(|b| b.unwrap()).collect();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "iodump.layout".into(),
            "3".to_string(),
        )]))
        .build();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(&io).unwrap(), schema, Some(props)).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
    let check = |e: AnalyzeError| {
        let msg = e.to_string();
        assert!(matches!(e, AnalyzeError::Layout { .. }), "{e:?}");
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains("io.parquet: Parquet layout \"3\""), "{msg}");
        assert!(msg.contains("convert the traces again"), "{msg}");
    };
    check(
        onepass::summary(
            &iodump_analyze::InputPath::expand(std::slice::from_ref(&dir)).unwrap(),
            None,
            &|_| {},
        )
        .err()
        .unwrap(),
    );
    check(Dataset::load_parquet(&dir, None).err().unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}
