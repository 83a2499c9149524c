//! Statistics of samples shared by the analyzer and the replayer, so that both report the
//! same figures for the same I/Os.
//!
//! One definition of an exact quantile: [`quantile_linear`], linear interpolation between
//! the two closest ranks (numpy's default, polars' `QuantileMethod::Linear`, SQL's
//! `percentile_cont`). Quantiles estimated from a histogram (the report's, `iodump top`'s)
//! are another estimator, named as such where they are computed.

/// The exact `q`-quantile (0..=1) of the samples `v`, by linear interpolation between the
/// two closest ranks: with `v` sorted and `h = (len - 1) * q`, `v[floor(h)] + (h - floor(h)) *
/// (v[floor(h) + 1] - v[floor(h)])`. `None` when `v` is empty. Reorders `v` (a selection, not
/// a full sort: O(len) per call).
pub fn quantile_linear<T: Copy + Ord + Into<u64>>(v: &mut [T], q: f64) -> Option<f64> {
    let rank = QuantileRank::of(v.len(), q)?;
    let (_, &mut a, rest) = v.select_nth_unstable(rank.lo);
    let a = a.into();
    // The next order statistic is the smallest of what lies above `lo`.
    Some(rank.value(a, || rest.iter().copied().min().map_or(a, Into::into)))
}

/// Where the `q`-quantile of `len` samples lies, as [`quantile_linear`] computes it: between
/// order statistics `lo` and `lo + 1` (0-based), `frac` of the way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileRank {
    /// The lower order statistic.
    pub lo: usize,
    /// True when the upper one (`lo + 1`) is needed too.
    pub between: bool,
    frac: f64,
}

impl QuantileRank {
    /// The rank of the `q`-quantile of `len` samples; `None` when there are none.
    pub fn of(len: usize, q: f64) -> Option<QuantileRank> {
        if len == 0 {
            return None;
        }
        let float_idx = (len - 1) as f64 * q;
        let lo = float_idx.floor() as usize;
        let hi = (float_idx.ceil() as usize).min(len - 1);
        Some(QuantileRank {
            lo,
            between: lo != hi,
            frac: float_idx - lo as f64,
        })
    }

    /// The quantile, from order statistic `lo` (`a`) and, when [`QuantileRank::between`],
    /// `lo + 1` (`b()`).
    pub fn value(self, a: u64, b: impl FnOnce() -> u64) -> f64 {
        let a = a as f64;
        if !self.between {
            return a;
        }
        let b = b() as f64;
        a + (b - a) * self.frac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_quantile_equals_the_sorted_one() {
        let mut x: u64 = 12345;
        for n in [1usize, 2, 3, 10, 99, 100, 101, 1000, 4097] {
            let v: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 5000
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort_unstable();
            for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let pos = (n - 1) as f64 * q;
                let (lo, hi) = (pos.floor() as usize, (pos.ceil() as usize).min(n - 1));
                let (a, b) = (sorted[lo] as f64, sorted[hi] as f64);
                let want = if lo == hi {
                    a
                } else {
                    a + (b - a) * (pos - lo as f64)
                };
                let mut w = v.clone();
                assert_eq!(quantile_linear(&mut w, q), Some(want), "n {n} q {q}");
            }
        }
        assert_eq!(quantile_linear::<u64>(&mut [], 0.5), None);
    }

    #[test]
    fn quantiles_of_a_small_sample() {
        // numpy.quantile([1, 2, 3, 4, 5], [0, 0.5, 0.9, 0.99, 1]): 1, 3, 4.6, 4.96, 5.
        let mut v = [5u64, 1, 4, 2, 3];
        for (q, want) in [(0.0, 1.0), (0.5, 3.0), (0.9, 4.6), (0.99, 4.96), (1.0, 5.0)] {
            let got = quantile_linear(&mut v, q).unwrap();
            assert!((got - want).abs() < 1e-9, "q {q}: {got}");
        }
        assert_eq!(quantile_linear(&mut [7u32], 0.3), Some(7.0));
    }
}
