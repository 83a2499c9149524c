//! Catalogue sections derived from the others: the files the copy and backup streams write
//! (copies of pictures, PostgreSQL relations and projects; a VM image, a tarball, a dump),
//! and the list of what readers stream through.

use super::builder::{Builder, GIB};
use super::databases::PG_DATA;
use super::FileClass;
use crate::host::devices::{D_BACKUP, D_ROOT, D_VDA};

const BACKUP_FILES: [(&str, u64); 3] = [
    ("images/vm-disk0.img", 20 * GIB),
    ("home-2026-01-15.tar.zst", 40 * GIB),
    ("mysql/shop-2026-01-14.sql.gz", 3 * GIB),
];

/// What the copy and backup streams write: the pictures imported into `/srv/app` (vda), and
/// on `/srv/backup` (sda1) a VM image, a tarball, a dump, a base backup of PostgreSQL (a
/// directory for each of its directories) and an rsync copy of alice's projects.
pub(super) fn copies(b: &mut Builder) {
    b.dir(D_VDA);
    for p in b.lists.pictures.clone() {
        let name = b.path_of(p);
        let leaf = name.rsplit(|&c| c == b'/').next().unwrap_or(b"x");
        let path = [&b"/srv/app/import/photos/"[..], leaf].concat();
        let f = copy(b, D_VDA, path, p);
        b.lists.import.push(f);
    }
    b.dir(D_BACKUP);
    let big = b.add_sized(D_BACKUP, "/srv/backup/", &BACKUP_FILES, FileClass::Backup);
    b.notable.vm_image = big[0];
    b.notable.tarball = big[1];
    let mut last_dir: Vec<u8> = Vec::new();
    for r in b.lists.pg_rels.clone() {
        let rel = b.path_of(r)[PG_DATA.len()..].to_vec();
        let dir = &rel[..rel.iter().rposition(|&c| c == b'/').unwrap_or(0)];
        if dir != last_dir {
            b.dir(D_BACKUP);
            last_dir = dir.to_vec();
        }
        let path = [&b"/srv/backup/pg/base_20260115"[..], &rel[..]].concat();
        let f = copy(b, D_BACKUP, path, r);
        b.lists.backup_pg.push(f);
    }
    for p in b.lists.projects.clone() {
        let Some(rel) = b.path_of(p).strip_prefix(b"/home/alice/") else {
            continue;
        };
        let path = [&b"/srv/backup/rsync/alice/"[..], rel].concat();
        let f = copy(b, D_BACKUP, path, p);
        b.lists.backup_rsync.push(f);
    }
}

/// A copy of file `of` at `path` on device `dev`, as long as the original's extent.
fn copy(b: &mut Builder, dev: usize, path: Vec<u8>, of: u32) -> u32 {
    let bytes = b.files[of as usize].len_sectors * 512;
    b.file(dev, path, bytes, FileClass::Backup)
}

/// What readers stream through: home, then the system files on `/`.
pub(super) fn readable(b: &mut Builder) {
    b.lists.readable = b.lists.home.clone();
    let on_root = |&f: &u32| b.files[f as usize].dev as usize == D_ROOT;
    let system_on_root: Vec<u32> = b.system.iter().copied().filter(on_root).collect();
    b.lists.readable.extend(system_on_root);
}
