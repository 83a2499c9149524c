//! Grouping a segment's rows by a small dense key before they are folded, for the passes that
//! keep figures per file (thousands of them, which do not fit in cache while the rows of
//! different files interleave): [`Groups`], a counting sort of row numbers that keeps each
//! group's rows in their order, and [`DenseIds`], the group index of a path id without hashing.

use iodump_format::inthash::IntMap;

/// Ids not above this are looked up in a vector (path ids are numbered from 1 within a trace);
/// larger ones (a damaged or foreign trace) by hashing.
pub(crate) const DENSE_IDS: u32 = 1 << 20;

/// Indices 0, 1, 2 … given to ids in the order they are first seen.
#[derive(Default)]
pub(crate) struct DenseIds {
    /// The index of each id up to [`DENSE_IDS`] (u32::MAX: not seen yet).
    dense: Vec<u32>,
    /// The index of each larger id.
    sparse: IntMap<u32, u32>,
    /// Indices given.
    len: u32,
}

impl DenseIds {
    /// The index of `id`, and whether it is new (then it is the next index, `len() - 1`).
    #[inline]
    pub(crate) fn index(&mut self, id: u32) -> (u32, bool) {
        if id > DENSE_IDS {
            let next = self.len;
            let i = *self.sparse.entry(id).or_insert(next);
            let new = i == next;
            self.len += u32::from(new);
            return (i, new);
        }
        let p = id as usize;
        if let Some(&i) = self.dense.get(p) {
            if i != u32::MAX {
                return (i, false);
            }
        } else {
            self.dense.resize(p + 1, u32::MAX);
        }
        let i = self.len;
        self.dense[p] = i;
        self.len += 1;
        (i, true)
    }
}

/// A segment's kept rows grouped by a key below a bound, each group's rows in their order.
/// Its vectors are kept from segment to segment to reuse their memory.
#[derive(Default)]
pub(crate) struct Groups {
    /// The group of each kept row.
    group: Vec<u32>,
    /// Where each group's rows start in `rows` (then, once placed, end).
    start: Vec<u32>,
    /// The rows, grouped.
    rows: Vec<u32>,
}

impl Groups {
    /// Groups `rows` by `group_of(row)` (small numbers: one counter per number up to the
    /// largest).
    pub(crate) fn group(&mut self, rows: &[u32], mut group_of: impl FnMut(u32) -> u32) {
        self.group.clear();
        let mut top = 0;
        self.group.extend(rows.iter().map(|&r| {
            let g = group_of(r);
            top = top.max(g);
            g
        }));
        let groups = if rows.is_empty() { 0 } else { top as usize + 1 };
        self.start.clear();
        self.start.resize(groups + 1, 0);
        for &g in &self.group {
            self.start[g as usize + 1] += 1;
        }
        for g in 0..groups {
            self.start[g + 1] += self.start[g];
        }
        self.rows.clear();
        self.rows.resize(rows.len(), 0);
        for (&g, &r) in self.group.iter().zip(rows) {
            let at = &mut self.start[g as usize];
            self.rows[*at as usize] = r;
            *at += 1;
        }
        // start[g] is now where group g's rows end, and start[g - 1] where they began.
        self.start.pop();
    }

    /// Calls `f(group, its rows)` for each group with rows, in the order of the groups.
    pub(crate) fn each(&self, mut f: impl FnMut(usize, &[u32])) {
        let mut begin = 0;
        for (g, &end) in self.start.iter().enumerate() {
            let end = end as usize;
            if end > begin {
                f(g, &self.rows[begin..end]);
            }
            begin = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_keep_each_groups_rows_in_order() {
        let rows = [10, 11, 12, 13, 14, 15];
        let key = |r: u32| [2, 0, 2, 1, 0, 2][(r - 10) as usize];
        let mut g = Groups::default();
        g.group(&rows, key);
        let mut seen = Vec::new();
        g.each(|k, rs| seen.push((k, rs.to_vec())));
        assert_eq!(
            seen,
            vec![(0, vec![11, 14]), (1, vec![13]), (2, vec![10, 12, 15])]
        );
        // Reused for another segment with fewer groups.
        g.group(&[3, 4], |_| 0);
        let mut seen = Vec::new();
        g.each(|k, rs| seen.push((k, rs.to_vec())));
        assert_eq!(seen, vec![(0, vec![3, 4])]);
        g.group(&[], |_| 0);
        g.each(|_, _| panic!("no rows, no group"));
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
}
