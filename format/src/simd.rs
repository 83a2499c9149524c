//! Which instruction sets the running CPU has beyond the build's baseline, asked once: the
//! hot decoding loops are compiled a second time for x86-64-v3 (AVX2 and its companions)
//! and chosen at run time, so one binary runs everywhere and uses what is there.

use std::sync::atomic::{AtomicU8, Ordering};

/// 0: not asked yet, 1: no (or turned off), 2: yes.
static V3: AtomicU8 = AtomicU8::new(0);

/// True when the decoding loops compiled for x86-64-v3 are used: the CPU has the features
/// they are compiled for (AVX2, BMI1, BMI2, LZCNT, POPCNT, MOVBE, FMA) and
/// [`use_x86_64_v3`] did not turn them off.
#[inline]
pub fn has_x86_64_v3() -> bool {
    asked_once(&V3, detect)
}

/// `flag`'s answer (0: not asked yet, 1: no, 2: yes), asking `detect` the first time.
#[inline]
fn asked_once(flag: &AtomicU8, detect: fn() -> bool) -> bool {
    match flag.load(Ordering::Relaxed) {
        0 => {
            let yes = detect();
            flag.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

/// Uses the loops beyond the baseline (x86-64-v3's, AVX-512's) where the CPU has them
/// (`true`, the default) or the baseline loops everywhere (`false`): both decode the same
/// values; benchmarks and tests compare them.
pub fn use_x86_64_v3(on: bool) {
    V3.store(if on && detect() { 2 } else { 1 }, Ordering::Relaxed);
    AVX512.store(if on && detect_avx512() { 2 } else { 1 }, Ordering::Relaxed);
}

#[cfg(target_arch = "x86_64")]
fn detect() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("movbe")
        && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> bool {
    false
}

/// 0: not asked yet, 1: no (or turned off), 2: yes.
static AVX512: AtomicU8 = AtomicU8::new(0);

/// True when the CPU has AVX-512F and AVX-512VL (the spreading of nullable columns' values
/// to their rows uses their masked expanding loads) and [`use_x86_64_v3`] did not turn the
/// loops beyond the baseline off.
#[inline]
pub fn has_avx512() -> bool {
    asked_once(&AVX512, detect_avx512)
}

#[cfg(target_arch = "x86_64")]
fn detect_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_avx512() -> bool {
    false
}
