//! A table indexed by ids handed out one after another (path ids, the kernel's file ids)
//! whose entries are cleared again: an index into a few bytes per id, like a `Vec`, whose
//! memory follows the ids in use rather than every id ever handed out. A recorder left
//! running for months hands out millions of ids; it keeps those of its last while.

/// Entries per page.
const PAGE: usize = 64;

/// One page: its entries and how many of them differ from the default.
struct Page<T> {
    used: u32,
    v: [T; PAGE],
}

/// A table from `u32` ids to `T`, where an id never set or cleared reads as `T::default()`.
/// Pages of 64 entries are allocated when one of theirs is set and freed when all of them
/// are back to the default; the page list drops the freed pages at its front, so ids long
/// cleared cost nothing, and ids cleared among ones still in use cost 8 bytes per 64.
pub struct IdTable<T> {
    /// Page number of `pages[0]`.
    first: usize,
    pages: Vec<Option<Box<Page<T>>>>,
    /// How many pages at the front of `pages` are freed (at least).
    lead: usize,
    /// One past the highest id ever set.
    end: u64,
    /// Entries that differ from the default.
    len: usize,
}

impl<T: Copy + Default + PartialEq> Default for IdTable<T> {
    fn default() -> Self {
        IdTable {
            first: 0,
            pages: Vec::new(),
            lead: 0,
            end: 0,
            len: 0,
        }
    }
}

impl<T: Copy + Default + PartialEq> IdTable<T> {
    /// The entry of `id` (the default when never set, or cleared).
    #[inline]
    pub fn get(&self, id: u32) -> T {
        let i = id as usize;
        match self.pages.get((i / PAGE).wrapping_sub(self.first)) {
            Some(Some(p)) => p.v[i % PAGE],
            _ => T::default(),
        }
    }

    /// Sets the entry of `id`; setting the default clears it.
    #[inline]
    pub fn set(&mut self, id: u32, v: T) {
        let i = id as usize;
        let n = (i / PAGE).wrapping_sub(self.first);
        if let Some(Some(p)) = self.pages.get_mut(n) {
            let old = std::mem::replace(&mut p.v[i % PAGE], v);
            let (was, is) = (old != T::default(), v != T::default());
            if was == is {
                return;
            }
            if is {
                p.used += 1;
                self.len += 1;
            } else {
                p.used -= 1;
                self.len -= 1;
                if p.used == 0 {
                    self.pages[n] = None;
                    self.trim();
                }
            }
            return;
        }
        if v != T::default() {
            self.set_in_new_page(i, v);
        }
    }

    #[cold]
    fn set_in_new_page(&mut self, i: usize, v: T) {
        let page = i / PAGE;
        if self.pages.is_empty() {
            self.first = page;
        } else if page < self.first {
            // Below the pages kept (an id cleared long ago set again): rare.
            let add = self.first - page;
            self.pages
                .splice(0..0, std::iter::repeat_with(|| None).take(add));
            self.first = page;
            self.lead += add;
        }
        let n = page - self.first;
        self.lead = self.lead.min(n);
        if n >= self.pages.len() {
            self.pages.resize_with(n + 1, || None);
        }
        let mut p = Box::new(Page {
            used: 1,
            v: [T::default(); PAGE],
        });
        p.v[i % PAGE] = v;
        self.pages[n] = Some(p);
        self.len += 1;
        self.end = self.end.max(i as u64 + 1);
    }

    /// Drops the freed pages at the back of the page list, and those at the front once they
    /// are half of it (so that this costs O(1) per page freed).
    fn trim(&mut self) {
        while matches!(self.pages.last(), Some(None)) {
            self.pages.pop();
        }
        self.lead = self.lead.min(self.pages.len());
        while matches!(self.pages.get(self.lead), Some(None)) {
            self.lead += 1;
        }
        if self.lead > 0 && self.lead >= self.pages.len() / 2 {
            self.pages.drain(..self.lead);
            self.first += self.lead;
            self.lead = 0;
        }
        if self.pages.is_empty() {
            self.first = 0;
        }
    }

    /// Clears every entry for which `keep` is false.
    pub fn retain(&mut self, mut keep: impl FnMut(u32, T) -> bool) {
        for n in 0..self.pages.len() {
            let Some(p) = self.pages[n].as_mut() else {
                continue;
            };
            let base = (self.first + n) * PAGE;
            for (k, slot) in p.v.iter_mut().enumerate() {
                if *slot != T::default() && !keep((base + k) as u32, *slot) {
                    *slot = T::default();
                    p.used -= 1;
                    self.len -= 1;
                }
            }
            if p.used == 0 {
                self.pages[n] = None;
            }
        }
        self.trim();
    }

    /// One past the highest id ever set (0 when none was): where the ids handed out so far
    /// end, cleared ones included.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Entries that differ from the default.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when every entry is the default.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the table holds (its pages and their list).
    pub fn heap_bytes(&self) -> usize {
        self.pages.capacity() * std::mem::size_of::<Option<Box<Page<T>>>>()
            + self.pages.iter().flatten().count() * std::mem::size_of::<Page<T>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads back what was set, like a `Vec` would, over ids set, cleared and set again in
    /// every order.
    #[test]
    fn reads_as_a_vec_would() {
        let mut t = IdTable::<u32>::default();
        let mut v = vec![0u32; 5000];
        let mut x = 12345u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = (x % 5000) as u32;
            // Mostly clears, so that pages are freed and made again.
            let val = if x.is_multiple_of(3) {
                (x >> 20) as u32 % 7
            } else {
                0
            };
            t.set(id, val);
            v[id as usize] = val;
            if x.is_multiple_of(97) {
                let id = ((x >> 8) % 5000) as u32;
                assert_eq!(t.get(id), v[id as usize]);
            }
        }
        for (id, &want) in v.iter().enumerate() {
            assert_eq!(t.get(id as u32), want, "id {id}");
        }
        assert_eq!(t.len(), v.iter().filter(|&&x| x != 0).count());
        t.retain(|id, _| id % 2 == 0);
        for (id, &want) in v.iter().enumerate() {
            let want = if id % 2 == 0 { want } else { 0 };
            assert_eq!(t.get(id as u32), want, "id {id}");
        }
        assert_eq!(t.get(u32::MAX), 0);
    }

    /// Ids handed out one after another and cleared after a while: the memory follows the
    /// ids in use (a window of 1,000), not the 10 million handed out.
    #[test]
    fn memory_follows_the_ids_in_use() {
        let mut t = IdTable::<u64>::default();
        for id in 1..=10_000_000u32 {
            t.set(id, u64::from(id));
            if id > 1000 {
                t.set(id - 1000, 0);
            }
        }
        assert_eq!(t.len(), 1000);
        assert_eq!(t.end(), 10_000_001);
        assert!(t.heap_bytes() < 64 << 10, "{} bytes", t.heap_bytes());
        // One id kept from the start: the page list spans every page since, 8 bytes per
        // 64 ids, and no more pages than those in use.
        t.set(3, 7);
        for id in 10_000_001..=10_100_000u32 {
            t.set(id, 1);
            t.set(id - 1000, 0);
        }
        assert_eq!(t.get(3), 7);
        assert!(t.heap_bytes() < 4 << 20, "{} bytes", t.heap_bytes());
    }
}
