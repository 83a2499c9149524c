/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * stack.bpf.h — I/O through stacked devices (device-mapper: LVM, dm-crypt; md RAID; bcache): the
 * I/O a stacked device sends to the devices below carries its upper I/O's submitter, file
 * and dirtier, instead of the kernel thread that submits it (kcryptd, dmcrypt_write,
 * md*_raid1) and the bounce pages no file owns.
 *
 * How the lower I/O finds its upper one, by the bio chain, never by guessing:
 *  - every clone and split a stacking driver makes of a bio (bio_alloc_clone, and
 *    bio_clone_fast before 5.18; bio_split) shares its bio_vec array (bi_io_vec): dm linear
 *    and striped, md raid0 and raid1, dm-crypt's reads. The upper I/O is kept under that
 *    array's address (stack_push) from its start to its completion (stack_pop);
 *  - request-based device-mapper (dm-multipath) clones a request onto a path disk, each of
 *    its bios cloned (blk_rq_prep_clone): the upper request is kept under its first bio's
 *    array (stack_push_rq, start.bpf.h) and found from the clone's first bio;
 *  - dm-crypt's writes go down in a new bio over encrypted bounce pages; its bi_private is
 *    the dm_crypt_io, whose second word is the bio dm-crypt was given (base_bio, the first
 *    two members of struct dm_crypt_io since 2.6: cc, base_bio), which shares the upper
 *    bio's array. The word is read with a probe read and only ever used as a map key, so a
 *    driver whose bi_private is something else finds nothing;
 *  - a split the device below makes of such a bio (bio_split_to_limits) has the bio it was
 *    split from as its bi_private (bio_chain): one hop up the chain;
 *  - bcache reads a block its cache misses from the backing device in a bio of its own
 *    pages (to put it in the cache too), whose bi_private is the closure of bcache's struct
 *    search for the bio it serves; the search holds that bio's clone (search.bio.bio), which
 *    shares the upper bio's array. Where, from the closure, is read from bcache's module
 *    BTF through user space (stack_bcache); the word there is read with a probe read and
 *    only ever used as a map key;
 *  - md RAID4/5/6 writes (and reads not within one chunk) go down from its stripe cache: each
 *    disk's block of a stripe is a page of the stripe's own, sent in the bio its struct r5dev
 *    embeds, whose bi_private is the stripe_head; the upper bios wait in the r5devs' lists
 *    (written, towrite, toread). Their offsets come from raid456's module BTF, through user
 *    space (stack_raid5), since the module may be loaded after the program is.
 * The stacked devices are named by user space (stack_devs): those there are as recording
 * begins, and each one made while recording (an LVM volume, a dm-crypt volume opened, an md
 * array assembled) once user space sees its first I/O. While there is none, this work costs
 * a load of stack_named per hook; while nothing stacked is in flight, one more array read
 * (stack_live).
 */
#ifndef IODUMP_STACK_BPF_H
#define IODUMP_STACK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "iodump.h"
#include "settings.bpf.h"
#include "maps.bpf.h"
#include "read.bpf.h"

/* an entry older than this is a completion never seen: not an upper I/O any more */
#define IODUMP_STACK_MAX_AGE_NS (60ULL * 1000000000ULL)
#define IODUMP_DM_CRYPT_BASE_BIO_OFF 8 /* struct dm_crypt_io: cc, then base_bio */

/* stack_live[i] += d */
static __always_inline void stack_add_at(__u32 i, __s64 d)
{
	__s64 *n = bpf_map_lookup_elem(&stack_live, &i);

	if (n)
		__sync_fetch_and_add(n, d);
}

static __always_inline void stack_add(__s64 d)
{
	stack_add_at(0, d);
}

/* a request of a request-based stacked device may own an entry (stack_push_rq) */
static __always_inline int stack_rq_live(void)
{
	__u32 one = 1;
	__s64 *n = bpf_map_lookup_elem(&stack_live, &one);

	return n && *n > 0;
}

/* 1 once stack_devs names a stacked device. The program's only .bss variable, written by
 * user space alone (through the .bss map, whole): a load where the lookups below would be. */
volatile __u32 stack_named = 0;

/* an upper I/O may be in flight: a bio starting may serve one, a completion may end one */
static __always_inline int stack_active(void)
{
	__u32 zero = 0;
	__s64 *n;

	if (!stack_named)
		return 0;
	n = bpf_map_lookup_elem(&stack_live, &zero);

	return n && *n > 0;
}

static __always_inline int stack_dev(__u32 dev)
{
	return stack_named && bpf_map_lookup_elem(&stack_devs, &dev) != NULL;
}

