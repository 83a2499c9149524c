//! What the exports ([`crate::export`], [`crate::perfetto`]) share: the intact events of a
//! trace, segment by segment, and what an export wrote. A leaf, so that `export` (which
//! dispatches to `perfetto`) and `perfetto` both use it without importing each other.

use iodump_format::expr::Expr;
use iodump_format::{Damage, EventBatch, Reader, SegmentDecoder};

/// What an export wrote.
#[derive(Clone, Debug, Default)]
pub struct ExportSummary {
    /// Events written.
    pub events: u64,
    /// Events left out (fio iolog: operations fio cannot replay, e.g. zone management).
    pub skipped: u64,
    /// Damaged segments that were skipped.
    pub damaged: Vec<Damage>,
}

/// Calls `f` with each intact segment's events in file order and the rows of it `filter`
/// keeps (all of them without one; damaged segments are added to `damaged`), until `f`
/// fails. A segment the filter's time window leaves out ([`Expr::leaves_out_segment`]) is
/// not decoded.
pub(crate) fn each_intact_batch(
    r: &Reader,
    damaged: &mut Vec<Damage>,
    filter: Option<&Expr>,
    mut f: impl FnMut(usize, &EventBatch, &[u32]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let devs = filter
        .map(|_| r.tables().device_names())
        .unwrap_or_default();
    let mut batch = EventBatch::default();
    let mut dec = SegmentDecoder::new();
    let mut rows = Vec::new();
    for i in 0..r.segments().len() {
        if filter.is_some_and(|f| f.leaves_out_segment(r, i)) {
            continue;
        }
        if let Err(d) = r.decode_segment_into(i, &mut batch, &mut dec) {
            damaged.push(d);
            continue;
        }
        rows.clear();
        rows.extend(
            (0..batch.len() as u32)
                .filter(|&k| filter.is_none_or(|f| f.eval_in(r, i, &batch.get(k as usize), &devs))),
        );
        f(i, &batch, &rows)?;
    }
    Ok(())
}
