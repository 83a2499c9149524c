/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * file.bpf.h — the file behind a bio (resolve_bio): swap, direct I/O (iomap, block device
 * nodes, btrfs), filesystem metadata and journals recognised by the completion function,
 * else the page-cache host of the first page; and the identity of an inode
 * (struct iodump_file_info: ino, st_dev, generation, superblock dev).
 */
#ifndef IODUMP_FILE_BPF_H
#define IODUMP_FILE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include "iodump.h"
#include "settings.bpf.h"
#include "read.bpf.h"
#include "helpers.bpf.h"
#include "core_fixes.bpf.h"
#include "codes.bpf.h"

struct iodump_file_info {
	struct inode *inode; /* host inode (PK_FILE, PK_DIO), else NULL */
	struct file *file;   /* open file (PK_DIO through iomap), else NULL */
	__u64 ino;
	__u32 dev;    /* identity: st_dev as stat(2) reports it (btrfs: the subvolume's) */
	__u32 sb_dev; /* superblock dev, as in /proc/self/mountinfo */
	__u32 gen;
	__u8 kind;
	__u8 done;
};

static __always_inline void rawdev(struct iodump_file_info *fi, __u32 bdev_dev)
{
	fi->kind = IODUMP_PK_RAWDEV;
	fi->dev = bdev_dev;
}

/*
 * A page with a mapping is the I/O's own page cache, except in synchronous O_DIRECT on a
 * block device node (__blkdev_direct_IO_simple, completed through submit_bio_wait()): there
 * the pages are the caller's buffer, which may be a shared mapping (shmem, e.g. a database's
 * shared buffers, or a mapped file) and must not name the I/O. The kernel's own
 * submit_bio_wait() users read into the device's page cache (S_IFBLK host) or into pages
 * without a mapping.
 */
static __always_inline int user_buffer(__u64 end_io, __u16 host_mode)
{
	return ksym_submit_bio_wait_endio && end_io == ksym_submit_bio_wait_endio &&
	       (host_mode & S_IFMT) != S_IFBLK;
}

/* Identity of an inode. btf: whether `inode` is a BTF-typed pointer (else a number). */
static __always_inline void fill_inode(struct iodump_file_info *fi, struct inode *inode,
				       __u8 kind, int btf)
{
	__u16 mode = RD(btf, inode, i_mode);

	if ((mode & S_IFMT) == S_IFBLK) {
		/* the block device's own page cache: buffer heads (fs metadata, jbd2 journal)
		 * or buffered I/O on /dev/X */
		fi->kind = IODUMP_PK_BDEV;
		fi->dev = RD(btf, inode, i_rdev);
		return;
	}
	fi->kind = kind;
	fi->inode = inode;
	fi->ino = RD(btf, inode, i_ino);
	fi->dev = RD(btf, inode, i_sb, s_dev);
	fi->sb_dev = fi->dev;
	fi->gen = RD(btf, inode, i_generation);
}

/* btrfs: metadata lives in the btree inode; each subvolume has its own inode numbers and
 * its own st_dev (root->anon_dev), while mountinfo shows the superblock's s_dev. */
static __always_inline void btrfs_fixup(struct iodump_file_info *fi, __u32 bdev_dev,
					struct iodump_cpu_state *cs, __u32 lvl, int btf)
{
	__u64 bi_bits;
	__u32 anon;

	if (fi->kind != IODUMP_PK_FILE && fi->kind != IODUMP_PK_DIO)
		return;
	if (fi->ino == BTRFS_BTREE_INODE_OBJECTID) {
		fi->kind = IODUMP_PK_META;
		fi->inode = NULL;
		fi->ino = 0;
		fi->gen = 0;
		fi->sb_dev = 0;
		fi->dev = bdev_dev;
		return;
	}
	bi_bits = ptr_bits(cs, lvl, fi->inode, btf) -
		  bpf_core_field_offset(struct btrfs_inode, vfs_inode);
	if (btf && cfg_btf_id_btrfs_inode) {
		struct btrfs_inode *bi = rdonly_cast(bi_bits, cfg_btf_id_btrfs_inode);

		anon = bi->root->anon_dev;
	} else {
		anon = BPF_CORE_READ((struct btrfs_inode *)bi_bits, root, anon_dev);
	}
	if (anon)
		fi->dev = anon;
}

