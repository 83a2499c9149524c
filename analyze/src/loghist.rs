//! Bounded-memory distributions and the significance tests of `iodump diff` and of a
//! replay's verification.
//!
//! This module owns [`LogHist`], a log-linear histogram of nanosecond values (the bins of the
//! report's latency histogram, [`crate::report::latency_bin`]: exact below 16 ns, then 8 per
//! power of two, so each bin is at most 12.5% wide) that stores only the bins between the
//! lowest and highest value seen, and the tests computed from such histograms and from
//! counts: a distribution-free confidence interval of a percentile ([`LogHist::quantile_ci`]),
//! the Mann–Whitney U test of two histograms with ties ([`mann_whitney`]), a rate test for
//! counts and sums ([`rate_test`]), the two-proportion z-test ([`proportion_test`]) and the
//! chi-square test of two mixes ([`chi_square_test`]). No per-event storage anywhere.

use crate::report::{latency_bin, latency_bin_lower_ns, LATENCY_BINS};

/// A log-linear histogram of ns values with exact count, sum and maximum; the bins between
/// the lowest and highest value seen are stored, 4 bytes each until a bin passes 2^32 − 1
/// (then 8), so about 2 KB at most, usually far less.
#[derive(Clone, Debug, Default)]
pub struct LogHist {
    /// Bin of the first stored count.
    lo: usize,
    /// The counts while every one fits in 32 bits (empty once `wide` is used).
    narrow: Vec<u32>,
    /// The counts once one does not.
    wide: Vec<u64>,
    n: u64,
    sum: u128,
    max: u64,
}