/* Keep an I/O starting on a stacked device (v, filled by start_io) for the I/O it becomes
 * below. key: the bio's address. A stacked device below another one (md under LVM, a thin
 * volume's pool) gets a clone sharing the upper bio's array, so its entry is there already:
 * the I/O below then serves this one, which becomes the entry's I/O (its dev, start_ns and
 * upper I/O; the owner, whose completion removes the entry, stays). So does another piece
 * of the same upper I/O on v's device (a bio split into pieces that are each stacked
 * again: dm-thin's blocks on its pool). Any other entry (a piece of no upper I/O: a split
 * of a bio from a file system resubmitted to its device, whose own bio then owns the entry;
 * one whose completion was missed) is replaced by v. 1 when v owns the entry now. */
static __always_inline int stack_push(struct iodump_cpu_state *cs, __u32 lvl, struct bio *bio,
				      __u64 key, struct iodump_inflight *v, int btf)
{
	__u64 vec = key_of(cs, lvl, RD(btf, bio, bi_io_vec), btf);
	struct iodump_inflight *e;
	int made = 0;

	if (!vec)
		return 0; /* an empty flush: nothing to attribute */
	v->ev.complete_ns = key;
	if (!bpf_map_update_elem(&stack_ios, &vec, v, BPF_NOEXIST)) {
		stack_add(1);
		made = 1;
	} else {
		e = bpf_map_lookup_elem(&stack_ios, &vec);
		if (e && ((e->ev.dev == v->ev.upper_dev && e->ev.start_ns == v->ev.upper_start_ns) ||
			  (v->ev.upper_dev && e->ev.dev == v->ev.dev &&
			   e->ev.upper_dev == v->ev.upper_dev &&
			   e->ev.upper_start_ns == v->ev.upper_start_ns))) {
			e->ev.dev = v->ev.dev;
			e->ev.start_ns = v->ev.start_ns;
			e->ev.upper_dev = v->ev.upper_dev;
			e->ev.upper_start_ns = v->ev.upper_start_ns;
		} else if (e && !bpf_map_update_elem(&stack_ios, &vec, v, BPF_EXIST)) {
			made = 1;
		}
	}
	v->ev.complete_ns = 0;
	return made;
}

/* The entry of the bio_vec array of bio b (an address read with probe reads), or NULL. */
static __always_inline struct iodump_inflight *stack_entry_of(__u64 b)
{
	__u64 vec = (__u64)BPF_CORE_READ((struct bio *)b, bi_io_vec);

	return vec ? bpf_map_lookup_elem(&stack_ios, &vec) : NULL;
}

/* md RAID4/5/6: the upper bio a stripe's bio b (its bi_private: sh) serves, or 0. b must
 * sit exactly where sh keeps a disk's bio (r5dev.req, or rreq for a replacement disk) with
 * bi_io_vec pointing at the bio_vec beside it (r5dev.vec, rvec), in one of sh's disks;
 * anything else is no stripe. The upper bio is the first one waiting on b's own block
 * (written: its data is in the block being written; towrite; toread), else on the stripe's
 * other blocks in disk order after b's (a parity block, a block read to compute parity,
 * serve the stripe's writes). Every word is read with a probe read. Global: the verifier
 * checks its loop once per program, not once per path of its callers through it (it was
 * half of what the verifier walked of each program that starts an I/O, and of the
 * recorder's start). */
#define IODUMP_RAID5_MAX_DISKS 32
__noinline __u64 stack_raid5_upper(__u64 b, __u64 sh)
{
	__u32 zero = 0;
	struct iodump_raid5_layout *l = bpf_map_lookup_elem(&stack_raid5, &zero);
	__u64 first, in, i, vec, want, at, up = 0;
	int disks = 0;

	if (!l || !l->dev_bytes || b < sh + l->dev_off)
		return 0;
	first = sh + l->dev_off;
	i = (b - first) / l->dev_bytes;
	in = (b - first) - i * l->dev_bytes;
	if (in == l->req_off)
		want = l->vec_off;
	else if (in == l->rreq_off)
		want = l->rvec_off;
	else
		return 0;
	if (bpf_probe_read_kernel(&disks, sizeof(disks), (void *)(sh + l->disks_off)) ||
	    disks <= 0 || disks > IODUMP_RAID5_MAX_DISKS || i >= (__u64)disks)
		return 0;
	vec = (__u64)BPF_CORE_READ((struct bio *)b, bi_io_vec);
	if (vec != first + i * l->dev_bytes + want)
		return 0;
	for (int k = 0; k < IODUMP_RAID5_MAX_DISKS && k < disks; k++) {
		__u64 j = i + k;

		if (j >= (__u64)disks)
			j -= disks;
		at = first + j * l->dev_bytes;
		if ((!bpf_probe_read_kernel(&up, sizeof(up), (void *)(at + l->written_off)) && up) ||
		    (!bpf_probe_read_kernel(&up, sizeof(up), (void *)(at + l->towrite_off)) && up) ||
		    (!bpf_probe_read_kernel(&up, sizeof(up), (void *)(at + l->toread_off)) && up))
			return up;
	}
	return 0;
}