/* iomap direct I/O: bi_private is the struct iomap_dio, whose kiocb names the file. */
static __always_inline void resolve_iomap_dio(struct iodump_file_info *fi,
					      struct iodump_cpu_state *cs, __u32 lvl, __u64 dio,
					      int btf)
{
	struct iomap_dio *d = IOD_CAST(dio, struct iomap_dio, btf);
	struct file *file;
	struct inode *inode;
	__u64 ino;
	__u32 gen;

	/* struct iomap_dio is fs/iomap's own: a kernel that renames its iocb loses only this
	 * (user space says so) */
	if (!bpf_core_field_exists(struct iomap_dio, iocb))
		return;
	file = RD(btf, d, iocb, ki_filp);
	inode = RD(btf, file, f_inode);
	if (!inode)
		return;
	fi->file = file;
	ino = RD(btf, inode, i_ino);
	gen = RD(btf, inode, i_generation);
	/* fio-style workloads hit the same file over and over: keep the rest per CPU */
	if (!lvl && cs->dio_inode == (__u64)inode && cs->dio_ino == ino && cs->dio_gen == gen) {
		fi->kind = cs->dio_kind;
		fi->inode = inode;
		fi->ino = ino;
		fi->gen = gen;
		fi->dev = cs->dio_dev;
		fi->sb_dev = cs->dio_sb_dev;
		return;
	}
	fill_inode(fi, inode, IODUMP_PK_DIO, btf);
	if (lvl || fi->kind != IODUMP_PK_DIO)
		return;
	cs->dio_inode = (__u64)inode;
	cs->dio_ino = ino;
	cs->dio_gen = gen;
	cs->dio_kind = fi->kind;
	cs->dio_dev = fi->dev;
	cs->dio_sb_dev = fi->sb_dev;
}

/*
 * Find what a bio belongs to. Order: the swap flag; the completion function (direct I/O
 * keeps its owner in bi_private; its pages are user memory and say nothing); the
 * page-cache host of the first page; btrfs bios (struct btrfs_bio names the inode).
 */
