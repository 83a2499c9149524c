//! Popularity-ordered file pools.

use crate::math::{exp, ln};
use crate::rng::Rng;

/// Popularity-ordered files: rank r is drawn with probability ∝ 1/(r+1).
pub(crate) struct ZipfPool {
    files: Vec<u32>,
    ln_n1: f64,
}

impl ZipfPool {
    /// The pool of `files`, ranked in a random order.
    pub(crate) fn new(mut files: Vec<u32>, rng: &mut Rng) -> ZipfPool {
        assert!(!files.is_empty());
        rng.shuffle(&mut files);
        let ln_n1 = ln((files.len() + 1) as f64);
        ZipfPool { files, ln_n1 }
    }

    /// A file, by popularity.
    #[inline]
    pub(crate) fn zipf(&self, rng: &mut Rng) -> u32 {
        let r = exp(rng.f64() * self.ln_n1) as usize;
        self.files[r.saturating_sub(1).min(self.files.len() - 1)]
    }
}
