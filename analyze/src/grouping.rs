//! Grouping a segment's rows by a small dense key before they are folded, for the passes that
//! keep figures per file (thousands of them, which do not fit in cache while the rows of
//! different files interleave): [`Groups`], a counting sort of row numbers or of the rows' values
//! that keeps each group's rows in their order, [`DenseIds`], the group index of a path id
//! without hashing, and [`DenseMap`], values by path id through that index.

use iodump_format::inthash::IntMap;

/// Ids not above this are looked up in a vector (path ids are numbered from 1 within a trace);
/// larger ones (a damaged or foreign trace) by hashing.
const DENSE_IDS: u32 = 1 << 20;

/// A number per id not above [`DENSE_IDS`], `u32::MAX` until set: the vector behind
/// [`DenseIds`], and the diff's index of each file per device.
#[derive(Default)]
pub(crate) struct DenseSlots(Vec<u32>);

impl DenseSlots {
    /// The slot of `id` (`u32::MAX`: not set yet); none above [`DENSE_IDS`].
    #[inline]
    pub(crate) fn slot(&mut self, id: u32) -> Option<&mut u32> {
        if id > DENSE_IDS {
            return None;
        }
        let p = id as usize;
        if p >= self.0.len() {
            self.0.resize(p + 1, u32::MAX);
        }
        Some(&mut self.0[p])
    }

    /// The slot of `id` without setting it: `None` when it is not set (or above
    /// [`DENSE_IDS`]; those are the caller's to keep).
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<u32> {
        self.0.get(id as usize).copied().filter(|&s| s != u32::MAX)
    }
}

/// Indices 0, 1, 2 … given to ids in the order they are first seen.
#[derive(Default)]
pub(crate) struct DenseIds {
    /// The index of each id up to [`DENSE_IDS`].
    dense: DenseSlots,
    /// The index of each larger id.
    sparse: IntMap<u32, u32>,
    /// Indices given.
    len: u32,
}

impl DenseIds {
    /// The index of `id`, and whether it is new (then it is the next index, `len() - 1`).
    #[inline]
    pub(crate) fn index(&mut self, id: u32) -> (u32, bool) {
        let next = self.len;
        let (i, new) = match self.dense.slot(id) {
            Some(slot) if *slot != u32::MAX => (*slot, false),
            Some(slot) => {
                *slot = next;
                (next, true)
            }
            None => {
                let i = *self.sparse.entry(id).or_insert(next);
                (i, i == next)
            }
        };
        self.len += u32::from(new);
        (i, new)
    }
}

/// Values by id, found through a [`DenseIds`] index (no hashing for the ids a trace numbers
/// densely), kept in a small dense array in the order their ids were first seen.
pub(crate) struct DenseMap<T> {
    ids: DenseIds,
    /// Each value's id, by index.
    keys: Vec<u32>,
    /// The values, by index.
    values: Vec<T>,
}

