/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * paths.bpf.h — path records: sending a file's path once (ensure_path), by walking its
 * dentries (iodump_send_path) under a new file_id (next_file_id), and sending it again
 * when its names change (iodump_path_fp, the names' fingerprint). The two global functions
 * are the only code in .text. A path record is sent once per (dev, ino, gen) (and again
 * after a rename), so this code reads with BPF_CORE_READ throughout and does not care
 * about speed.
 */
#ifndef IODUMP_PATHS_BPF_H
#define IODUMP_PATHS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "iodump.h"
#include "settings.bpf.h"
#include "maps.bpf.h"
#include "read.bpf.h"
#include "helpers.bpf.h"
#include "file.bpf.h"

/* A new file_id: the last one plus one, by compare-and-swap (a fetch-and-add returning the
 * old value needs -mcpu=v3; a 64-bit cmpxchg does not). 0 if 16 attempts in a row lost a
 * race. Called before the dentry walk: after it, the loop's branches would be verified once
 * per state the walk can end in. */
#ifdef IODUMP_NO_ATOMICS
/* Per CPU, without atomics: the CPU's own counter (cpu_state) striped by CPU number, so
 * ids stay unique; 0 (no id now: the path is sent at a later I/O) when run nested on top
 * of another of our programs on this CPU, which may be in the middle of taking one. */
static __always_inline __u64 next_file_id(void)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	struct iodump_cpu_state *cs = bpf_map_lookup_elem(&cpu_state, &zero);
	__u32 n = cfg_nr_cpus ? cfg_nr_cpus : 1;

	if (!cs || cs->nest != 1)
		return 0;
	cs->file_ctr++;
	return (cs->file_ctr - 1) * n + (cpu % n) + 1;
}
#else
static __always_inline __u64 next_file_id(void)
{
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&file_id_last, &zero);
	__u64 id;

	if (!last)
		return 0;
	id = *(volatile __u64 *)last;
	for (int i = 0; i < 16; i++) {
		__u64 seen = __sync_val_compare_and_swap(last, id, id + 1);

		if (seen == id)
			return id + 1;
		id = seen;
	}
	return 0;
}
#endif

/*
 * Walk the dentry chain and send a path record. Returns its file_id (> 0) if sent,
 * -1 if not.
 *
 * A global (non-static, noinline) function: the verifier checks it once, on its own,
 * instead of once per calling program and flavour (the 256-step loop is the bulk of the
 * verification work). Its arguments are therefore plain numbers, and it reads with
 * BPF_CORE_READ only:
 *   inode_addr, file_addr: struct inode * / struct file * (file_addr may be 0)
 *   devs:   dev | (u64)sb_dev << 32        gen_kind: gen | (u64)path_kind << 32
 */
