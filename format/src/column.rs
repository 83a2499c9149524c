//! Encoding of one integer column of an event segment (`schemas/iod-format.md`, "Column
//! block"): a validity part for nullable columns, a value transform (none, delta, per-device
//! sequential), a common power-of-two shift, and a value encoding (constant, dictionary, byte
//! planes). zstd runs over the whole segment afterwards; byte planes give it long runs of
//! equal high bytes to squeeze.

use crate::bytes::{put_varint, unzigzag, varint_len, zigzag, Cursor};
use crate::error::DecodeError;

/// Validity codes.
pub const VALID_ALL: u8 = 0;
/// Every row is null; no values follow.
pub const VALID_NONE: u8 = 1;
/// A bitmap of `ceil(n/8)` bytes follows; bit `i % 8` of byte `i / 8` set = row `i` present.
pub const VALID_BITMAP: u8 = 2;

/// Value transform codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    /// Values as they are.
    None = 0,
    /// `zigzag((v[i] - v[i-1]) >> shift)`, with `v[-1] = start`, a varint stored right after
    /// the shift byte (writers use `v[0]`, so the first stored value is 0).
    Delta = 1,
    /// Sector column only: `zigzag((sector - expected) >> shift)` where `expected` is the end
    /// (`sector + ceil(bytes / 512)`) of the previous event on the same device, 0 at first.
    Seq = 2,
    /// Sector column only: as `Seq`, but `expected` is the end of the previous event with the
    /// same device *and* path id (one stream per file), 0 at first.
    SeqFile = 3,
}

impl Transform {
    fn from_code(code: u8) -> Result<Transform, DecodeError> {
        match code {
            0 => Ok(Transform::None),
            1 => Ok(Transform::Delta),
            2 => Ok(Transform::Seq),
            3 => Ok(Transform::SeqFile),
            _ => Err(DecodeError::UnknownEncoding {
                what: "column transform",
                code,
            }),
        }
    }
}

/// Value encoding codes.
pub const ENC_CONST: u8 = 0;
/// Dictionary of at most 256 values, then one index byte per value.
pub const ENC_DICT: u8 = 1;
/// Byte planes: varint base, width `w` (1..=8), then `w` planes of `m` bytes, plane `k`
/// holding byte `k` (little-endian order) of every `value - base`.
pub const ENC_PLANES: u8 = 2;

/// Largest dictionary.
pub const MAX_DICT: usize = 256;

/// Reusable scratch space for encoding, so that encoding a segment allocates nothing once warm.
#[derive(Default)]
pub struct EncodeScratch {
    t: Vec<u64>,
    dict_slots: Vec<u64>,
    dict_used: Vec<bool>,
    dict_vals: Vec<u64>,
    seq_state: SeqState,
}

/// A column of present values plus optional validity, as handed to [`encode_column`].
pub struct ColumnIn<'a> {
    /// Values of the present rows, in row order.
    pub values: &'a [u64],
    /// Row count of the segment.
    pub rows: usize,
    /// `None` when every row is present; otherwise one flag per row.
    pub validity: Option<&'a [bool]>,
}

/// Context the Seq transforms need: the device, byte count and path id of every row.
pub struct SeqContext<'a> {
    /// Device of each row.
    pub dev: &'a [u64],
    /// Bytes of each row.
    pub bytes: &'a [u64],
    /// Path id of each row.
    pub path: &'a [u64],
}

/// Expected next sector per stream key, an open-addressing hash table (keys are
/// `dev << 32 | path_id`, or `dev` alone); reused across segments.
#[derive(Default)]
pub struct SeqState {
    table: SeqTable,
    /// Per-file streams indexed by path id: (dev, epoch, expected). A slot belongs to the
    /// first device that uses it in a segment; other devices with the same path id go to
    /// the hash table.
    dense: Vec<(u32, u32, u64)>,
    epoch: u32,
}

/// The hash table of [`SeqState`]: keys, values, which slots are used.
#[derive(Default)]
struct SeqTable {
    keys: Vec<u64>,
    vals: Vec<u64>,
    used: Vec<bool>,
    len: usize,
    last: Option<(u64, usize)>,
}

/// Path ids below this use the dense table.
const DENSE_PATHS: u32 = 1 << 20;

impl SeqState {
    fn clear(&mut self) {
        self.table.clear();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.dense.iter_mut().for_each(|d| *d = (0, 0, 0));
            self.epoch = 1;
        }
    }

    /// Makes the dense table hold path ids up to `max_path` (below [`DENSE_PATHS`]).
    fn reserve_dense(&mut self, max_path: u32) {
        let p = max_path as usize;
        if self.dense.len() <= p {
            self.dense.resize((p + 1).next_power_of_two(), (0, 0, 0));
        }
    }

    /// The expected next sector of stream `(dev, path)` (Seq-file) or `dev` (Seq).
    #[inline]
    fn stream(&mut self, tr: Transform, dev: u64, path: u64) -> &mut u64 {
        if tr == Transform::SeqFile && path < DENSE_PATHS as u64 && dev <= u32::MAX as u64 {
            self.reserve_dense(path as u32);
            let p = path as usize;
            let epoch = self.epoch;
            let slot = &mut self.dense[p];
            if slot.1 != epoch {
                *slot = (dev as u32, epoch, 0);
            }
            if slot.0 == dev as u32 {
                // Re-borrow to satisfy the borrow checker across the fallback below.
                return &mut self.dense[p].2;
            }
        }
        self.table.slot(seq_key(tr, dev, path))
    }
}

