//! Portable, fast `exp` and `ln`. `f64::exp` and `f64::ln` come from the platform's C library,
//! whose last bits differ between implementations; these use only basic IEEE-754 operations
//! (and tables computed by the compiler from series), so traces are identical everywhere.

/// Adds and subtracts 1.5 * 2^52: rounds to the nearest integer (|x| < 2^51).
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;

/// e^x by its Taylor series, for |x| <= 1 (compile time only).
const fn exp_series(x: f64) -> f64 {
    let mut sum = 1.0;
    let mut term = 1.0;
    let mut k = 1;
    while k < 30 {
        term = term * x / k as f64;
        sum += term;
        k += 1;
    }
    sum
}

/// ln(y) for y in [0.5, 2] by the atanh series (compile time only).
const fn ln_series(y: f64) -> f64 {
    let s = (y - 1.0) / (y + 1.0);
    let s2 = s * s;
    let mut pow = s;
    let mut sum = 0.0;
    let mut k = 0;
    while k < 40 {
        sum += pow / (2 * k + 1) as f64;
        pow *= s2;
        k += 1;
    }
    2.0 * sum
}

/// 2^(j/64), j in 0..64.
const EXP2_64: [f64; 64] = {
    let mut t = [0.0; 64];
    let mut j = 0;
    while j < 64 {
        t[j] = exp_series(j as f64 * std::f64::consts::LN_2 / 64.0);
        j += 1;
    }
    t
};

/// For i in 0..128: an approximation c of 1/(1 + (i + 0.5)/128), and -ln(c) for exactly
/// that c.
const LN_TABLE: [(f64, f64); 128] = {
    let mut t = [(0.0, 0.0); 128];
    let mut i = 0;
    while i < 128 {
        let c = 1.0 / (1.0 + (i as f64 + 0.5) / 128.0);
        t[i] = (c, -ln_series(c));
        i += 1;
    }
    t
};

/// e^x, relative error below 1e-13; `x` is clamped to ±700.
#[inline]
pub(crate) fn exp(x: f64) -> f64 {
    const LN2_64_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000) / 64.0;
    const LN2_64_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76) / 64.0;
    let x = x.clamp(-700.0, 700.0);
    let k = (x * (64.0 * std::f64::consts::LOG2_E) + ROUND_MAGIC) - ROUND_MAGIC;
    let r = (x - k * LN2_64_HI) - k * LN2_64_LO;
    let k = k as i64;
    // |r| <= ln(2)/128.
    let r2 = r * r;
    let p = 1.0 + r + r2 * (0.5 + r * (1.0 / 6.0) + r2 * (1.0 / 24.0 + r * (1.0 / 120.0)));
    let scale = f64::from_bits((((k >> 6) + 1023) as u64) << 52);
    scale * EXP2_64[(k & 63) as usize] * p
}

/// The natural logarithm of a positive, normal `x`, absolute error below 1e-14.
#[inline]
pub(crate) fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7FF) as i64 - 1023;
    let m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    let (c, ln_m_over) = LN_TABLE[((bits >> 45) & 127) as usize];
    // m * c is within 1/256 of 1.
    let t = m * c - 1.0;
    let t2 = t * t;
    let log1p = t - t2 * (0.5 - t * (1.0 / 3.0) + t2 * (0.25 - t * 0.2));
    e as f64 * std::f64::consts::LN_2 + ln_m_over + log1p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn portable_exp_and_ln_are_accurate() {
        let mut rng = Rng::new(1);
        for _ in 0..100_000 {
            let x = (rng.f64() - 0.5) * 1400.0;
            let (a, b) = (exp(x), x.exp());
            assert!(((a - b) / b).abs() < 1e-13, "exp({x}) = {a}, not {b}");
            let y = exp((rng.f64() - 0.5) * 1400.0);
            let (a, b) = (ln(y), y.ln());
            assert!(
                (a - b).abs() <= 1e-13 * b.abs().max(1.0),
                "ln({y}) = {a}, not {b}"
            );
            let z = rng.f64() + 0.5;
            assert!((ln(z) - z.ln()).abs() < 1e-14, "ln({z})");
        }
        assert!(ln(1.0).abs() < 1e-15);
        assert_eq!(exp(0.0), 1.0);
    }
}