impl<T> Default for DenseMap<T> {
    fn default() -> Self {
        DenseMap {
            ids: DenseIds::default(),
            keys: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<T: Default> DenseMap<T> {
    /// The index of `id`'s value, made when new.
    #[inline]
    pub(crate) fn index(&mut self, id: u32) -> usize {
        let (i, new) = self.ids.index(id);
        if new {
            self.values.push(T::default());
            self.keys.push(id);
        }
        i as usize
    }

    /// `id`'s value, made when new.
    #[inline]
    pub(crate) fn get_mut(&mut self, id: u32) -> &mut T {
        let i = self.index(id);
        &mut self.values[i]
    }

    /// The value at `index` (of [`DenseMap::index`]).
    #[inline]
    pub(crate) fn at_mut(&mut self, index: usize) -> &mut T {
        &mut self.values[index]
    }

    /// Ids with a value.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Every (id, value), in the order the ids were first seen.
    pub(crate) fn into_entries(self) -> impl Iterator<Item = (u32, T)> {
        self.keys.into_iter().zip(self.values)
    }

    /// Adds `o`'s values with `add` (the smaller map into the larger).
    pub(crate) fn merge(&mut self, o: DenseMap<T>, mut add: impl FnMut(&mut T, T)) {
        let (mut a, b) = if o.len() > self.len() {
            (o, std::mem::take(self))
        } else {
            (std::mem::take(self), o)
        };
        for (id, v) in b.into_entries() {
            add(a.get_mut(id), v);
        }
        *self = a;
    }
}

/// A segment's kept rows grouped by a key below a bound, each group's rows in their order:
/// [`Groups::key`] gives each row its group, [`Groups::scatter`] places values (row numbers,
/// or the rows' own values) grouped, in the rows' order within each group. Its vectors are
/// kept from segment to segment to reuse their memory.
#[derive(Default)]
pub(crate) struct Groups {
    /// The group of each kept row.
    group: Vec<u32>,
    /// Where each group's values start in a scattered vector; one more entry, the total.
    begin: Vec<u32>,
    /// While values are scattered: where each group's next value goes.
    next: Vec<u32>,
}

impl Groups {
    /// Gives each of `n` rows its group, `group_of(its position)` (small numbers: one
    /// counter per number up to the largest), in the rows' order.
    pub(crate) fn key(&mut self, n: usize, mut group_of: impl FnMut(usize) -> u32) {
        self.group.clear();
        let mut top = 0;
        self.group.extend((0..n).map(|j| {
            let g = group_of(j);
            top = top.max(g);
            g
        }));
        let groups = if n == 0 { 0 } else { top as usize + 1 };
        self.begin.clear();
        self.begin.resize(groups + 1, 0);
        for &g in &self.group {
            self.begin[g as usize + 1] += 1;
        }
        for g in 0..groups {
            self.begin[g + 1] += self.begin[g];
        }
    }

    /// Groups of the rows given to [`Groups::key`]: one more than the largest.
    pub(crate) fn count(&self) -> usize {
        self.begin.len().saturating_sub(1)
    }

    /// `values` (one per row given to [`Groups::key`], in the same order) into `out`,
    /// grouped: group `g`'s are `out[r]` for `(g, r)` of [`Groups::ranges`].
    pub(crate) fn scatter<T: Copy + Default>(
        &mut self,
        values: impl IntoIterator<Item = T>,
        out: &mut Vec<T>,
    ) {
        self.next.clear();
        self.next
            .extend_from_slice(&self.begin[..self.begin.len().saturating_sub(1)]);
        out.clear();
        out.resize(self.group.len(), T::default());
        for (&g, v) in self.group.iter().zip(values) {
            let at = &mut self.next[g as usize];
            out[*at as usize] = v;
            *at += 1;
        }
    }

    /// Each group with rows and where its values are in a scattered vector, in the order of
    /// the groups.
    pub(crate) fn ranges(&self) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + '_ {
        self.begin
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[1] > w[0])
            .map(|(g, w)| (g, w[0] as usize..w[1] as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_keep_each_groups_rows_in_order() {
        let rows = [10u32, 11, 12, 13, 14, 15];
        let key = |r: u32| [2, 0, 2, 1, 0, 2][(r - 10) as usize];
        let mut g = Groups::default();
        let mut out = Vec::new();
        let mut grouped = |g: &mut Groups, rows: &[u32]| {
            g.key(rows.len(), |j| key(rows[j]));
            g.scatter(rows.iter().copied(), &mut out);
            g.ranges()
                .map(|(k, r)| (k, out[r].to_vec()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            grouped(&mut g, &rows),
            vec![(0, vec![11, 14]), (1, vec![13]), (2, vec![10, 12, 15])]
        );
        // Reused for another segment with fewer groups, then none.
        assert_eq!(grouped(&mut g, &[11, 14]), vec![(0, vec![11, 14])]);
        assert_eq!(grouped(&mut g, &[]), vec![]);
    }

    #[test]
    fn scattered_values_follow_their_rows_groups() {
        let mut g = Groups::default();
        let keys = [1u32, 3, 1, 0, 3];
        g.key(keys.len(), |j| keys[j]);
        let mut out = Vec::new();
        g.scatter([10u64, 11, 12, 13, 14], &mut out);
        let got: Vec<(usize, Vec<u64>)> = g.ranges().map(|(k, r)| (k, out[r].to_vec())).collect();
        // Group 2 has no rows: no range.
        assert_eq!(
            got,
            vec![(0, vec![13]), (1, vec![10, 12]), (3, vec![11, 14])]
        );
        // A second scatter of other values over the same grouping.
        let mut tids = Vec::new();
        g.scatter([7u32, 8, 9, 6, 5], &mut tids);
        assert_eq!(tids, vec![6, 7, 9, 8, 5]);
    }

    #[test]
    fn dense_ids_number_ids_in_the_order_seen() {
        let mut d = DenseIds::default();
        assert_eq!(d.index(7), (0, true));
        assert_eq!(d.index(DENSE_IDS + 5), (1, true));
        assert_eq!(d.index(7), (0, false));
        assert_eq!(d.index(1), (2, true));
        assert_eq!(d.index(DENSE_IDS + 5), (1, false));
        assert_eq!(d.index(u32::MAX), (3, true));
    }

    #[test]
    fn dense_maps_merge_by_id() {
        let mut a: DenseMap<u64> = DenseMap::default();
        *a.get_mut(3) += 1;
        *a.get_mut(DENSE_IDS + 1) += 2;
        let mut b: DenseMap<u64> = DenseMap::default();
        for id in [5, 3, 9] {
            *b.get_mut(id) += 10;
        }
        a.merge(b, |x, y| *x += y);
        let mut got: Vec<(u32, u64)> = a.into_entries().collect();
        got.sort_unstable();
        assert_eq!(got, vec![(3, 11), (5, 10), (9, 10), (DENSE_IDS + 1, 2)]);
    }
}