impl SeqTable {
    fn clear(&mut self) {
        if self.len > 0 {
            self.used.iter_mut().for_each(|u| *u = false);
        }
        self.len = 0;
        self.last = None;
    }

    #[inline]
    fn slot(&mut self, key: u64) -> &mut u64 {
        if let Some((k, i)) = self.last {
            if k == key {
                return &mut self.vals[i];
            }
        }
        if (self.len + 1) * 2 > self.keys.len() {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
        loop {
            if !self.used[h] {
                self.used[h] = true;
                self.keys[h] = key;
                self.vals[h] = 0;
                self.len += 1;
                break;
            }
            if self.keys[h] == key {
                break;
            }
            h = (h + 1) & mask;
        }
        self.last = Some((key, h));
        &mut self.vals[h]
    }

    fn grow(&mut self) {
        let cap = (self.keys.len() * 2).max(64);
        let old: Vec<(u64, u64)> = (0..self.keys.len())
            .filter(|&i| self.used[i])
            .map(|i| (self.keys[i], self.vals[i]))
            .collect();
        self.keys = vec![0; cap];
        self.vals = vec![0; cap];
        self.used = vec![false; cap];
        self.len = 0;
        self.last = None;
        for (k, v) in old {
            *self.slot(k) = v;
        }
    }
}

#[inline]
fn seq_key(tr: Transform, dev: u64, path: u64) -> u64 {
    if tr == Transform::SeqFile {
        (dev << 32) | (path & 0xffff_ffff)
    } else {
        dev
    }
}

#[inline]
fn sectors_of(bytes: u64) -> u64 {
    bytes.div_ceil(512)
}

/// Applies `transform` to `values` into `out` (before shifting); returns the common number of
/// trailing zero bits of the transformed signed/unsigned values (capped at 63).
fn apply_transform(
    transform: Transform,
    values: &[u64],
    seq: Option<&SeqContext<'_>>,
    state: &mut SeqState,
    out: &mut Vec<u64>,
) -> u32 {
    out.clear();
    out.reserve(values.len());
    let mut or_bits = 0u64;
    match transform {
        Transform::None => {
            for &v in values {
                or_bits |= v;
                out.push(v);
            }
        }
        Transform::Delta => {
            let mut prev = values.first().copied().unwrap_or(0);
            for &v in values {
                let d = v.wrapping_sub(prev);
                prev = v;
                or_bits |= d;
                out.push(d);
            }
        }
        Transform::Seq | Transform::SeqFile => {
            let ctx = seq.expect("seq transform needs context");
            state.clear();
            for (i, &v) in values.iter().enumerate() {
                let e = state.stream(transform, ctx.dev[i], ctx.path[i]);
                let d = v.wrapping_sub(*e);
                *e = v.wrapping_add(sectors_of(ctx.bytes[i]));
                or_bits |= d;
                out.push(d);
            }
        }
    }
    if or_bits == 0 {
        0
    } else {
        or_bits.trailing_zeros().min(63)
    }
}

/// What [`finish_values`] learnt about the stored values.
#[derive(Clone, Copy, Debug)]
struct Stats {
    min: u64,
    max: u64,
    /// Estimated compressed size: the sum over values of their significant bytes above the
    /// minimum (zero bytes cost zstd next to nothing).
    cost: u64,
}

#[inline]
fn sig_bytes(v: u64) -> u64 {
    (64 - v.leading_zeros() as u64).div_ceil(8)
}

/// Shifts (and zigzags, for signed transforms) the transformed values in place. The cost
/// estimate (a pass over the values) is made only when `want_cost`; it is 0 otherwise.
fn finish_values(transform: Transform, shift: u32, t: &mut [u64], want_cost: bool) -> Stats {
    let (mut min, mut max) = (u64::MAX, 0u64);
    if transform == Transform::None {
        for v in t.iter_mut() {
            *v >>= shift;
            min = min.min(*v);
            max = max.max(*v);
        }
    } else {
        for v in t.iter_mut() {
            *v = zigzag((*v as i64) >> shift);
            min = min.min(*v);
            max = max.max(*v);
        }
    }
    let cost = if want_cost {
        t.iter().map(|&v| sig_bytes(v - min)).sum()
    } else {
        0
    };
    Stats { min, max, cost }
}

fn width_bytes(range: u64) -> usize {
    (sig_bytes(range) as usize).max(1)
}

/// Collects the distinct values of `t` if there are at most `MAX_DICT`; returns false otherwise.
fn build_dict(t: &[u64], s: &mut EncodeScratch) -> bool {
    const SLOTS: usize = 1024;
    s.dict_slots.clear();
    s.dict_slots.resize(SLOTS, 0);
    s.dict_used.clear();
    s.dict_used.resize(SLOTS, false);
    s.dict_vals.clear();
    let mut last = None;
    for &v in t {
        if last == Some(v) {
            continue;
        }
        last = Some(v);
        let mut h = (v.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize;
        loop {
            if !s.dict_used[h] {
                if s.dict_vals.len() == MAX_DICT {
                    return false;
                }
                s.dict_used[h] = true;
                s.dict_slots[h] = v;
                s.dict_vals.push(v);
                break;
            }
            if s.dict_slots[h] == v {
                break;
            }
            h = (h + 1) & (SLOTS - 1);
        }
    }
    true
}

/// Where [`encode_column`] put the planes of a `planes` encoding (spec §4.3) in its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planes {
    /// Offset of plane 0 in the output buffer.
    pub at: usize,
    /// Bytes per plane (the present rows).
    pub plane_bytes: usize,
    /// How many planes (the width `w`).
    pub count: usize,
}

fn put_planes_block(out: &mut Vec<u8>, t: &[u64], base: u64, w: usize) -> Planes {
    out.push(ENC_PLANES);
    put_varint(out, base);
    out.push(w as u8);
    let at = out.len();
    put_planes(out, t, base, w);
    Planes {
        at,
        plane_bytes: t.len(),
        count: w,
    }
}

fn put_planes(out: &mut Vec<u8>, t: &[u64], base: u64, w: usize) {
    let start = out.len();
    out.resize(start + w * t.len(), 0);
    let dst = &mut out[start..];
    for k in 0..w {
        let plane = &mut dst[k * t.len()..(k + 1) * t.len()];
        let sh = 8 * k as u32;
        for (p, &v) in plane.iter_mut().zip(t) {
            *p = ((v - base) >> sh) as u8;
        }
    }
}

/// Encodes one column block and appends it (without the column id / length prefix) to `out`.
/// `transforms` lists the transforms to try; the smallest result is kept. Returns where the
/// planes went when the block is `planes`-encoded.
pub fn encode_column(
    col: &ColumnIn<'_>,
    transforms: &[Transform],
    seq: Option<&SeqContext<'_>>,
    s: &mut EncodeScratch,
    out: &mut Vec<u8>,
) -> Option<Planes> {
    // Validity.
    match col.validity {
        None => out.push(VALID_ALL),
        Some(_) if col.values.is_empty() => {
            out.push(VALID_NONE);
            return None;
        }
        Some(v) => {
            out.push(VALID_BITMAP);
            let start = out.len();
            out.resize(start + col.rows.div_ceil(8), 0);
            for (i, &present) in v.iter().enumerate() {
                if present {
                    out[start + i / 8] |= 1 << (i % 8);
                }
            }
        }
    }
    let values = col.values;
    if values.is_empty() {
        out.extend_from_slice(&[Transform::None as u8, 0, ENC_CONST, 0]);
        return None;
    }
    // Choose the transform by estimated size (ties: first listed).
    let mut best: Option<(u64, Transform, u32)> = None;
    let mut seq_state = std::mem::take(&mut s.seq_state);
    let mut t = std::mem::take(&mut s.t);
    let want_cost = transforms.len() > 1;
    let mut last = None;
    for &tr in transforms {
        let shift = apply_transform(tr, values, seq, &mut seq_state, &mut t);
        let st = finish_values(tr, shift, &mut t, want_cost);
        if best.is_none_or(|(c, _, _)| st.cost < c) {
            best = Some((st.cost, tr, shift));
        }
        last = Some(st);
    }
    let (_, tr, shift) = best.expect("at least one transform");
    // `t` holds the last transform's values (and `last` their min and max) unless another
    // one was chosen: then apply that one again.
    let st = if transforms.last() != Some(&tr) {
        let sh = apply_transform(tr, values, seq, &mut seq_state, &mut t);
        debug_assert_eq!(sh, shift);
        finish_values(tr, shift, &mut t, false)
    } else {
        last.expect("at least one transform")
    };
    let w = width_bytes(st.max - st.min);
    out.push(tr as u8);
    out.push(shift as u8);
    if tr == Transform::Delta {
        put_varint(out, values[0]);
    }
    let first = t[0];
    debug_assert_eq!(st.min == st.max, t.iter().all(|&v| v == first));
    let mut planes = None;
    if st.min == st.max {
        out.push(ENC_CONST);
        put_varint(out, first);
    } else if w > 1 && build_dict(&t, s) {
        let dict_cost: usize = s.dict_vals.iter().map(|&v| varint_len(v)).sum::<usize>() + t.len();
        if dict_cost < w * t.len() {
            out.push(ENC_DICT);
            put_varint(out, s.dict_vals.len() as u64);
            // Sort the dictionary so equal inputs give equal bytes whatever the hash order.
            s.dict_vals.sort_unstable();
            for &v in &s.dict_vals {
                put_varint(out, v);
            }
            let start = out.len();
            out.resize(start + t.len(), 0);
            for (o, v) in out[start..].iter_mut().zip(&t) {
                *o = s.dict_vals.binary_search(v).expect("value in dictionary") as u8;
            }
        } else {
            planes = Some(put_planes_block(out, &t, st.min, w));
        }
    } else {
        planes = Some(put_planes_block(out, &t, st.min, w));
    }
    s.t = t;
    s.seq_state = seq_state;
    planes
}

/// A column block's stored values, before the transform is undone.
enum Values<'a> {
    /// Every value the same.
    Const(u64),
    /// A dictionary and one index per value (checked to be in the dictionary).
    Dict(&'a [u64; MAX_DICT], &'a [u8]),
    /// `w` byte planes of the values less `base`.
    Planes {
        base: u64,
        w: usize,
        planes: &'a [u8],
    },
}