__noinline int iodump_send_path(__u64 inode_addr, __u64 file_addr, __u64 ino, __u64 devs,
				__u64 gen_kind)
{
	__u32 zero = 0;
	struct iodump_path_scratch *ps = bpf_map_lookup_elem(&path_scratch, &zero);
	struct inode *inode = (struct inode *)inode_addr;
	struct file *file = (struct file *)file_addr;
	struct iodump_path_event *hdr;
	struct vfsmount *mnt = NULL;
	__u64 id = next_file_id();
	struct dentry *d = NULL;
	struct dentry *parent;
	char *names;
	__u32 off = 0;
	__u16 depth = 0;
	__u8 pflags = 0;
	int at_root = 0;
	int i;

	/* ids stay below 2^31, the return value is an int: a recording would need two
	 * billion path records to get there, and records past it are counted as lost */
	if (!ps || !inode || !id || id > 0x7fffffff)
		return -1;
	hdr = (void *)ps->raw;
	names = (char *)ps->raw + sizeof(*hdr);

	if (file) {
		/* the dentry the file was opened with (the right hard link) and its mount */
		d = BPF_CORE_READ(file, f_path.dentry);
		mnt = BPF_CORE_READ(file, f_path.mnt);
		/* that name unlinked while the inode has another (link(old, new); unlink(old)):
		 * the dentry is unhashed, and the inode's alias (the newest first) is its name */
		if (d && !BPF_CORE_READ(d, d_hash.pprev) && BPF_CORE_READ(inode, i_nlink) > 0) {
			struct dentry *alias = inode_alias(inode);

			if (alias && alias != d && BPF_CORE_READ(alias, d_hash.pprev))
				d = alias;
		}
	}
	if (!d) {
		/* page cache: the inode's first alias */
		d = inode_alias(inode);
	}
	if (!d)
		pflags |= IODUMP_PF_NO_DENTRY;
	if (BPF_CORE_READ(inode, i_nlink) == 0)
		pflags |= IODUMP_PF_DELETED;

	if (d) {
		for (i = 0; i < IODUMP_PATH_MAX_DEPTH; i++) {
			parent = BPF_CORE_READ(d, d_parent);
			if (!parent || parent == d) {
				at_root = 1;
				break;
			}
			if (off > IODUMP_PATH_BUF - IODUMP_NAME_MAX)
				break;
			const unsigned char *name = BPF_CORE_READ(d, d_name.name);
			long n = bpf_probe_read_kernel_str(&names[off & (IODUMP_PATH_BUF - 1)],
							   IODUMP_NAME_MAX, name);
			if (n <= 0)
				break;
			off += n;
			depth++;
			d = parent;
		}
		if (!at_root) {
			parent = BPF_CORE_READ(d, d_parent);
			at_root = !parent || parent == d;
		}
		if (!at_root)
			pflags |= IODUMP_PF_TRUNCATED;
		else if (d != BPF_CORE_READ(inode, i_sb, s_root))
			pflags |= IODUMP_PF_DISCONNECTED;
	}

	/* Stored now and read back: the verifier then walks what follows once per way out of
	 * the loop, not once per length and depth it can leave with (which was most of what it
	 * walked of each program that starts an I/O, and of the recorder's start). */
	hdr->depth = depth;
	hdr->names_len = off;
	off = *(volatile __u16 *)&hdr->names_len;
	hdr->kind = IODUMP_EV_PATH;
	hdr->path_kind = gen_kind >> 32;
	hdr->pflags = pflags;
	hdr->ino = ino;
	hdr->dev = (__u32)devs;
	hdr->gen = (__u32)gen_kind;
	hdr->mnt_id = 0;
	hdr->sb_dev = devs >> 32;
	hdr->_reserved = 0;
	if (mnt) {
		struct mount *m = (void *)mnt - bpf_core_field_offset(struct mount, mnt);

		hdr->mnt_id = BPF_CORE_READ(m, mnt_id);
	}

	hdr->file_id = id;
	off &= IODUMP_PATH_BUF - 1;
	if (bpf_ringbuf_output(&events, ps, sizeof(*hdr) + off, rb_flags()))
		return -1;
	cnt(IODUMP_CNT_PATHS);
	if (pflags & IODUMP_PF_TRUNCATED)
		cnt(IODUMP_CNT_PATH_TRUNC);
	return hdr->file_id;
}

/*
 * The fingerprint of a file's names: every dentry from the inode's first alias up to its
 * filesystem's root, each by address and name hash and length (d_name.hash_len). A rename,
 * a rename over another file, a move to another directory or a renamed directory above it
 * changes it (a short name is renamed in place, its hash changes; a moved dentry has another
 * parent). Global, checked once by the verifier; reads with BPF_CORE_READ only.
 */
#define IODUMP_FP_DEPTH 64
__noinline __u64 iodump_path_fp(__u64 inode_addr)
{
	struct inode *inode = (struct inode *)inode_addr;
	struct dentry *d, *parent;
	__u64 fp = 0xcbf29ce484222325ULL;

	if (!inode)
		return 0;
	d = inode_alias(inode);
	if (!d)
		return 1;
	for (int i = 0; i < IODUMP_FP_DEPTH; i++) {
		fp = (fp ^ (__u64)d) * 0x100000001b3ULL;
		fp = (fp ^ BPF_CORE_READ(d, d_name.hash_len)) * 0x100000001b3ULL;
		parent = BPF_CORE_READ(d, d_parent);
		if (!parent || parent == d)
			break;
		d = parent;
	}
	/* deleted (unlinked, still open) is a name change too */
	if (BPF_CORE_READ(inode, i_nlink) == 0)
		fp = ~fp;
	return fp | 2;
}

