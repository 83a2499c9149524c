//! Catalogue sections on `/`: MySQL's and PostgreSQL's data directories and fio's files.

use super::builder::{log_normal, Builder, Size, GIB, KIB, MIB};
use super::names::{MYSQL_TABLES, PG_CATALOGS};
use super::FileClass;
use crate::host::devices::D_ROOT;

/// InnoDB's system tablespace, data dictionary and undo tablespaces.
const MYSQL_SYSTEM_FILES: [(&str, u64); 4] = [
    ("ibdata1", 76 * MIB),
    ("mysql.ibd", 36 * MIB),
    ("undo_001", 512 * MIB),
    ("undo_002", 512 * MIB),
];

/// InnoDB's doublewrite files.
const DOUBLEWRITE_FILES: [(&str, u64); 2] = [
    ("#ib_16384_0.dblwr", 192 * KIB * 64),
    ("#ib_16384_1.dblwr", 8 * MIB + 384 * KIB),
];

const SHOP_TABLE: Size = log_normal(300.0 * MIB as f64, 1.2, 112 * KIB, 40 * GIB);
const ORDERS_PARTITION: Size = log_normal(2.0 * GIB as f64, 0.3, 112 * KIB, 8 * GIB);
const TENANT_TABLE: Size = log_normal(6.0 * MIB as f64, 1.3, 112 * KIB, 4 * GIB);
const TENANTS: u32 = 110;

/// PostgreSQL's data directory.
pub(super) const PG_DATA: &str = "/var/lib/postgresql/15/main";
const PG_CATALOG: Size = log_normal(200.0 * KIB as f64, 1.0, 8 * KIB, 64 * MIB);
const PG_RELATION: Size = log_normal(2.0 * MIB as f64, 2.2, 8 * KIB, 6 * GIB);
const PG_RELATIONS: u32 = 260;
const PG_GLOBAL_FILES: [&str; 4] = [
    "global/1262",
    "global/1260",
    "global/pg_control",
    "pg_xact/0A1F",
];

/// MySQL 8: system tablespaces, doublewrite, temporary tablespaces, redo, binlog, the shop
/// database (with a partitioned table), 110 tenant databases and a deleted temporary table.
pub(super) fn mysql(b: &mut Builder) {
    let dir = "/var/lib/mysql/";
    b.dir(D_ROOT);
    let sys = b.add_sized(D_ROOT, dir, &MYSQL_SYSTEM_FILES, FileClass::MysqlSys);
    b.lists.mysql_sys = sys;
    b.lists.dblwr = b.add_sized(D_ROOT, dir, &DOUBLEWRITE_FILES, FileClass::Dblwr);
    b.dir(D_ROOT);
    let temp = |i| format!("{dir}#innodb_temp/temp_{}.ibt", i + 1);
    let temp = b.add_series(
        D_ROOT,
        10,
        temp,
        Size::Bytes(160 * KIB),
        FileClass::MysqlSys,
    );
    b.lists.mysql_sys.extend(temp);
    b.dir(D_ROOT);
    let redo0 = 1184 + b.rng.below(4000);
    let redo = |i| format!("{dir}#innodb_redo/#ib_redo{}", redo0 + i);
    b.lists.redo = b.add_series(D_ROOT, 32, redo, Size::Bytes(100 * MIB), FileClass::Redo);
    let binlog0 = 400 + b.rng.below(500);
    let binlog = |i| format!("{dir}binlog.{:06}", binlog0 + i);
    b.lists.binlog = b.add_series(D_ROOT, 5, binlog, Size::Bytes(GIB), FileClass::Binlog);
    b.dir(D_ROOT);
    let table = FileClass::MysqlTable;
    let shop = b.add_each(
        D_ROOT,
        "/var/lib/mysql/shop/",
        &MYSQL_TABLES,
        ".ibd",
        SHOP_TABLE,
        table,
    );
    b.lists.mysql_tables = shop;
    let partition = |i| format!("{dir}shop/orders#p#p2025{:02}.ibd", i + 1);
    let partitions = b.add_series(D_ROOT, 12, partition, ORDERS_PARTITION, table);
    b.lists.mysql_tables.extend(partitions);
    let mut tenant = 1000u64;
    for _ in 0..TENANTS {
        tenant += b.rng.range(1, 6);
        b.dir(D_ROOT);
        let db = format!("{dir}tenant_{tenant:04}/");
        let tables = b.add_each(D_ROOT, &db, &MYSQL_TABLES, ".ibd", TENANT_TABLE, table);
        b.lists.mysql_tables.extend(tables);
    }
    let tmp = format!(
        "{dir}#sql-ib{}-{}.ibd",
        1400 + b.rng.below(100),
        2_900_000_000 + b.rng.below(100_000_000)
    );
    let f = b.file(D_ROOT, tmp, 96 * MIB, table);
    b.delete(f);
    b.lists.mysql_tables.push(f);
    b.lists.deleted_root.push(f);
}