/// An unsigned integer type a column decodes into: `u8`, `u16`, `u32` or `u64`, and no
/// other (the trait is sealed: the AVX-512 null spreading moves a `Lane`'s values as the
/// 4- or 8-byte integers they are, and zero is their default).
pub trait Lane: Copy + Default + sealed::Sealed {
    /// Its largest value, `2^k - 1`.
    const MAX: u64;
    /// `v` as this type, bits above it dropped (the caller checks the values fit).
    fn narrow(v: u64) -> Self;
}

mod sealed {
    /// Implemented only by `u8`, `u16`, `u32` and `u64`.
    pub trait Sealed {}
}

macro_rules! lane {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Lane for $t {
            const MAX: u64 = <$t>::MAX as u64;
            #[inline(always)]
            fn narrow(v: u64) -> Self {
                v as $t
            }
        }
    )*};
}
lane!(u8, u16, u32, u64);

/// `f` narrowed to `T`, OR-ing each value into `or` when `T` is narrower than 64 bits (a
/// value too large for `T` then shows in `or`, as `T::MAX` is `2^k - 1`).
#[inline(always)]
fn narrowing<'a, T: Lane, F: FnMut(u64) -> u64 + 'a>(
    or: &'a mut u64,
    mut f: F,
) -> impl FnMut(u64) -> T + 'a {
    move |v| {
        let x = f(v);
        if T::MAX != u64::MAX {
            *or |= x;
        }
        T::narrow(x)
    }
}

