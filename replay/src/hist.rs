//! The replay's measurements in bounded memory: [`Hist`], a fixed log-linear histogram of
//! nanosecond values with exact count, minimum and maximum.
//!
//! A replay measures every I/O it issues (timing error, scheduler lag, latency) and a soak
//! test replays for hours; a vector per measurement grew by 32 bytes per I/O. A histogram's
//! size is fixed: values below 256 ns are kept exactly, each power of two above in 128 bins,
//! so a bin is at most 1/128 of its values wide (0.78%), and a percentile read from it is
//! within 0.4% of the exact one (the bin's middle stands for its values).

/// Values below this are their own bin.
const EXACT_BELOW: u64 = 1 << SUB_BITS;
/// `log2` of [`EXACT_BELOW`].
const SUB_BITS: u32 = 8;
/// Bins per power of two above [`EXACT_BELOW`].
const PER_OCTAVE: usize = 1 << (SUB_BITS - 1);
/// Bins in all: the exact ones, then one octave for each power of two from 2^8 to 2^63.
pub const BINS: usize = EXACT_BELOW as usize + (64 - SUB_BITS as usize) * PER_OCTAVE;

/// The bin of `v`.
#[inline]
fn bin(v: u64) -> usize {
    if v < EXACT_BELOW {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // ≥ SUB_BITS
    let mantissa = (v >> (e - (SUB_BITS - 1))) as usize; // in PER_OCTAVE..2 * PER_OCTAVE
    EXACT_BELOW as usize + (e - SUB_BITS) as usize * PER_OCTAVE + (mantissa - PER_OCTAVE)
}

/// The lowest value of bin `b` and its width.
fn bin_range(b: usize) -> (u64, u64) {
    if b < EXACT_BELOW as usize {
        return (b as u64, 1);
    }
    let i = b - EXACT_BELOW as usize;
    let e = (i / PER_OCTAVE) as u32 + SUB_BITS;
    let mantissa = (i % PER_OCTAVE + PER_OCTAVE) as u64;
    let shift = e - (SUB_BITS - 1);
    (mantissa << shift, 1u64 << shift)
}

/// A log-linear histogram of ns values (see the module's doc) with exact count, minimum and
/// maximum. Its bins are allocated on the first value (60 KB); adding never allocates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hist {
    counts: Vec<u64>,
    n: u64,
    min: u64,
    max: u64,
}

impl Hist {
    /// An empty histogram with its bins allocated, so that [`Hist::add`] never allocates.
    pub fn with_bins() -> Hist {
        Hist {
            counts: vec![0; BINS],
            ..Hist::default()
        }
    }

    /// Adds one value.
    #[inline]
    pub fn add(&mut self, v: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BINS];
        }
        self.counts[bin(v)] += 1;
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Hist) {
        if other.n == 0 {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BINS];
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.min = if self.n == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.n += other.n;
    }

    /// Values added.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The largest value (exact); `None` when empty.
    pub fn max(&self) -> Option<u64> {
        (self.n > 0).then_some(self.max)
    }

    /// The `rank`-th smallest value (0-based, `rank < len`): exact for the smallest and the
    /// largest and below 256 ns, else the middle of its bin, kept within the values seen.
    fn order_statistic(&self, rank: u64) -> u64 {
        if rank == 0 {
            return self.min;
        }
        if rank + 1 >= self.n {
            return self.max;
        }
        let mut seen = 0u64;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                let (lo, width) = bin_range(b);
                return (lo + width / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The `q`-quantile (0..=1), defined as [`iodump_format::stats::quantile_linear`] defines
    /// it (linear interpolation between the two closest ranks) over the values as the bins
    /// hold them, rounded to the ns; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let rank = iodump_format::stats::QuantileRank::of(usize::try_from(self.n).ok()?, q)?;
        let a = self.order_statistic(rank.lo as u64);
        let v = rank.value(a, || self.order_statistic(rank.lo as u64 + 1));
        Some(v.round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_every_value_in_order_and_stay_narrow() {
        assert_eq!(bin(0), 0);
        assert_eq!(bin(255), 255);
        assert_eq!(bin(256), 256);
        assert_eq!(bin(u64::MAX), BINS - 1);
        let mut last = 0;
        for e in 0..64u32 {
            for v in [1u64 << e, (1u64 << e) + (1u64 << e) / 3, (1u64 << e) - 1] {
                let b = bin(v);
                let (lo, width) = bin_range(b);
                assert!(lo <= v && v - lo < width, "{v}: bin {b} = {lo} + {width}");
                assert!(width == 1 || width * 128 <= lo, "{v}: {width} wide at {lo}");
            }
            let b = bin(1u64 << e);
            assert!(b >= last, "bins grow with values");
            last = b;
        }
        // Neighbouring bins touch.
        for b in 0..BINS - 1 {
            let (lo, width) = bin_range(b);
            assert_eq!(bin_range(b + 1).0, lo + width, "bin {b}");
        }
    }

    #[test]
    fn quantiles_are_the_exact_ones_within_the_bins() {
        let exact = |v: &mut Vec<u64>, q: f64| {
            iodump_format::stats::quantile_linear(v, q).map(|x| x.round() as u64)
        };
        let mut h = Hist::default();
        assert_eq!(h.quantile(0.5), None);
        let mut v: Vec<u64> = Vec::new();
        let mut x = 12_345u64;
        for _ in 0..100_000 {
            // Spread over 6 orders of magnitude.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let s = (x >> 33) % 1_000_000 * ((x >> 20) % 1000 + 1);
            v.push(s);
            h.add(s);
        }
        assert_eq!(h.len(), 100_000);
        for q in [0.0, 0.001, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let e = exact(&mut v, q).unwrap();
            let b = h.quantile(q).unwrap();
            assert!(
                (b as f64 - e as f64).abs() <= e as f64 / 256.0 + 1.0,
                "q {q}: {b} against {e}"
            );
        }
        assert_eq!(h.quantile(1.0), v.iter().max().copied());
        assert_eq!(h.quantile(0.0), v.iter().min().copied());
        // Small values are exact, interpolation included.
        let mut s = Hist::default();
        for v in [40, 10, 30, 20] {
            s.add(v);
        }
        assert_eq!(s.quantile(0.9), Some(37));
        assert_eq!(s.quantile(0.5), Some(25));
    }

    #[test]
    fn merged_histograms_hold_both() {
        let (mut a, mut b, mut both) = (Hist::default(), Hist::with_bins(), Hist::default());
        for v in [5, 500, 50_000] {
            a.add(v);
            both.add(v);
        }
        for v in [7, 7_000_000] {
            b.add(v);
            both.add(v);
        }
        let mut m = Hist::default();
        m.merge(&Hist::with_bins());
        assert!(m.is_empty() && m.max().is_none());
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m, both);
        assert_eq!(m.max(), Some(7_000_000));
        assert_eq!(m.quantile(0.0), Some(5));
    }
}