/* bcache: the entry of the bio whose struct search's closure is priv (a cache-miss read's
 * bi_private), or NULL; also NULL while bcache's layout is not known. */
static __always_inline struct iodump_inflight *stack_bcache_upper(__u64 priv)
{
	__u32 zero = 0;
	__u32 *off = bpf_map_lookup_elem(&stack_bcache, &zero);
	__u64 vec = 0;

	if (!off || !*off ||
	    bpf_probe_read_kernel(&vec, sizeof(vec), (void *)(priv + *off)) || !vec)
		return NULL;
	return bpf_map_lookup_elem(&stack_ios, &vec);
}

/* The upper I/O of a bio about to start on the device below, or NULL. The bio itself, or
 * up to IODUMP_STACK_HOPS bios up its bi_private chain (a split the device below made is
 * chained to the bio it was split from, bio_chain), each also through dm-crypt's
 * base_bio; or, for a bio of md RAID4/5/6's stripe cache, the upper bio its stripe
 * serves; or, for a cache-miss read of bcache, the bio its struct search serves. */
#define IODUMP_STACK_HOPS 2
static __always_inline struct iodump_inflight *stack_find(struct iodump_cpu_state *cs, __u32 lvl,
							 struct bio *bio, __u64 now, int btf)
{
	struct iodump_inflight *p = NULL;
	__u64 b = key_of(cs, lvl, bio, btf), priv, base, up;

	for (int i = 0; i < IODUMP_STACK_HOPS && b && !p; i++) {
		p = stack_entry_of(b);
		if (p)
			break;
		priv = (__u64)BPF_CORE_READ((struct bio *)b, bi_private);
		if (!priv)
			break;
		if (i == 0) {
			up = stack_raid5_upper(b, priv);
			if (up) {
				p = stack_entry_of(up);
				break;
			}
			p = stack_bcache_upper(priv);
			if (p)
				break;
		}
		base = 0;
		bpf_probe_read_kernel(&base, sizeof(base),
				      (void *)(priv + IODUMP_DM_CRYPT_BASE_BIO_OFF));
		if (base)
			p = stack_entry_of(base);
		b = priv;
	}
	if (!p || now - p->ev.start_ns > IODUMP_STACK_MAX_AGE_NS)
		return NULL;
	return p;
}

/* The upper I/O's bio completed (key: its address): forget it, if it is the entry's owner
 * (a clone that is itself stacked, LVM on md, shares the entry and does not own it); 1 when
 * it was. */
static __always_inline int stack_pop(struct iodump_cpu_state *cs, __u32 lvl, struct bio *bio,
				     __u64 key, int btf)
{
	__u64 vec = key_of(cs, lvl, RD(btf, bio, bi_io_vec), btf);
	struct iodump_inflight *p = vec ? bpf_map_lookup_elem(&stack_ios, &vec) : NULL;

	if (p && p->ev.complete_ns == key && !bpf_map_delete_elem(&stack_ios, &vec)) {
		stack_add(-1);
		return 1;
	}
	return 0;
}

/* The lower I/O v takes what its upper I/O p knew of its origin, and names p; or, when p is
 * on v's own device (another piece of the same bio: a split resubmitted to the device, a
 * bio dm cut into blocks), the I/O p names. */
static __always_inline void stack_inherit(struct iodump_inflight *v,
					  const struct iodump_inflight *p)
{
	if (p->ev.dev == v->ev.dev) {
		v->ev.upper_dev = p->ev.upper_dev;
		v->ev.upper_start_ns = p->ev.upper_start_ns;
	} else {
		v->ev.upper_dev = p->ev.dev;
		v->ev.upper_start_ns = p->ev.start_ns;
	}
	v->ev.pid = p->ev.pid;
	v->ev.tid = p->ev.tid;
	__builtin_memcpy(v->ev.comm, p->ev.comm, sizeof(v->ev.comm));
	v->ev.cgroup_id = p->ev.cgroup_id;
	v->ev.syscall = p->ev.syscall;
	v->ev.cpu = p->ev.cpu;
	v->ev.path_kind = p->ev.path_kind;
	v->ev.ino = p->ev.ino;
	v->ev.ino_dev = p->ev.ino_dev;
	v->ev.ino_gen = p->ev.ino_gen;
	v->ev.file_id = p->ev.file_id;
	v->ev.dirtier_pid = p->ev.dirtier_pid;
	v->ev.ioflags |= p->ev.ioflags &
			 (IODUMP_IOF_KTHREAD | IODUMP_IOF_DIRTIER | IODUMP_IOF_PATH_LOST);
}

#endif /* IODUMP_STACK_BPF_H */