impl Values<'_> {
    /// Appends `f` of each of the `m` values to `t`. On an x86-64 CPU with AVX2 (x86-64-v3,
    /// asked at run time) the loops run compiled for it.
    #[inline]
    fn fill<T>(&self, m: usize, t: &mut Vec<T>, f: impl FnMut(u64) -> T) {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::has_x86_64_v3() {
            // SAFETY: the CPU has every feature `fill_v3` is compiled for (`has_x86_64_v3`
            // asked it at run time).
            return unsafe { self.fill_v3(m, t, f) };
        }
        self.fill_loops(m, t, f)
    }

    /// [`Values::fill`] compiled for x86-64-v3 (AVX2, BMI1/2, LZCNT, POPCNT, MOVBE, FMA).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,movbe,fma")]
    unsafe fn fill_v3<T>(&self, m: usize, t: &mut Vec<T>, f: impl FnMut(u64) -> T) {
        self.fill_loops(m, t, f)
    }

    /// The loops of [`Values::fill`], inlined into each build of it.
    #[inline(always)]
    fn fill_loops<T>(&self, m: usize, t: &mut Vec<T>, f: impl FnMut(u64) -> T) {
        match *self {
            Values::Const(v) => t.extend(std::iter::repeat_n(v, m).map(f)),
            Values::Dict(dict, idx) => t.extend(idx.iter().map(|&i| dict[i as usize]).map(f)),
            Values::Planes { base, w, planes } => match w {
                1 => unplane::<1, T>(planes, m, base, t, f),
                2 => unplane::<2, T>(planes, m, base, t, f),
                3 => unplane::<3, T>(planes, m, base, t, f),
                4 => unplane::<4, T>(planes, m, base, t, f),
                5 => unplane::<5, T>(planes, m, base, t, f),
                6 => unplane::<6, T>(planes, m, base, t, f),
                7 => unplane::<7, T>(planes, m, base, t, f),
                _ => unplane::<8, T>(planes, m, base, t, f),
            },
        }
    }
}

/// Appends `f` of `m` values of `W` bytes rebuilt from `W` planes of `m` bytes, plus `base`.
#[inline]
fn unplane<const W: usize, T>(
    planes: &[u8],
    m: usize,
    base: u64,
    t: &mut Vec<T>,
    mut f: impl FnMut(u64) -> T,
) {
    let planes = &planes[..W * m];
    // Row by row, each value gathered from its W planes in one write (the planes are read
    // in step, so each stays a sequential stream).
    let p: [&[u8]; W] = std::array::from_fn(|k| &planes[k * m..(k + 1) * m]);
    t.extend((0..m).map(|i| {
        let mut v = 0u64;
        for (k, plane) in p.iter().enumerate() {
            v |= (plane[i] as u64) << (8 * k);
        }
        f(v.wrapping_add(base))
    }));
}

/// `BITS[b][k]` = bit `k` of byte `b` is set.
static BITS: [[bool; 8]; 256] = {
    let mut t = [[false; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            t[b][k] = (b >> k) & 1 == 1;
            k += 1;
        }
        b += 1;
    }
    t
};

/// What [`decode_column_into`] found besides the values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColumnMeta {
    /// Some rows are null (the validity buffer was filled).
    pub has_nulls: bool,
    /// The OR of every value when decoded into a type narrower than 64 bits (0 otherwise):
    /// above the type's maximum when some value did not fit (and was cut).
    pub or_bits: u64,
    /// A Seq transform still to be undone (see [`undo_seq`]).
    pub pending_seq: Option<Transform>,
}