static __always_inline void resolve_bio(struct iodump_file_info *fi,
					struct iodump_cpu_state *cs, __u32 lvl, struct bio *bio,
					__u64 opf, __u32 bdev_dev, int btf)
{
	struct bio *b = bio;
	__u8 kind = IODUMP_PK_FILE;
	int is_btrfs, bbio_embedded;
	__u64 end_io, priv;
	int i;

	fi->done = 1;
	if (!bio)
		return;
	if (opf & REQ_BIT(__REQ_SWAP)) {
		fi->kind = IODUMP_PK_SWAP;
		return;
	}

	end_io = (__u64)RD(btf, bio, bi_end_io);
	if (!end_io)
		return;
	priv = (__u64)RD(btf, bio, bi_private);
	/* A split bio completes into its parent: bi_private is the parent bio. */
	if (ksym_bio_chain_endio) {
		for (i = 0; i < 4; i++) {
			if (end_io != ksym_bio_chain_endio || !priv)
				break;
			b = (struct bio *)priv;
			end_io = (__u64)BPF_CORE_READ(b, bi_end_io);
			priv = (__u64)BPF_CORE_READ(b, bi_private);
		}
	}
	if (ksym_iomap_dio_bio_end_io && end_io == ksym_iomap_dio_bio_end_io) {
		resolve_iomap_dio(fi, cs, lvl, priv, btf);
		return;
	}
	if ((ksym_blkdev_bio_end_io && end_io == ksym_blkdev_bio_end_io) ||
	    (ksym_blkdev_bio_end_io_async && end_io == ksym_blkdev_bio_end_io_async)) {
		fi->kind = IODUMP_PK_RAWDEV;
		fi->dev = bdev_dev;
		return;
	}
	if (ksym_xfs_buf_bio_end_io && end_io == ksym_xfs_buf_bio_end_io) {
		fi->kind = IODUMP_PK_META;
		fi->dev = bdev_dev;
		return;
	}
	if (ksym_xlog_bio_end_io && end_io == ksym_xlog_bio_end_io) {
		fi->kind = IODUMP_PK_JOURNAL;
		fi->dev = bdev_dev;
		return;
	}
	/* btrfs: simple/orig bios are embedded in a struct btrfs_bio; clone bios (second
	 * mirror of DUP/RAID1 writes) are not */
	bbio_embedded = (ksym_btrfs_simple_end_io && end_io == ksym_btrfs_simple_end_io) ||
			(ksym_btrfs_orig_write_end_io && end_io == ksym_btrfs_orig_write_end_io);
	is_btrfs = bbio_embedded ||
		   (ksym_btrfs_clone_write_end_io && end_io == ksym_btrfs_clone_write_end_io);
	/* btrfs: the inode of the struct btrfs_bio the bio is embedded in. For page-cache I/O
	 * it is the pages' host; for direct I/O the pages are the caller's buffer, which may
	 * be a shared mapping with a host of its own (shmem, a mapped file) */
	struct inode *bvi = NULL;
	__u64 bvi_bits = 0;

	/* (struct btrfs_bio names its inode since 6.3; before, only the pages do) */
	if (bbio_embedded && bpf_core_field_exists(struct btrfs_bio, inode)) {
		__u64 bbio_bits = ptr_bits(cs, lvl, b, btf) -
				  bpf_core_field_offset(struct btrfs_bio, bio);
		__u64 bi_bits;

		if (btf && cfg_btf_id_btrfs_bio) {
			struct btrfs_bio *bbio = rdonly_cast(bbio_bits, cfg_btf_id_btrfs_bio);

			bi_bits = ptr_bits(cs, lvl, bbio->inode, btf);
		} else {
			bi_bits = (__u64)BPF_CORE_READ((struct btrfs_bio *)bbio_bits, inode);
		}
		if (bi_bits) {
			bvi_bits = bi_bits + bpf_core_field_offset(struct btrfs_inode, vfs_inode);
			bvi = IOD_CAST(bvi_bits, struct inode, btf);
		}
	}

	/* Page cache: first page -> folio (compound head) -> mapping -> host inode. */
	struct bio_vec *bv = RD(btf, bio, bi_io_vec);
	struct page *page = bv ? RD(btf, bv, bv_page) : NULL;
	__u64 mapping = 0, pgflags = 0;

	/* (the memdesc work moves fields out of struct page: without a mapping, page-cache
	 * I/O is not attributed, and user space says so) */
	if (page && bpf_core_field_exists(struct page, mapping)) {
		/* compound_head shares its offset with lru.next: the verifier types it as a
		 * pointer, so take its bits through ptr_bits() as well (7.0+: compound_info,
		 * core_fixes.bpf.h) */
		__u64 head = bpf_core_field_exists(struct page, compound_head) ?
				     ptr_bits(cs, lvl, (const void *)RD(btf, page, compound_head), btf) :
				     compound_info_head(ptr_bits(cs, lvl, page, btf));

		if (!(head & 1)) {
			/* head or order-0 page: stays a typed pointer in the BTF flavour */
			struct address_space *m = RD(btf, page, mapping);

			mapping = ptr_bits(cs, lvl, m, btf);
			if (!mapping)
				pgflags = page_flags(page);
			if (m && !(mapping & MAPPING_FLAGS)) {
				struct inode *host = RD(btf, m, host);

				if (host && user_buffer(end_io, RD(btf, host, i_mode))) {
					rawdev(fi, bdev_dev);
					return;
				}
				if (host && bvi && ptr_bits(cs, lvl, host, btf) != bvi_bits)
					goto btrfs_dio;
				if (host) {
					fill_inode(fi, host, kind, btf);
					goto found;
				}
			}
		} else {
			/* tail page of a large folio: the head is a computed number */
			struct page *hp = (struct page *)(head - 1);

			mapping = (__u64)BPF_CORE_READ(hp, mapping);
			if (!mapping)
				pgflags = page_flags(hp);
			if (mapping && !(mapping & MAPPING_FLAGS)) {
				struct inode *host =
					BPF_CORE_READ((struct address_space *)mapping, host);

				if (host && user_buffer(end_io, BPF_CORE_READ(host, i_mode))) {
					rawdev(fi, bdev_dev);
					return;
				}
				if (host && bvi && (__u64)host != bvi_bits)
					goto btrfs_dio;
				if (host) {
					fill_inode(fi, host, kind, RAW);
					goto found;
				}
			}
		}
	}
btrfs_dio:
	if (bvi) {
		/* btrfs direct I/O (the pages, if they have a host, are not the inode's) */
		fill_inode(fi, bvi, IODUMP_PK_DIO, btf);
		goto found;
	}
	if (!mapping &&
	    (pgflags & (1ULL << bpf_core_enum_value(enum pageflags, PG_swapbacked)))) {
		/* swap-in: an anonymous (swap-backed) folio not mapped yet; reads carry no
		 * REQ_SWAP, and synchronous swap devices (zram) complete them through
		 * submit_bio_wait() */
		fi->kind = IODUMP_PK_SWAP;
		return;
	}
	if (mapping & 1) {
		/* user memory: O_DIRECT. Synchronous small O_DIRECT on a block device node
		 * (__blkdev_direct_IO_simple) waits with submit_bio_wait(). */
		if (ksym_submit_bio_wait_endio && end_io == ksym_submit_bio_wait_endio) {
			rawdev(fi, bdev_dev);
		} else {
			fi->kind = IODUMP_PK_USERMEM;
		}
	}
	return;
found:
	if (is_btrfs)
		btrfs_fixup(fi, bdev_dev, cs, lvl, btf);
}

#endif /* IODUMP_FILE_BPF_H */
