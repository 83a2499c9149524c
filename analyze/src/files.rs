//! Files by identity. A trace's path table can name one file (one device and inode) several
//! times: the recorder adds an entry each time the file's name changes while it records (a
//! rename, a move, a renamed directory), and the I/O after it carries the new entry's path id.
//! The file-level answers (`--top-files`, the summary's top file, the report's top files)
//! count such a file once, under its latest name, and say which other names it had; the
//! per-I/O outputs (exports, Parquet `io`) keep the name each I/O had when it happened.
//!
//! A file is its device, inode and inode generation (filesystems such as ext4 give a deleted
//! file's inode number to the next new file, with another generation; traces of format 1.0
//! have no generation, and there such files read as one). Entries without an inode (labels
//! such as `[metadata]`, a raw device) are their own file, as before.

use iodump_format::inthash::IntMap;

/// Whether a path-table entry's text is a label (`[metadata]`, `[journal]`, `[swap]`...):
/// one per device, so a file-level answer names it with its device (`[journal] sda1`).
pub fn is_label(path: &str) -> bool {
    path.starts_with('[')
}

/// A file's name as a file-level answer shows it: a label (one per device) followed by its
/// file system's device (`[journal] sda1`), any other name as it is.
pub fn named_with_device(name: String, device: Option<&str>) -> String {
    match device {
        Some(dev) if is_label(&name) => format!("{name} {dev}"),
        _ => name,
    }
}

/// The names of a file that had more than one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileNames {
    /// Distinct names the file had in the trace (at least 2).
    pub names: u32,
    /// Its earliest name other than the latest.
    pub renamed_from: String,
}

/// The files of one trace (or of a dataset of several: the caller folds the trace into the
/// device key): path id → file key, and the names of each file that had several.
///
/// A file's key is the path id of its latest entry (the recorder numbers entries in the order
/// it makes them), so the key's path is the file's latest name. Path ids of files with one
/// entry are their own key and are not stored.
#[derive(Debug, Default)]
pub struct FileIdentities {
    key: IntMap<u32, u32>,
    renamed: IntMap<u32, FileNames>,
}

impl FileIdentities {
    /// Groups `entries` — (path id, device key, inode, generation) — by (device key, inode,
    /// generation); entries with inode 0 stay alone. `name` gives an entry's path (only asked
    /// for files with several entries).
    pub fn new(
        entries: impl IntoIterator<Item = (u32, u64, u64, Option<u32>)>,
        name: impl Fn(u32) -> String,
    ) -> FileIdentities {
        // ((device key, inode, generation), path id)
        type Keyed = ((u64, u64, Option<u32>), u32);
        let mut v: Vec<Keyed> = entries
            .into_iter()
            .filter(|e| e.2 != 0)
            .map(|(id, dev, ino, generation)| ((dev, ino, generation), id))
            .collect();
        v.sort_unstable();
        let mut out = FileIdentities::default();
        for run in v.chunk_by(|a, b| a.0 == b.0) {
            if run.len() < 2 {
                continue;
            }
            // Sorted by path id within the run: the last is the latest.
            let latest_id = run[run.len() - 1].1;
            let latest = name(latest_id);
            let mut seen: Vec<String> = vec![latest.clone()];
            let mut renamed_from = None;
            for &(_, id) in run {
                out.key.insert(id, latest_id);
                let n = name(id);
                if !seen.contains(&n) {
                    renamed_from.get_or_insert_with(|| n.clone());
                    seen.push(n);
                }
            }
            if let Some(from) = renamed_from {
                out.renamed.insert(
                    latest_id,
                    FileNames {
                        names: seen.len() as u32,
                        renamed_from: from,
                    },
                );
            }
        }
        out
    }

    /// The file key of a path id (the path id of the file's latest entry; a path id the
    /// table does not know is its own key).
    pub fn key(&self, path_id: u32) -> u32 {
        self.key.get(&path_id).copied().unwrap_or(path_id)
    }

    /// The other names of the file with this key, when it had any.
    pub fn renamed(&self, key: u32) -> Option<&FileNames> {
        self.renamed.get(&key)
    }

    /// Distinct names of the file with this key (1 for most).
    pub fn names(&self, key: u32) -> u32 {
        self.renamed(key).map_or(1, |n| n.names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_one_inode_are_one_file_under_the_latest_name() {
        let names = [
            "",
            "/d/a",
            "[metadata]",
            "/d/b",
            "/d/a",
            "/d/c",
            "[metadata]",
            "/d/new",
        ];
        let f = FileIdentities::new(
            [
                (1, 7, 12, Some(1)),
                (2, 7, 0, None),
                (3, 7, 12, Some(1)),
                (4, 7, 12, Some(1)),
                (5, 7, 13, Some(1)),
                (6, 8, 0, None),
                // Inode 12 given to a new file (another generation): another file.
                (7, 7, 12, Some(2)),
            ],
            |id| names[id as usize].to_string(),
        );
        assert_eq!(f.key(7), 7);
        // a → b → a: one file, key 4 (its latest entry), two names, renamed from b.
        assert_eq!([f.key(1), f.key(3), f.key(4)], [4, 4, 4]);
        assert_eq!(
            f.renamed(4),
            Some(&FileNames {
                names: 2,
                renamed_from: "/d/b".into()
            })
        );
        // Labels and files with one name are their own key; unknown ids too.
        assert_eq!([f.key(2), f.key(5), f.key(6), f.key(99)], [2, 5, 6, 99]);
        assert_eq!(f.names(5), 1);
        assert!(f.renamed(2).is_none());
    }
}