/// Decodes one column block of a segment of `rows` rows into `values` (one per row, 0 where
/// null) and, when some rows are null, `valid` (one flag per row). Both buffers are cleared
/// first and reused, so a warm decoder allocates nothing. Values are narrowed to `T` as
/// they are rebuilt; [`ColumnMeta::or_bits`] tells the caller whether they all fit.
pub fn decode_column_into<T: Lane>(
    block: &[u8],
    rows: usize,
    values: &mut Vec<T>,
    valid: &mut Vec<bool>,
) -> Result<ColumnMeta, DecodeError> {
    values.clear();
    valid.clear();
    let mut c = Cursor::new(block);
    let mut meta = ColumnMeta::default();
    // The validity bitmap, when there is one.
    let mut bitmap: &[u8] = &[];
    let present = match c.u8()? {
        VALID_ALL => rows,
        VALID_NONE => {
            values.resize(rows, T::default());
            valid.resize(rows, false);
            meta.has_nulls = true;
            return Ok(meta);
        }
        VALID_BITMAP => {
            let bm = c.take(rows.div_ceil(8))?;
            // A byte at a time: eight flags from one lookup, then trim the padding bits.
            for &byte in bm {
                valid.extend_from_slice(&BITS[byte as usize]);
            }
            valid.truncate(rows);
            meta.has_nulls = true;
            bitmap = bm;
            count_present(bm, rows)
        }
        code => {
            return Err(DecodeError::UnknownEncoding {
                what: "column validity",
                code,
            })
        }
    };
    let tr = Transform::from_code(c.u8()?)?;
    let shift = c.u8()? as u32;
    if shift > 63 {
        return Err(DecodeError::OutOfRange {
            what: "column shift",
            at: c.pos() - 1,
            value: shift as u64,
            max: 63,
        });
    }
    let delta_start = if tr == Transform::Delta {
        c.varint()?
    } else {
        0
    };
    let t = values;
    let mut dict = [0u64; MAX_DICT];
    let values = match c.u8()? {
        ENC_CONST => Values::Const(c.varint()?),
        ENC_DICT => {
            let k = c.varint_max(MAX_DICT as u64, "dictionary size")? as usize;
            for d in dict.iter_mut().take(k) {
                *d = c.varint()?;
            }
            let idx = c.take(present)?;
            let max_idx = max_of(idx) as usize;
            if present > 0 && max_idx >= k {
                return Err(DecodeError::OutOfRange {
                    what: "dictionary index",
                    at: c.pos(),
                    value: max_idx as u64,
                    max: (k as u64).saturating_sub(1),
                });
            }
            Values::Dict(&dict, idx)
        }
        ENC_PLANES => {
            let base = c.varint()?;
            let w = c.u8()? as usize;
            if !(1..=8).contains(&w) {
                return Err(DecodeError::OutOfRange {
                    what: "plane width",
                    at: c.pos() - 1,
                    value: w as u64,
                    max: 8,
                });
            }
            let planes = c.take(w.checked_mul(present).ok_or(DecodeError::OutOfRange {
                what: "plane bytes",
                at: c.pos(),
                value: present as u64,
                max: u64::MAX / 8,
            })?)?;
            Values::Planes { base, w, planes }
        }
        code => {
            return Err(DecodeError::UnknownEncoding {
                what: "column encoding",
                code,
            })
        }
    };
    if !c.is_empty() {
        return Err(DecodeError::TrailingBytes {
            what: "column block",
            extra: c.remaining(),
        });
    }
    // Undo the shift and the transform as the values are rebuilt, in the same pass (Seq is
    // finished by `undo_seq`, which needs other columns), and narrow them to `T`.
    let mut or = 0u64;
    match tr {
        Transform::None if shift == 0 => values.fill(present, t, narrowing(&mut or, |v| v)),
        Transform::None => values.fill(present, t, narrowing(&mut or, |v| v << shift)),
        Transform::Delta => {
            let mut prev = delta_start;
            values.fill(
                present,
                t,
                narrowing(&mut or, |v| {
                    prev = prev.wrapping_add((unzigzag(v) << shift) as u64);
                    prev
                }),
            )
        }
        Transform::Seq | Transform::SeqFile => {
            values.fill(
                present,
                t,
                narrowing(&mut or, |v| (unzigzag(v) << shift) as u64),
            );
            meta.pending_seq = Some(tr);
        }
    }
    meta.or_bits = or;
    // Spread present values to their rows.
    if meta.has_nulls && present < rows {
        t.resize(rows, T::default());
        spread_present(t, bitmap, present);
    }
    Ok(meta)
}

/// The set bits of the first `rows` bits of `bitmap` (which holds `rows.div_ceil(8)` bytes).
/// The largest of `v` (0 when empty), in a loop the compiler turns into vector compares
/// (`Iterator::max` was left as a call per element through `Ord::cmp` in some builds: 9% of
/// a decode of the diff's columns).
#[inline]
fn max_of<T: Copy + Ord + Default>(v: &[T]) -> T {
    v.iter()
        .fold(T::default(), |m, &x| if x > m { x } else { m })
}

fn count_present(bitmap: &[u8], rows: usize) -> usize {
    let full = rows / 8;
    let mut n: usize = bitmap[..full].iter().map(|b| b.count_ones() as usize).sum();
    if !rows.is_multiple_of(8) {
        n += (bitmap[full] & ((1u8 << (rows % 8)) - 1)).count_ones() as usize;
    }
    n
}

/// Moves the `present` values at the front of `t` to the rows whose bit is set in `bitmap`
/// (bit `i % 8` of byte `i / 8` for row `i`; `present` of the first `t.len()` bits are set)
/// and zeroes the other rows, in place, from the back: eight rows per bitmap byte (the
/// present values of a byte's rows are the `count_ones` before those of the rows after it).
fn spread_present<T: Lane>(t: &mut [T], bitmap: &[u8], present: usize) {
    let rows = t.len();
    let full = rows / 8;
    let mut src = present;
    // The rows after the last full byte, one by one.
    for i in (full * 8..rows).rev() {
        let p = (bitmap[i / 8] >> (i % 8)) & 1 == 1;
        src -= p as usize;
        let v = t[src];
        t[i] = if p { v } else { T::default() };
    }
    #[cfg(target_arch = "x86_64")]
    if matches!(std::mem::size_of::<T>(), 4 | 8) && crate::simd::has_avx512() {
        // SAFETY: the CPU has AVX-512F and VL (`has_avx512` asked it at run time); `T` is
        // `u32` or `u64` (a sealed `Lane` of 4 or 8 bytes); `src` is the set bits of the
        // full bytes (the tail's were taken off above) and `t` has `8 * full` rows or more.
        unsafe { spread_bytes_avx512(t, &bitmap[..full], src) };
        return;
    }
    for g in (0..full).rev() {
        let b = bitmap[g];
        src -= b.count_ones() as usize;
        let i = g * 8;
        match b {
            // `src + 8` is the count of present rows up to this byte's last: `<= i + 8`.
            0xFF => t.copy_within(src..src + 8, i),
            0 => t[i..i + 8].fill(T::default()),
            _ => {
                // A null among the eight, so fewer than `i + 8 <= rows` values are present
                // up to here: every index read is in `t`; all read before any is written.
                let v: [T; 8] =
                    std::array::from_fn(|j| t[src + (b & ((1u8 << j) - 1)).count_ones() as usize]);
                for (j, (o, v)) in t[i..i + 8].iter_mut().zip(v).enumerate() {
                    *o = if (b >> j) & 1 == 1 { v } else { T::default() };
                }
            }
        }
    }
}

