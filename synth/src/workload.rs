//! The synthetic workloads and what sets them apart at the top level: their name, their rate,
//! whether they lose events and whether their I/Os fail. Which activities each one mixes, and
//! which threads play its roles, is in `generator::mix`.

/// A synthetic workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// fio-like 4 KiB random reads (`O_DIRECT`, libaio / io_uring / psync) over a few large
    /// files, on top of a background of other processes touching thousands of files.
    RandRead,
    /// Large sequential writes (128 KiB–1 MiB) by dd, fio, tar|zstd, pg_basebackup, rsync and
    /// cp as interleaved streams, direct or through writeback, with journal commits on fsync.
    SeqWrite,
    /// A mysqld-like OLTP server: 16 KiB random page reads and flushes, doublewrite, redo and
    /// binlog with fsync, jbd2 journal, metadata reads and cache flushes.
    Oltp,
    /// A busy general-purpose host: a bit of everything, plus readahead, page faults, swap,
    /// discards and (rarely) I/O errors.
    Mixed,
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 4] = [
        Workload::RandRead,
        Workload::SeqWrite,
        Workload::Oltp,
        Workload::Mixed,
    ];

    /// Looks a workload up by its [`name`](Workload::name).
    pub fn from_name(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// The workload's name: `randread`, `seqwrite`, `oltp` or `mixed`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::RandRead => "randread",
            Workload::SeqWrite => "seqwrite",
            Workload::Oltp => "oltp",
            Workload::Mixed => "mixed",
        }
    }

    /// Mean rate of I/Os per second outside bursts and idle gaps.
    pub(crate) fn iops(self) -> f64 {
        match self {
            Workload::RandRead => 150_000.0,
            Workload::SeqWrite => 3_000.0,
            Workload::Oltp => 20_000.0,
            Workload::Mixed => 10_000.0,
        }
    }

    /// Whether the workload produces loss records.
    pub(crate) fn has_losses(self) -> bool {
        matches!(self, Workload::RandRead | Workload::Mixed)
    }

    /// Probability that a read or write fails with EIO.
    pub(crate) fn io_error_probability(self) -> f64 {
        if self == Workload::Mixed {
            1.2e-5
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
        let names: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(names, ["randread", "seqwrite", "oltp", "mixed"]);
        assert_eq!(Workload::from_name("nope"), None);
    }
}
