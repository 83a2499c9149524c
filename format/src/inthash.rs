//! A fast hasher for maps keyed by small integers from the trace or the kernel (path ids,
//! thread ids, inode identities), looked up once or more per event by the recorder and the
//! analyzer. SipHash's resistance to chosen collisions buys nothing for such keys and costs a
//! good part of a per-event pass. The one hasher of iodump's integer-keyed maps (recorder,
//! one-pass queries, report).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hashing of each integer written (FxHash, as rustc's): one rotate, xor and
/// multiply per integer; the multiply spreads consecutive keys over the high bits hashbrown
/// uses to pick a group.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A `HashMap` with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_small_keys_spread() {
        let mut m: IntMap<(u32, u64, u32), u32> = IntMap::default();
        for i in 0..10_000u32 {
            m.insert((i % 7, u64::from(i), i / 3), i);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.get(&(3, 10, 3)), Some(&10));
        // Hashes of consecutive keys differ in their high bits (hashbrown uses the top 7).
        let h = |k: u64| {
            let mut x = IntHasher::default();
            x.write_u64(k);
            x.finish() >> 57
        };
        let tops: std::collections::HashSet<u64> = (0..64).map(h).collect();
        assert!(tops.len() > 32, "{}", tops.len());
    }
}