/// [`spread_present`]'s bytes of eight rows with AVX-512: each byte's present values loaded
/// straight to their rows (`expandload`), the others zero. `src` is the count of present
/// rows before `8 * bytes.len()`. `T` is `u32` or `u64`.
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512VL; `T` is `u32` or `u64`; `t` holds at least
/// `8 * bytes.len()` rows and `src` is the number of set bits of `bytes`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
unsafe fn spread_bytes_avx512<T: Lane>(t: &mut [T], bytes: &[u8], mut src: usize) {
    use std::arch::x86_64::*;
    assert!(t.len() >= bytes.len() * 8);
    let p = t.as_mut_ptr();
    for g in (0..bytes.len()).rev() {
        let b = bytes[g];
        src -= b.count_ones() as usize;
        // SAFETY: the load reads the `count_ones(b)` values at `src`, which end at or before
        // row `8 * g + 8` (the present rows up to this byte's last); the store writes rows
        // `8 * g .. 8 * g + 8`, inside `t` (asserted above); `T` is 4 or 8 bytes wide, so
        // the pointers are to `u32` or `u64` values (unaligned loads and stores).
        unsafe {
            if std::mem::size_of::<T>() == 8 {
                let v = _mm512_maskz_expandloadu_epi64(b, p.add(src) as *const i64);
                _mm512_storeu_si512(p.add(8 * g) as *mut __m512i, v);
            } else {
                let v = _mm256_maskz_expandloadu_epi32(b, p.add(src) as *const i32);
                _mm256_storeu_si256(p.add(8 * g) as *mut __m256i, v);
            }
        }
    }
}

