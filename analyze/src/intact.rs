//! What the exports ([`crate::export`], [`crate::perfetto`]) share: the intact events of a
//! trace, segment by segment, and what an export wrote. A leaf, so that `export` (which
//! dispatches to `perfetto`) and `perfetto` both use it without importing each other.

use iodump_format::{Damage, EventBatch, Reader};

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

/// Calls `f` with each intact segment's events in file order (damaged ones are added to
/// `damaged`), until `f` fails.
pub(crate) fn each_intact_batch(
    r: &Reader,
    damaged: &mut Vec<Damage>,
    mut f: impl FnMut(usize, &EventBatch) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut result = Ok(());
    r.for_each_segment(|i, b| {
        if result.is_err() {
            return;
        }
        match b {
            Ok(b) => result = f(i, b),
            Err(d) => damaged.push(d),
        }
    });
    result
}