/// PostgreSQL 15, database 16384: catalogs and user relations (in 1 GiB segments, half of
/// them with free space and visibility maps), global files and the WAL.
pub(super) fn postgres(b: &mut Builder) {
    b.dir(D_ROOT);
    let mut relnodes: Vec<(u32, u64)> = Vec::new();
    for c in PG_CATALOGS {
        relnodes.push((c, b.draw(PG_CATALOG)));
    }
    let mut node = 16_385u32;
    for _ in 0..PG_RELATIONS {
        node += b.rng.range(1, 9) as u32;
        relnodes.push((node, b.draw(PG_RELATION)));
    }
    for (node, bytes) in relnodes {
        relation(b, node, bytes);
    }
    b.dir(D_ROOT);
    let dir = format!("{PG_DATA}/");
    let global = b.add_each(
        D_ROOT,
        &dir,
        &PG_GLOBAL_FILES,
        "",
        Size::Bytes(256 * KIB),
        FileClass::PgRel,
    );
    b.lists.pg_rels.extend(global);
    b.dir(D_ROOT);
    let wal_log = 0x2A + b.rng.below(16);
    let wal_seg = 0xC0 + b.rng.below(32);
    let wal = |i| {
        format!(
            "{PG_DATA}/pg_wal/{:08X}{:08X}{:08X}",
            1,
            wal_log,
            wal_seg + i
        )
    };
    b.lists.pg_wal = b.add_series(D_ROOT, 32, wal, Size::Bytes(16 * MIB), FileClass::PgWal);
}

/// One relation of `bytes`: its 1 GiB segments, and (one time in two) its free space map and
/// visibility map.
fn relation(b: &mut Builder, node: u32, bytes: u64) {
    let base = format!("{PG_DATA}/base/16384/{node}");
    let mut left = bytes;
    let mut seg = 0;
    while left > 0 {
        let this = left.min(GIB);
        let name = if seg == 0 {
            base.clone()
        } else {
            format!("{base}.{seg}")
        };
        let f = b.file(D_ROOT, name, this, FileClass::PgRel);
        b.lists.pg_rels.push(f);
        left -= this;
        seg += 1;
    }
    if b.rng.chance(0.5) {
        let forks = [("_fsm", 24 * KIB), ("_vm", 8 * KIB)];
        let forks = b.add_sized(D_ROOT, &base, &forks, FileClass::PgRel);
        b.lists.pg_rels.extend(forks);
    }
}

/// fio's data files: eight for random reads, two for sequential writes.
pub(super) fn fio(b: &mut Builder) {
    b.dir(D_ROOT);
    for j in 0..8 {
        let path = format!("/data/fio/randread.{j}.0");
        b.notable.fio_random[j] = b.file(D_ROOT, path, 4 * GIB, FileClass::Fio);
    }
    for j in 0..2 {
        let path = format!("/data/fio/seqwrite.{j}.0");
        b.notable.fio_sequential[j] = b.file(D_ROOT, path, 16 * GIB, FileClass::Fio);
    }
}