/// A prefetch of the cache line at `at` (a hint: it never faults, whatever the address, and
/// changes nothing the program sees).
#[inline(always)]
fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache; it reads nothing and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Bins stored beyond the one that made the stored range grow, on the side it grew (values
/// near a new lowest or highest often follow it): fewer reallocations and moves.
const SLACK_BINS: usize = 4;

/// The index of bin `b` in `v`, whose first element is bin `*lo`, growing `v` (at either
/// end, by [`SLACK_BINS`] more than needed, within the bins there are) to hold it.
#[inline]
fn slot<T: Copy + Default>(v: &mut Vec<T>, lo: &mut usize, b: usize) -> usize {
    if v.is_empty() {
        *lo = b;
        v.push(T::default());
    } else if b < *lo {
        let new_lo = b.saturating_sub(SLACK_BINS);
        v.splice(0..0, std::iter::repeat_n(T::default(), *lo - new_lo));
        *lo = new_lo;
    } else if b - *lo >= v.len() {
        let end = (b + 1 + SLACK_BINS).min(LATENCY_BINS.max(b + 1));
        v.resize(end - *lo, T::default());
    }
    b - *lo
}

impl LogHist {
    /// Adds one value.
    #[inline]
    pub fn add(&mut self, v: u64) {
        self.add_n(latency_bin(v), 1);
        self.n += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Counts `v` in its bin only: the count, sum and maximum are the caller's to add
    /// ([`LogHist::add_totals`]), so that a run of values keeps them in registers.
    #[inline]
    pub fn add_bin(&mut self, v: u64) {
        self.add_n(latency_bin(v), 1);
    }

    /// Adds the count, sum and maximum of values given to [`LogHist::add_bin`].
    #[inline]
    pub fn add_totals(&mut self, n: u64, sum: u128, max: u64) {
        self.n += n;
        self.sum += sum;
        self.max = self.max.max(max);
    }

    /// Asks the CPU to fetch the bin of `v` into cache, if it is stored (a hint: nothing
    /// changes), so that a later [`LogHist::add_bin`] finds it there.
    #[inline]
    pub fn prefetch(&self, v: u64) {
        if let Some(x) = self.narrow.get(latency_bin(v).wrapping_sub(self.lo)) {
            prefetch((x as *const u32).cast());
        }
    }

    /// Adds `c` to bin `b`, growing the stored range.
    #[inline]
    fn add_n(&mut self, b: usize, c: u64) {
        // The common case: a bin already stored, a count that stays within 32 bits.
        if self.wide.is_empty() {
            if let Some(x) = self.narrow.get_mut(b.wrapping_sub(self.lo)) {
                if let Some(y) = u32::try_from(c).ok().and_then(|c| x.checked_add(c)) {
                    *x = y;
                    return;
                }
            }
        }
        self.add_n_slow(b, c);
    }

    /// [`LogHist::add_n`] when the stored range must grow or the counts widen.
    #[cold]
    #[inline(never)]
    fn add_n_slow(&mut self, b: usize, c: u64) {
        if self.wide.is_empty() {
            let i = slot(&mut self.narrow, &mut self.lo, b);
            match u32::try_from(u64::from(self.narrow[i]) + c) {
                Ok(x) => self.narrow[i] = x,
                Err(_) => {
                    // Past 32 bits: every count to 8 bytes.
                    self.wide = self.narrow.drain(..).map(u64::from).collect();
                    self.wide[i] += c;
                }
            }
        } else {
            let i = slot(&mut self.wide, &mut self.lo, b);
            self.wide[i] += c;
        }
    }

    /// Stored counts.
    fn len(&self) -> usize {
        self.narrow.len().max(self.wide.len())
    }

    /// The count of stored position `i` (0 past the end).
    fn at(&self, i: usize) -> u64 {
        if self.wide.is_empty() {
            self.narrow.get(i).map_or(0, |&c| u64::from(c))
        } else {
            self.wide.get(i).copied().unwrap_or(0)
        }
    }

    /// Adds another histogram.
    pub fn merge(&mut self, o: &LogHist) {
        if o.len() == 0 {
            // Nothing stored: nothing to add but the totals.
        } else if self.len() == 0 {
            self.lo = o.lo;
            self.narrow.clone_from(&o.narrow);
            self.wide.clone_from(&o.wide);
        } else if self.wide.is_empty() && o.wide.is_empty() && self.n + o.n <= u64::from(u32::MAX) {
            // No bin can pass 32 bits: room for `o`'s range at once, then its counts added
            // in place.
            slot(&mut self.narrow, &mut self.lo, o.lo);
            slot(&mut self.narrow, &mut self.lo, o.lo + o.len() - 1);
            let at = o.lo - self.lo;
            for (x, &y) in self.narrow[at..].iter_mut().zip(&o.narrow) {
                *x += y;
            }
        } else {
            for (b, c) in o.bins() {
                self.add_n(b, c);
            }
        }
        self.n += o.n;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The largest value added (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The exact mean, `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    /// (bin, count) of the non-empty bins, in order.
    pub fn bins(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        (0..self.len())
            .map(|i| (self.lo + i, self.at(i)))
            .filter(|&(_, c)| c > 0)
    }

    /// The bin holding the value of rank `rank` (1-based, clamped to 1..=n).
    fn bin_of_rank(&self, rank: u64) -> usize {
        let rank = rank.clamp(1, self.n.max(1));
        let mut seen = 0;
        for (b, c) in self.bins() {
            seen += c;
            if seen >= rank {
                return b;
            }
        }
        self.lo + self.len().saturating_sub(1)
    }

    /// Largest value of bin `b` the histogram can hold: its upper edge minus one, at most the
    /// maximum.
    fn upper(&self, b: usize) -> u64 {
        latency_bin_lower_ns(b + 1).saturating_sub(1).min(self.max)
    }

    /// The `q` quantile (0..=1), estimated as the report's
    /// ([`crate::report::histogram_quantile_ns`]): the upper edge of the bin holding the
    /// nearest-rank value, at most the maximum, so at most one bin (12.5%) above the exact
    /// value. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = (q * self.n as f64).ceil() as u64;
        Some(self.upper(self.bin_of_rank(rank)))
    }

    /// A 95% distribution-free confidence interval of the `q` quantile: the values of ranks
    /// `nq ∓ 1.96·√(nq(1−q))` (the normal approximation of the binomial distribution of the
    /// number of values below the quantile; the upper rank one more), widened to the edges of
    /// their bins so that the bins' width is inside the interval. A side whose rank falls
    /// outside 1..=n has no bound ([`QuantileCi`]): with that few values no 95% interval of
    /// the quantile exists on that side (a p50 needs at least 8 values, a p99 563, a p99.9
    /// 5661: [`min_ios_for_ci`]). `None` when empty.
    pub fn quantile_ci(&self, q: f64) -> Option<QuantileCi> {
        if self.n == 0 {
            return None;
        }
        let (lo_rank, hi_rank) = ci_ranks(self.n, q);
        let hi_ns = hi_rank.map(|r| self.upper(self.bin_of_rank(r)));
        let lo_ns = lo_rank.map(|r| {
            let lo = latency_bin_lower_ns(self.bin_of_rank(r));
            hi_ns.map_or(lo, |hi| lo.min(hi))
        });
        Some(QuantileCi { lo_ns, hi_ns })
    }
}

/// A confidence interval of a quantile ([`LogHist::quantile_ci`]), ns: `None` on a side where
/// the sample is too small for a bound (the interval is unbounded there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantileCi {
    /// Lower bound, ns.
    pub lo_ns: Option<u64>,
    /// Upper bound, ns.
    pub hi_ns: Option<u64>,
}

impl QuantileCi {
    /// (lower, upper) when bounded on both sides.
    pub fn bounded(self) -> Option<(u64, u64)> {
        Some((self.lo_ns?, self.hi_ns?))
    }
}

/// The ranks (1-based) of the bounds of the 95% interval of the `q` quantile of `n` values:
/// ⌊nq − 1.96·√(nq(1−q))⌋ and ⌈nq + 1.96·√(nq(1−q))⌉ + 1, each `None` when outside 1..=n (no
/// value of the sample bounds the quantile there at 95%).
fn ci_ranks(n: u64, q: f64) -> (Option<u64>, Option<u64>) {
    let nf = n as f64;
    let half = Z_95 * (nf * q * (1.0 - q)).sqrt();
    let lo = (nf * q - half).floor();
    let hi = (nf * q + half).ceil() + 1.0;
    let rank = |r: f64| (r >= 1.0 && r <= nf).then_some(r as u64);
    (rank(lo), rank(hi))
}

/// The fewest values from which the 95% interval of the `q` quantile (0 < q < 1) is bounded
/// on both sides for every larger count too: 8 for p50, 563 for p99, 5661 for p99.9 (for
/// these three, at no smaller count is it bounded). Below it the quantile is not tested.
pub fn min_ios_for_ci(q: f64) -> u64 {
    let m = q.min(1.0 - q);
    if m.is_nan() || m <= 0.0 {
        return u64::MAX;
    }
    let bounded = |n: u64| matches!(ci_ranks(n, q), (Some(_), Some(_)));
    // From n·min(q, 1−q) ≥ 4·1.96² + 8 on, both nq and n(1−q) exceed 1.96·√(nq(1−q)) + 2,
    // so both ranks are inside 1..=n: the search goes down from there.
    let far = ((4.0 * Z_95 * Z_95 + 8.0) / m).ceil() as u64;
    (1..=far).rev().find(|&n| !bounded(n)).map_or(1, |n| n + 1)
}

/// Equal when they hold the same values: the same counts in the same bins, count, sum and
/// maximum (whatever range of empty bins each stores).
impl PartialEq for LogHist {
    fn eq(&self, o: &LogHist) -> bool {
        self.n == o.n && self.sum == o.sum && self.max == o.max && self.bins().eq(o.bins())
    }
}

/// z of a two-sided 95% interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The test of a change of the `q` quantile: z is the difference of the two estimates over
/// its standard error, each estimate's taken from its 95% interval
/// ([`LogHist::quantile_ci`], which holds the bins' width) as `(hi − lo) / (2 · 1.96)`.
/// Returns the two-sided p-value; `None` (not tested) when either is empty or either interval
/// is unbounded on a side: too few values for a 95% interval of that quantile
/// ([`min_ios_for_ci`]), so no change of it can be told from chance.
pub fn quantile_test(a: &LogHist, b: &LogHist, q: f64) -> Option<f64> {
    let (x, y) = (a.quantile_ci(q)?.bounded()?, b.quantile_ci(q)?.bounded()?);
    let (qa, qb) = (a.quantile(q)? as f64, b.quantile(q)? as f64);
    let se = |(lo, hi): (u64, u64)| (hi - lo) as f64 / (2.0 * Z_95);
    let var = se(x).powi(2) + se(y).powi(2);
    if var <= 0.0 {
        return Some(if qa == qb { 1.0 } else { 0.0 });
    }
    Some(two_sided_p((qb - qa) / var.sqrt()))
}

/// The Mann–Whitney U test of two histograms: the values of one bin are ties (mid-ranks and
/// the tie correction of the variance), with the normal approximation. `None` when either
/// is empty; p = 1 when every value is in one bin.
pub fn mann_whitney(a: &LogHist, b: &LogHist) -> Option<f64> {
    let (na, nb) = (a.n as f64, b.n as f64);
    if a.n == 0 || b.n == 0 {
        return None;
    }
    let total = na + nb;
    let lo = a.lo.min(b.lo);
    let hi = (a.lo + a.len()).max(b.lo + b.len());
    let get = |h: &LogHist, bin: usize| bin.checked_sub(h.lo).map_or(0, |i| h.at(i)) as f64;
    let (mut below, mut rank_sum_a, mut ties) = (0.0f64, 0.0f64, 0.0f64);
    for bin in lo..hi {
        let (ca, cb) = (get(a, bin), get(b, bin));
        let t = ca + cb;
        if t == 0.0 {
            continue;
        }
        rank_sum_a += ca * (below + (t + 1.0) / 2.0);
        ties += t * t * t - t;
        below += t;
    }
    let u = rank_sum_a - na * (na + 1.0) / 2.0;
    let mean = na * nb / 2.0;
    let var = na * nb / 12.0 * ((total + 1.0) - ties / (total * (total - 1.0)));
    if var <= 0.0 || !var.is_finite() {
        // Every value in one bin on both sides: nothing tells them apart.
        return Some(1.0);
    }
    let z = (u - mean) / var.sqrt();
    Some(two_sided_p(z))
}

/// The test of two rates: `sum` over `exposure` in each sample, the sums compound Poisson
/// (independent arrivals, each adding its own size: variance the sum of the sizes' squares,
/// `sum_sq`). For a count, sizes are 1 (`sum_sq = sum`). `None` when an exposure is not
/// positive; p = 1 when both sums are 0.
pub fn rate_test(a: (f64, f64, f64), b: (f64, f64, f64)) -> Option<f64> {
    let ((sa, qa, ea), (sb, qb, eb)) = (a, b);
    if ea <= 0.0 || eb <= 0.0 {
        return None;
    }
    let var = qa / (ea * ea) + qb / (eb * eb);
    if var <= 0.0 {
        // Nothing on either side.
        return Some(1.0);
    }
    let z = (sb / eb - sa / ea) / var.sqrt();
    Some(two_sided_p(z))
}

/// The two-proportion z-test (pooled): `hits` of `n` in each sample. `None` when either is
/// empty; p = 1 when the pooled proportion is 0 or 1.
pub fn proportion_test(a: (u64, u64), b: (u64, u64)) -> Option<f64> {
    let ((ha, na), (hb, nb)) = (a, b);
    if na == 0 || nb == 0 {
        return None;
    }
    let (na, nb) = (na as f64, nb as f64);
    let p = (ha + hb) as f64 / (na + nb);
    let var = p * (1.0 - p) * (1.0 / na + 1.0 / nb);
    if var <= 0.0 {
        // All or none on both sides.
        return Some(1.0);
    }
    let z = (hb as f64 / nb - ha as f64 / na) / var.sqrt();
    Some(two_sided_p(z))
}

/// The chi-square test of homogeneity of two mixes (counts per class), classes empty in
/// both left out; the p-value from the chi-square distribution ([`chi_square_sf`]). `None`
/// when either is empty; p = 1 when both use one class only, or the same mix.
pub fn chi_square_test(a: &[u64], b: &[u64]) -> Option<f64> {
    let (na, nb): (u64, u64) = (a.iter().sum(), b.iter().sum());
    if na == 0 || nb == 0 {
        return None;
    }
    let total = (na + nb) as f64;
    let (mut chi2, mut classes) = (0.0, 0usize);
    for (&x, &y) in a.iter().zip(b) {
        let col = (x + y) as f64;
        if col == 0.0 {
            continue;
        }
        classes += 1;
        for (obs, n) in [(x, na), (y, nb)] {
            let expected = col * n as f64 / total;
            chi2 += (obs as f64 - expected).powi(2) / expected;
        }
    }
    if classes < 2 {
        // One class on both sides.
        return Some(1.0);
    }
    Some(chi_square_sf(chi2, classes - 1))
}

/// P(X ≥ `chi2`) for X chi-square distributed with `k` ≥ 1 degrees of freedom, in closed
/// form (`x` = χ²/2): for even k, e^(−x) Σ_{i<k/2} x^i/i!; for odd k, erfc(√x) + e^(−x)
/// Σ_{i=1}^{(k−1)/2} x^(i−½)/Γ(i+½). Exact but for [`erfc`]'s error; 1 at χ² = 0.
pub fn chi_square_sf(chi2: f64, k: usize) -> f64 {
    if chi2.is_nan() || chi2 <= 0.0 {
        return 1.0;
    }
    let x = chi2 / 2.0;
    let even = k.is_multiple_of(2);
    let (mut term, first, terms) = if even {
        (1.0, 0.0, k / 2)
    } else {
        // The first term x^(1/2)/Γ(3/2), then each the previous times x/(i + ½).
        let t = 2.0 * (x / std::f64::consts::PI).sqrt();
        (t, 0.5, (k - 1) / 2)
    };
    let mut sum = 0.0;
    for i in 0..terms {
        sum += term;
        term *= x / (i as f64 + 1.0 + first);
    }
    let head = if even { 0.0 } else { erfc(x.sqrt()) };
    (head + (-x).exp() * sum).clamp(0.0, 1.0)
}

/// The two-sided p-value of a standard normal `z`.
pub fn two_sided_p(z: f64) -> f64 {
    if !z.is_finite() {
        return if z.is_nan() { 1.0 } else { 0.0 };
    }
    erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0)
}

/// The complementary error function (Numerical Recipes' `erfcc`, Chebyshev fit: relative
/// error below 1.2e-7 everywhere).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: impl IntoIterator<Item = u64>) -> LogHist {
        let mut h = LogHist::default();
        for v in values {
            h.add(v);
        }
        h
    }

    #[test]
    fn chi_square_sf_at_the_tabled_critical_values() {
        // The 5% and 1% points of the chi-square distribution (any statistics table).
        for (chi2, k, p) in [
            (3.841_459, 1, 0.05),
            (6.634_897, 1, 0.01),
            (5.991_465, 2, 0.05),
            (7.814_728, 3, 0.05),
            (11.344_867, 3, 0.01),
            (9.487_729, 4, 0.05),
            (11.070_498, 5, 0.05),
            (18.307_038, 10, 0.05),
            (23.209_251, 10, 0.01),
        ] {
            let got = chi_square_sf(chi2, k);
            assert!((got - p).abs() < 1e-6, "χ² {chi2} k {k}: {got}, {p} wanted");
        }
        assert_eq!(chi_square_sf(0.0, 3), 1.0);
        // k = 2: e^(−χ²/2) exactly.
        assert!((chi_square_sf(1.0, 2) - (-0.5f64).exp()).abs() < 1e-15);
    }

    #[test]
    fn histogram_quantiles_are_within_a_bin_of_the_exact_ones() {
        let values: Vec<u64> = (0..20_000u64)
            .map(|i| 1_000 + (i * 7919) % 90_000)
            .collect();
        let h = hist(values.iter().copied());
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for q in [0.5, 0.99, 0.999] {
            let exact = sorted[((q * sorted.len() as f64).ceil() as usize) - 1] as f64;
            let got = h.quantile(q).unwrap() as f64;
            assert!(
                got >= exact && got <= exact * 1.125 + 1.0,
                "q {q}: {got} vs {exact}"
            );
            let (lo, hi) = h.quantile_ci(q).unwrap().bounded().unwrap();
            assert!(
                lo as f64 <= exact && exact <= hi as f64,
                "q {q}: {lo}..{hi}"
            );
        }
        assert_eq!(h.count(), 20_000);
        assert_eq!(h.max(), *sorted.last().unwrap());
        // Merging two halves (added in any order) is the whole.
        let mut m = hist(values[10_000..].iter().copied());
        m.merge(&hist(values[..10_000].iter().copied()));
        assert_eq!(m, h);
        assert!(LogHist::default().quantile(0.5).is_none());
    }

    #[test]
    fn merges_of_any_two_ranges_hold_every_value() {
        let low: Vec<u64> = (0..500).map(|i| 20 + i * 3).collect();
        let mid: Vec<u64> = (0..500).map(|i| 900 + i * 50).collect();
        let high: Vec<u64> = (0..500).map(|i| 3_000_000 + i * 977).collect();
        let all_of = |parts: &[&[u64]]| hist(parts.iter().flat_map(|p| p.iter().copied()));
        for (a, b) in [
            (&low[..], &high[..]),
            (&high[..], &low[..]),
            (&mid[..], &mid[200..]),
            (&mid[..300], &mid[100..]),
            (&low[..], &[][..]),
            (&[][..], &high[..]),
        ] {
            let mut m = hist(a.iter().copied());
            m.merge(&hist(b.iter().copied()));
            assert_eq!(m, all_of(&[a, b]));
            assert_eq!(
                m.bins().map(|(_, c)| c).sum::<u64>(),
                (a.len() + b.len()) as u64
            );
        }
        // Bins and totals added apart are the same as `add`.
        let mut split = LogHist::default();
        for &v in &mid {
            split.add_bin(v);
        }
        split.add_totals(
            mid.len() as u64,
            mid.iter().map(|&v| u128::from(v)).sum(),
            25_850,
        );
        assert_eq!(split, hist(mid.iter().copied()));
    }

    #[test]
    fn counts_past_32_bits_are_kept() {
        let mut big = LogHist::default();
        big.add_n(latency_bin(1000), u64::from(u32::MAX) - 1);
        big.n = u64::from(u32::MAX) - 1;
        let mut more = hist([1000, 1000, 5_000]);
        more.merge(&big);
        assert!(!more.wide.is_empty() && more.narrow.is_empty());
        assert_eq!(more.count(), u64::from(u32::MAX) + 2);
        let bins: Vec<(usize, u64)> = more.bins().collect();
        assert_eq!(
            bins,
            [
                (latency_bin(1000), u64::from(u32::MAX) + 1),
                (latency_bin(5_000), 1)
            ]
        );
        more.add(1);
        assert_eq!(more.bins().next(), Some((1, 1)));
    }

    /// The values 1000 + (i·7919 mod 90000) for i < n, as in
    /// `histogram_quantiles_are_within_a_bin_of_the_exact_ones`.
    fn spread(n: u64) -> LogHist {
        hist((0..n).map(|i| 1_000 + (i * 7919) % 90_000))
    }

    #[test]
    fn enough_values_give_the_intervals_they_always_gave() {
        // Computed before the ranks outside 1..=n were made unbounded (they were clamped):
        // where the ranks are inside, nothing changed.
        for (n, q, lo, hi) in [
            (20_000, 0.5, 45_056, 49_151),
            (20_000, 0.99, 81_920, 90_983),
            (20_000, 0.999, 90_112, 90_983),
            (8, 0.5, 960, 56_433),
            (100, 0.5, 32_768, 57_343),
            (1_000, 0.5, 40_960, 49_151),
            (563, 0.99, 81_920, 90_875),
            (1_000, 0.99, 81_920, 90_879),
            (5_661, 0.999, 90_112, 90_903),
        ] {
            let ci = spread(n).quantile_ci(q).unwrap();
            assert_eq!(ci.bounded(), Some((lo, hi)), "n {n} q {q}");
        }
    }

    #[test]
    fn too_few_values_have_no_interval_and_no_test() {
        for (q, least) in [(0.5, 8), (0.99, 563), (0.999, 5661)] {
            assert_eq!(min_ios_for_ci(q), least, "q {q}");
            for n in 1..least {
                let ci = spread(n).quantile_ci(q).unwrap();
                assert_eq!(ci.bounded(), None, "n {n} q {q}: {ci:?}");
            }
            assert!(spread(least).quantile_ci(q).unwrap().bounded().is_some());
        }
        // One I/O: unbounded on both sides; p99 of 100 I/Os: bounded below only (the 100th
        // value is below the p99 with probability 0.99^100 ≈ 37%).
        let one = hist([50_000]);
        let ci = one.quantile_ci(0.5).unwrap();
        assert_eq!((ci.lo_ns, ci.hi_ns), (None, None));
        let ci = spread(100).quantile_ci(0.99).unwrap();
        assert!(ci.lo_ns.is_some() && ci.hi_ns.is_none(), "{ci:?}");
        // One I/O against one ten times slower, 3 against 3, 7 against 7: however far apart,
        // not tested (a one-bin interval each gave p = 0 before).
        let slow = hist([500_000]);
        for q in [0.5, 0.99, 0.999] {
            assert_eq!(quantile_test(&one, &slow, q), None, "q {q}");
        }
        let few = |v: u64, n: u64| hist((0..n).map(|i| v + i));
        assert_eq!(quantile_test(&few(10_000, 3), &few(90_000, 3), 0.5), None);
        assert_eq!(quantile_test(&few(10_000, 7), &few(90_000, 7), 0.5), None);
        // Enough on one side is not enough.
        assert_eq!(quantile_test(&spread(20_000), &few(900_000, 7), 0.5), None);
        assert_eq!(
            quantile_test(&spread(20_000), &few(900_000, 562), 0.99),
            None
        );
        // 8 against 8, ten times apart: tested, and a change.
        assert!(changed(quantile_test(
            &few(10_000, 8),
            &few(100_000, 8),
            0.5
        )));
    }

    /// Below 1%: a change.
    fn changed(p: Option<f64>) -> bool {
        p.unwrap() < 0.01
    }

    #[test]
    fn tests_find_a_doubled_latency_and_not_a_resample() {
        let a = hist((0..5_000u64).map(|i| 50_000 + (i * 31) % 20_000));
        let same = hist((0..5_000u64).map(|i| 50_000 + (i * 17) % 20_000));
        let doubled = hist((0..5_000u64).map(|i| 2 * (50_000 + (i * 31) % 20_000)));
        for q in [0.5, 0.99] {
            assert!(!changed(quantile_test(&a, &same, q)), "q {q}");
            assert_eq!(quantile_test(&a, &a, q), Some(1.0));
            assert!(changed(quantile_test(&a, &doubled, q)), "q {q}");
        }
        assert!((mann_whitney(&a, &a).unwrap() - 1.0).abs() < 1e-6);
        assert!(changed(mann_whitney(&a, &doubled)));
        assert!(mann_whitney(&a, &LogHist::default()).is_none());
    }

    #[test]
    fn count_and_share_tests() {
        // 10,000 vs 10,100 I/Os in equal times: noise; 10,000 vs 12,000: a change.
        assert!(!changed(rate_test(
            (1e4, 1e4, 10.0),
            (1.01e4, 1.01e4, 10.0)
        )));
        assert!(changed(rate_test((1e4, 1e4, 10.0), (1.2e4, 1.2e4, 10.0))));
        // The same rate over twice the time is no change.
        assert!(!changed(rate_test((1e4, 1e4, 10.0), (2e4, 2e4, 20.0))));
        assert!(!changed(proportion_test((500, 1000), (510, 1000))));
        assert!(changed(proportion_test((500, 1000), (700, 1000))));
        assert!(!changed(chi_square_test(&[800, 200, 0], &[790, 210, 0])));
        assert!(changed(chi_square_test(&[800, 200, 0], &[200, 800, 0])));
        assert_eq!(chi_square_test(&[800, 0], &[900, 0]), Some(1.0));
        // The same mix, however many classes: p = 1 (the Wilson–Hilferty approximation
        // used before gave 0.95 with two classes).
        assert_eq!(chi_square_test(&[300, 100], &[300, 100]), Some(1.0));
        assert_eq!(chi_square_test(&[3, 1, 5, 7], &[6, 2, 10, 14]), Some(1.0));
        assert!(chi_square_test(&[800, 0], &[0, 0]).is_none());
        // erfc against known values.
        for (x, want) in [
            (0.0, 1.0),
            (1.0, 0.157_299_207),
            (2.0, 0.004_677_735),
            (-1.0, 1.842_700_793),
        ] {
            assert!((erfc(x) - want).abs() < 1e-7 * want.max(1.0), "erfc({x})");
        }
        assert!((two_sided_p(1.959_964) - 0.05).abs() < 1e-6);
    }
}