/// Finishes a Seq-transformed column given the device, byte count and path id of every row.
pub fn undo_seq(
    tr: Transform,
    deltas: &mut [u64],
    dev: &[u32],
    bytes: &[u32],
    path: &[u32],
    state: &mut SeqState,
) {
    state.clear();
    let max_path = max_of(path);
    if tr == Transform::SeqFile && max_path < DENSE_PATHS {
        // Every stream's slot in the dense table, without a branch on whether the slot is
        // new in this segment (as good as random: a file's first I/O in the segment).
        state.reserve_dense(max_path);
        let epoch = state.epoch;
        let (dense, table) = (&mut state.dense[..], &mut state.table);
        for (((v, &d), &b), &p) in deltas.iter_mut().zip(dev).zip(bytes).zip(path) {
            let slot = &mut dense[p as usize];
            let fresh = slot.1 != epoch;
            if !fresh && slot.0 != d {
                // Another device's I/O to the same path id: the hash table's stream.
                let e = table.slot(seq_key(tr, d as u64, p as u64));
                let sector = e.wrapping_add(*v);
                *e = sector.wrapping_add(sectors_of(b as u64));
                *v = sector;
                continue;
            }
            let expected = if fresh { 0 } else { slot.2 };
            let sector = expected.wrapping_add(*v);
            *slot = (d, epoch, sector.wrapping_add(sectors_of(b as u64)));
            *v = sector;
        }
        return;
    }
    for (((v, &d), &b), &p) in deltas.iter_mut().zip(dev).zip(bytes).zip(path) {
        let e = state.stream(tr, d as u64, p as u64);
        let sector = e.wrapping_add(*v);
        *e = sector.wrapping_add(sectors_of(b as u64));
        *v = sector;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(values: &[u64], transforms: &[Transform]) -> Vec<u8> {
        let mut s = EncodeScratch::default();
        let mut out = Vec::new();
        let col = ColumnIn {
            values,
            rows: values.len(),
            validity: None,
        };
        encode_column(&col, transforms, None, &mut s, &mut out);
        let (mut v, mut valid) = (vec![1, 2, 3], vec![true]);
        let m = decode_column_into(&out, values.len(), &mut v, &mut valid).unwrap();
        assert!(!m.has_nulls);
        assert_eq!(v, values);
        out
    }

    #[test]
    fn encodings_round_trip() {
        round_trip(&[7; 100], &[Transform::None]);
        round_trip(&[0, u64::MAX, 1, u64::MAX - 1], &[Transform::None]);
        round_trip(&[0, u64::MAX, 1, u64::MAX - 1], &[Transform::Delta]);
        let ts: Vec<u64> = (0..1000).map(|i| 1_000_000_000 + i * 5003).collect();
        let b = round_trip(&ts, &[Transform::Delta]);
        assert!(b.len() < 2 * 1000 + 32, "{}", b.len());
        let pids: Vec<u64> = (0..1000).map(|i| 100_000 + (i % 7) * 31).collect();
        let b = round_trip(&pids, &[Transform::None]);
        assert!(b.len() < 1000 + 64, "dict expected, {}", b.len());
        let aligned: Vec<u64> = (0..1000).map(|i| (i * 7919 % 4096) * 4096).collect();
        round_trip(&aligned, &[Transform::None, Transform::Delta]);
        round_trip(&[], &[Transform::None]);
    }

    #[test]
    fn a_dictionary_index_past_the_dictionary_is_refused() {
        // 1000 rows of 7 values: a dictionary column, its indices the block's last 1000 bytes.
        let values: Vec<u64> = (0..1000).map(|i| 100_000 + (i % 7) * 100_003).collect();
        let mut block = round_trip(&values, &[Transform::None]);
        let n = block.len();
        assert_eq!(block[n - 1000..].iter().copied().max(), Some(6));
        for at in [n - 1000, n - 500, n - 1] {
            let mut bad = block.clone();
            bad[at] = 7;
            let (mut v, mut valid) = (Vec::new(), Vec::new());
            let e = decode_column_into::<u64>(&bad, 1000, &mut v, &mut valid).unwrap_err();
            assert!(e.to_string().contains("dictionary index"), "{e}");
        }
        block[n - 1] = 6;
        let (mut v, mut valid) = (Vec::new(), Vec::new());
        decode_column_into::<u64>(&block, 1000, &mut v, &mut valid).unwrap();
    }

    #[test]
    fn nullable_round_trip() {
        let rows = 10;
        let validity: Vec<bool> = (0..rows).map(|i| i % 3 == 0).collect();
        let present: Vec<u64> = vec![5, 500_000, 7, 1 << 40];
        let mut s = EncodeScratch::default();
        let mut out = Vec::new();
        let col = ColumnIn {
            values: &present,
            rows,
            validity: Some(&validity),
        };
        encode_column(&col, &[Transform::None], None, &mut s, &mut out);
        let (mut v, mut valid) = (Vec::<u64>::new(), Vec::new());
        let m = decode_column_into(&out, rows, &mut v, &mut valid).unwrap();
        assert!(m.has_nulls);
        assert_eq!(valid, validity);
        assert_eq!(v, vec![5, 0, 0, 500_000, 0, 0, 7, 0, 0, 1 << 40]);
    }

    /// A xorshift generator for test data.
    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Nullable columns of every width and many null patterns decode the same with the
    /// baseline loops and with the CPU's wider ones (AVX2, AVX-512's expanding loads), row
    /// counts not a multiple of 8 included.
    #[test]
    fn nulls_spread_to_their_rows_on_every_path() {
        let mut next = rng(7);
        let mut s = EncodeScratch::default();
        for wide in [false, true] {
            crate::simd::use_x86_64_v3(wide);
            for rows in [1usize, 7, 8, 9, 64, 255, 1000, 4099] {
                // Share of present rows, in 1/8: none, a few, half, most, all but one.
                for density in [0u64, 1, 4, 7, 8] {
                    let mut validity: Vec<bool> = (0..rows).map(|_| next() % 8 < density).collect();
                    if density == 8 {
                        validity[rows / 2] = false;
                    }
                    let present: Vec<u64> = validity
                        .iter()
                        .filter(|&&p| p)
                        .map(|_| next() % 60_000 + 1)
                        .collect();
                    let mut want = Vec::with_capacity(rows);
                    let mut it = present.iter();
                    for &p in &validity {
                        want.push(if p { *it.next().unwrap() } else { 0 });
                    }
                    let col = ColumnIn {
                        values: &present,
                        rows,
                        validity: Some(&validity),
                    };
                    let mut out = Vec::new();
                    encode_column(&col, &[Transform::None], None, &mut s, &mut out);
                    let mut valid = Vec::new();
                    let (mut v16, mut v32, mut v64) =
                        (Vec::<u16>::new(), Vec::<u32>::new(), Vec::<u64>::new());
                    decode_column_into(&out, rows, &mut v16, &mut valid).unwrap();
                    decode_column_into(&out, rows, &mut v32, &mut valid).unwrap();
                    let m = decode_column_into(&out, rows, &mut v64, &mut valid).unwrap();
                    assert!(m.has_nulls);
                    assert_eq!(valid, validity, "rows {rows}, density {density}");
                    assert_eq!(v64, want, "rows {rows}, density {density}, wide {wide}");
                    let w32: Vec<u32> = want.iter().map(|&v| v as u32).collect();
                    assert_eq!(v32, w32, "rows {rows}, density {density}, wide {wide}");
                    let w16: Vec<u16> = want.iter().map(|&v| v as u16).collect();
                    assert_eq!(v16, w16, "rows {rows}, density {density}, wide {wide}");
                }
            }
        }
        crate::simd::use_x86_64_v3(true);
    }

    /// Damaged nullable blocks (any byte of a valid one changed) are decoded or refused,
    /// never a panic, on both loop sets: the null spreading trusts only counts it derives
    /// from the block's own bitmap.
    #[test]
    fn damaged_nullable_blocks_never_panic() {
        let mut next = rng(3);
        let mut s = EncodeScratch::default();
        let rows = 203;
        let validity: Vec<bool> = (0..rows).map(|_| !next().is_multiple_of(3)).collect();
        let present: Vec<u64> = validity
            .iter()
            .filter(|&&p| p)
            .map(|_| next() % 1_000_000)
            .collect();
        let col = ColumnIn {
            values: &present,
            rows,
            validity: Some(&validity),
        };
        let mut block = Vec::new();
        encode_column(&col, &[Transform::None], None, &mut s, &mut block);
        let mut valid = Vec::new();
        let (mut v32, mut v64) = (Vec::<u32>::new(), Vec::<u64>::new());
        for wide in [false, true] {
            crate::simd::use_x86_64_v3(wide);
            for at in 0..block.len() {
                for x in [0u8, 1, 2, 0x55, 0xFF, block[at] ^ 0x80] {
                    let mut b = block.clone();
                    b[at] = x;
                    let _ = decode_column_into(&b, rows, &mut v32, &mut valid);
                    let _ = decode_column_into(&b, rows, &mut v64, &mut valid);
                    // Fewer or more rows than the block was made for.
                    let _ = decode_column_into(&b, rows - 9, &mut v64, &mut valid);
                    let _ = decode_column_into(&b, rows + 17, &mut v64, &mut valid);
                }
            }
        }
        crate::simd::use_x86_64_v3(true);
    }

    /// Byte planes of every width, with and without a delta, decode the same with the
    /// baseline loops and the x86-64-v3 ones.
    #[test]
    fn planes_decode_the_same_on_every_path() {
        let mut next = rng(11);
        for wide in [false, true] {
            crate::simd::use_x86_64_v3(wide);
            for w in 1..=8u32 {
                let top = if w == 8 {
                    u64::MAX
                } else {
                    (1u64 << (8 * w)) - 1
                };
                let values: Vec<u64> = (0..3001).map(|_| next() & top).collect();
                round_trip(&values, &[Transform::None]);
                let mut acc = 0u64;
                let rising: Vec<u64> = values
                    .iter()
                    .map(|&v| {
                        acc = acc.wrapping_add(v >> 2);
                        acc
                    })
                    .collect();
                round_trip(&rising, &[Transform::Delta]);
            }
        }
        crate::simd::use_x86_64_v3(true);
    }

    #[test]
    fn seq_round_trip() {
        let dev = [1u64, 1, 2, 1, 2, 2];
        let bytes = [4096u64, 4096, 512, 8192, 1000, 0];
        let sector = [100u64, 108, 0, 116, 1, 50];
        let path = [0u64, 3, 3, 0, 0, 3];
        let ctx = SeqContext {
            dev: &dev,
            bytes: &bytes,
            path: &path,
        };
        for tr in [Transform::Seq, Transform::SeqFile] {
            let mut s = EncodeScratch::default();
            let mut out = Vec::new();
            let col = ColumnIn {
                values: &sector,
                rows: 6,
                validity: None,
            };
            out.clear();
            encode_column(&col, &[tr], Some(&ctx), &mut s, &mut out);
            let (mut v, mut valid) = (Vec::new(), Vec::new());
            let m = decode_column_into(&out, 6, &mut v, &mut valid).unwrap();
            assert_eq!(m.pending_seq, Some(tr));
            let dev32: Vec<u32> = dev.iter().map(|&d| d as u32).collect();
            let bytes32: Vec<u32> = bytes.iter().map(|&d| d as u32).collect();
            let path32: Vec<u32> = path.iter().map(|&d| d as u32).collect();
            undo_seq(
                tr,
                &mut v,
                &dev32,
                &bytes32,
                &path32,
                &mut SeqState::default(),
            );
            assert_eq!(v, sector);
        }
    }

    #[test]
    fn narrow_columns_fit_or_say_they_do_not() {
        let values: Vec<u64> = vec![0, 255, 7, 200, 1];
        let mut s = EncodeScratch::default();
        let mut out = Vec::new();
        let col = ColumnIn {
            values: &values,
            rows: values.len(),
            validity: None,
        };
        encode_column(
            &col,
            &[Transform::None, Transform::Delta],
            None,
            &mut s,
            &mut out,
        );
        let (mut v8, mut valid) = (Vec::<u8>::new(), Vec::new());
        let m = decode_column_into(&out, values.len(), &mut v8, &mut valid).unwrap();
        assert!(m.or_bits <= u8::MAX as u64);
        assert_eq!(v8, vec![0, 255, 7, 200, 1]);
        // One value past a byte: the OR says so, whatever the encoding chosen.
        let big: Vec<u64> = vec![0, 256, 7, 200, 1];
        let col = ColumnIn {
            values: &big,
            rows: big.len(),
            validity: None,
        };
        for tr in [Transform::None, Transform::Delta] {
            out.clear();
            encode_column(&col, &[tr], None, &mut s, &mut out);
            let m = decode_column_into(&out, big.len(), &mut v8, &mut valid).unwrap();
            assert!(m.or_bits > u8::MAX as u64, "{tr:?}");
            let mut v16 = Vec::<u16>::new();
            let m = decode_column_into(&out, big.len(), &mut v16, &mut valid).unwrap();
            assert!(m.or_bits <= u16::MAX as u64);
            assert_eq!(v16, vec![0, 256, 7, 200, 1]);
        }
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..64 {
            for seed in 0..64u64 {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 17) % 256) as u8)
                    .collect();
                let rows = (seed % 20) as usize;
                let _ = decode_column_into::<u8>(&bytes, rows, &mut vec![], &mut vec![]);
                let _ = decode_column_into::<u16>(&bytes, rows, &mut vec![], &mut vec![]);
                let _ = decode_column_into::<u32>(&bytes, rows, &mut vec![], &mut vec![]);
                let _ = decode_column_into::<u64>(&bytes, rows, &mut vec![], &mut vec![]);
            }
        }
    }
}