/* The epoch of ensure_path: about a second of now_ns (names are checked again once a second
 * whatever happens: renames the syscall tracepoints do not see, io_uring's or the kernel's
 * own) mixed with the names generation (every rename or unlink seen moves it). Any change of
 * either gives another value. */
static __always_inline __u32 names_epoch(__u64 now_ns)
{
	__u32 zero = 0;
	__u64 *g = bpf_map_lookup_elem(&names_gen, &zero);
	__u32 gen = g ? (__u32)*g : 0;

	return (__u32)(now_ns >> 30) ^ (gen * 0x9E3779B1u);
}

/* Make sure the path of fi was sent once. Returns the file_id it was sent with (> 0) when
 * that is at hand, 0 when it was sent before and only seen_cache knows (user space finds
 * the record by the inode), -1 if it could not be sent. */
static __always_inline int ensure_path(struct iodump_file_info *fi,
				       struct iodump_cpu_state *cs, __u32 lvl, __u64 now_ns)
{
	struct iodump_inode_key k = { .ino = fi->ino, .dev = fi->dev, .gen = fi->gen };
	struct iodump_seen_set *set = NULL;
	struct iodump_seen_val *known, sent = {};
	__u32 epoch = names_epoch(now_ns), tag = 0;
	__u64 inode_bits = ptr_bits(cs, lvl, fi->inode, BTF);
	int id;

	if (!lvl) {
		struct iodump_seen_cache *sc;
		__u32 zero = 0;
		__u64 fp;

		if (cs->seen_ok && cs->seen_ino == k.ino && cs->seen_dev == k.dev &&
		    cs->seen_gen == k.gen && cs->seen_epoch == epoch)
			return cs->seen_id;
		fp = (k.ino * 0x9E3779B97F4A7C15ULL) ^
		     (((__u64)k.dev << 32 | k.gen) * 0xC2B2AE3D27D4EB4FULL) ^ k.ino;
		/* the epoch is in the tag: last epoch's tags no longer match, so each file's
		 * names are checked again about once a second */
		tag = ((__u32)fp ^ (epoch * 0x9E3779B9u)) | 1; /* empty ways hold 0 */
		sc = bpf_map_lookup_elem(&seen_cache, &zero);
		if (sc) {
			set = &sc->set[(fp >> (64 - IODUMP_SEEN_SET_BITS)) &
				       ((1u << IODUMP_SEEN_SET_BITS) - 1)];
			for (int w = 0; w < IODUMP_SEEN_WAYS; w++) {
				if (set->tag[w] == tag) {
					id = 0;
					goto seen;
				}
			}
		}
	}
	known = bpf_map_lookup_elem(&seen_inodes, &k);
	if (known && known->epoch == epoch) {
		id = known->id;
	} else {
		__u64 names_fp = iodump_path_fp(inode_bits);

		if (known && known->fp == names_fp) {
			/* same names as when last checked */
			known->epoch = epoch;
			id = known->id;
		} else {
			/* new, or renamed: (re)send. The callee takes plain numbers. */
			id = iodump_send_path(inode_bits, ptr_bits(cs, lvl, fi->file, BTF), fi->ino,
					      fi->dev | (__u64)fi->sb_dev << 32,
					      fi->gen | (__u64)fi->kind << 32);
			if (id <= 0) {
				cnt(IODUMP_CNT_LOST_PATH);
				return -1;
			}
			sent.id = id;
			sent.epoch = epoch;
			sent.fp = names_fp;
			bpf_map_update_elem(&seen_inodes, &k, &sent, BPF_ANY);
		}
	}
	if (set) {
		/* most recent first: the oldest way is dropped */
		for (int w = IODUMP_SEEN_WAYS - 1; w > 0; w--)
			set->tag[w] = set->tag[w - 1];
		set->tag[0] = tag;
	}
seen:
	if (!lvl) {
		cs->seen_ino = k.ino;
		cs->seen_dev = k.dev;
		cs->seen_gen = k.gen;
		cs->seen_id = id;
		cs->seen_epoch = epoch;
		cs->seen_ok = 1;
	}
	return id;
}

#endif /* IODUMP_PATHS_BPF_H */
