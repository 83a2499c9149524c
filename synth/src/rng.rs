//! Random numbers: a xoshiro256** generator seeded through SplitMix64, and the draws the
//! generator makes from it (uniform, normal, exponential, log-uniform, powers of two).
//! Traces are made of the sequence of these draws, so changing how many numbers any step
//! consumes, or in which order, changes every trace after it.

use crate::math::{exp, ln};

/// xoshiro256** seeded through SplitMix64.
#[derive(Clone)]
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    #[inline]
    pub(crate) fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n) (0 when n is 0).
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [lo, hi].
    #[inline]
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    #[inline]
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    /// Approximately standard normal (Irwin–Hall of four 16-bit uniforms; |z| < 3.47).
    #[inline]
    pub(crate) fn normal(&mut self) -> f64 {
        let r = self.next_u64();
        let s = (r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48);
        (s as f64 * (1.0 / 65536.0) - 2.0) * 1.732_050_807_568_877_2
    }

    /// Exponential with mean 1.
    #[inline]
    pub(crate) fn exp1(&mut self) -> f64 {
        -ln(1.0 - self.f64())
    }

    /// Log-uniform in [lo, hi).
    #[inline]
    pub(crate) fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo * exp(ln(hi / lo) * self.f64())
    }

    /// A power-of-two multiple of `min` not above `max`, each doubling with probability 1/2.
    #[inline]
    pub(crate) fn pow2(&mut self, min: u32, max: u32) -> u32 {
        let steps = self.next_u64().trailing_ones();
        let mut p = min;
        for _ in 0..steps {
            if p * 2 > max {
                break;
            }
            p *= 2;
        }
        p
    }

    /// Fisher–Yates, from the end.
    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }

    /// `n` random lowercase hex digits.
    pub(crate) fn hex(&mut self, n: usize) -> String {
        const H: &[u8; 16] = b"0123456789abcdef";
        (0..n).map(|_| H[self.below(16) as usize] as char).collect()
    }
}
