/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * inflight.bpf.h — the I/Os in flight, keyed by their request's or bio's address: the
 * lock-free slot table (inflight_slots) and the fallback hash maps (inflight_rq,
 * inflight_bio): track, find, claim/release at completion, untrack, and adopt (a request
 * started at block_getrq moves from its bio's key to the request's).
 */
#ifndef IODUMP_INFLIGHT_BPF_H
#define IODUMP_INFLIGHT_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "iodump.h"
#include "maps.bpf.h"
#include "helpers.bpf.h"

static __always_inline struct iodump_slot *slot_of(__u64 key)
{
#ifdef IODUMP_NO_ATOMICS
	/* no slot table: the compiler drops every slot branch (and its compare-and-swap);
	 * ebpf/build.sh checks that the object has no atomic instruction left */
	return NULL;
#endif
	__u32 idx = (key * 0x9E3779B97F4A7C15ULL) >> (64 - IODUMP_SLOT_BITS);

	return bpf_map_lookup_elem(&inflight_slots, &idx);
}

static __always_inline void fallback_add(__s64 d)
{
	__u32 zero = 0;
	__s64 *n = bpf_map_lookup_elem(&fallback_live, &zero);

	if (n)
		__sync_fetch_and_add(n, d);
}

/* Start tracking key with v: a free (or stale) slot, else the fallback map. count: count it
 * as a new I/O (IODUMP_CNT_TRACKED); 0 when an entry only moves to another key. */
static __always_inline void track(void *map, __u64 key, struct iodump_inflight *v, int count)
{
	struct iodump_slot *s = slot_of(key);
	int err;

	if (s) {
		__u64 old = __sync_val_compare_and_swap(&s->key, 0, key);

		if (old == key) {
			/* the same request/bio address started again: the previous I/O with
			 * this address never completed as far as we saw */
			cnt(IODUMP_CNT_LOST_STALE);
			old = 0;
		} else if (old && !(old & IODUMP_SLOT_COMPLETING) &&
			   v->ev.start_ns - s->v.ev.start_ns > IODUMP_STALE_NS &&
			   __sync_val_compare_and_swap(&s->key, old, key) == old) {
			/* an I/O that never completed: evict it */
			cnt(IODUMP_CNT_LOST_STALE);
			old = 0;
		}
		if (!old) {
			__builtin_memcpy(&s->v, v, sizeof(*v));
			if (count)
				cnt(IODUMP_CNT_TRACKED);
			return;
		}
	}
	/*
	 * The result is an int: before 6.4 the verifier turns the helper into a direct call of
	 * the map's update, whose int result leaves the upper half of the return register
	 * undefined (5.10: -EEXIST came back as 0x00000000ffffffef, so a stale entry was never
	 * replaced and every later I/O with its address was lost).
	 */
	err = (int)bpf_map_update_elem(map, &key, v, BPF_NOEXIST);
	if (err == -EEXIST) {
		cnt(IODUMP_CNT_LOST_STALE);
		err = (int)bpf_map_update_elem(map, &key, v, BPF_ANY);
	} else if (!err) {
		fallback_add(1);
	}
	if (err) {
		cnt(IODUMP_CNT_LOST_INFLIGHT);
		return;
	}
	if (count)
		cnt(IODUMP_CNT_TRACKED);
}

/* Find the in-flight entry of key; *slot is set when it lives in the slot table. */
static __always_inline struct iodump_inflight *find(void *map, __u64 key,
						   struct iodump_slot **slot)
{
	struct iodump_slot *s = slot_of(key);
	__u32 zero = 0;
	__s64 *n;

	*slot = NULL;
	if (s && s->key == key) {
		*slot = s;
		return &s->v;
	}
	n = bpf_map_lookup_elem(&fallback_live, &zero);
	if (!n || *n <= 0)
		return NULL;
	return bpf_map_lookup_elem(map, &key);
}

/*
 * Completing a tracked I/O: claim() it, copy its event out, release() it. A slot is claimed
 * by marking its key (IODUMP_SLOT_COMPLETING) with compare-and-swap before the copy: while
 * marked, no one takes it (track() neither reuses nor evicts it), so the copy cannot be
 * torn, and the release is a plain store. Doing the locked instruction before the copy
 * matters: after it, the instruction waits for the copy's stores to drain (measured: the
 * completion handler's most expensive instruction, ~50 ns per I/O here). Fallback-map
 * entries are claimed by deleting them after the copy (a torn copy is then discarded).
 * Returns 1 if this caller has the I/O.
 */
static __always_inline int claim(struct iodump_slot *s, __u64 key)
{
	if (s)
		return __sync_val_compare_and_swap(&s->key, key, key | IODUMP_SLOT_COMPLETING) ==
		       key;
	return 1;
}

static __always_inline int release(void *map, __u64 key, struct iodump_slot *s)
{
	if (s) {
		compiler_barrier(); /* the copy's stores first (x86 keeps store order) */
		*(volatile __u64 *)&s->key = 0;
		return 1;
	}
	if (bpf_map_delete_elem(map, &key))
		return 0;
	fallback_add(-1);
	return 1;
}

/* Stop tracking key (found by find()). Returns 1 if this caller released it. */
static __always_inline int untrack(void *map, __u64 key, struct iodump_slot *s)
{
	if (s)
		return __sync_val_compare_and_swap(&s->key, key, 0) == key;
	if (bpf_map_delete_elem(map, &key))
		return 0;
	fallback_add(-1);
	return 1;
}


/* The entry of request rq (key) started at block_getrq, moved from its first bio's key to
 * the request's; NULL if there is none. The bio that got the request is the first of the
 * request's bios unless others were merged in front of it (a plugged request takes front
 * merges before it is issued): the walk goes down the chain a few bios. */
#define IODUMP_ADOPT_HOPS 8
static __always_inline struct iodump_inflight *adopt(struct iodump_cpu_state *cs, __u32 lvl,
						     struct request *rq, __u64 key,
						     struct iodump_slot **slot, int btf)
{
	struct iodump_inflight v;
	struct iodump_inflight *bv = NULL;
	struct iodump_slot *bs = NULL;
	__u64 bio = (__u64)BPF_CORE_READ(rq, bio);
	__u64 bkey = 0;

	for (int i = 0; i < IODUMP_ADOPT_HOPS && bio; i++) {
		bkey = bio | IODUMP_KEY_GETRQ;
		bv = find(&inflight_rq, bkey, &bs);
		if (bv)
			break;
		bio = (__u64)BPF_CORE_READ((struct bio *)bio, bi_next);
	}
	if (!bv)
		return NULL;
	__builtin_memcpy(&v, bv, sizeof(v));
	if (!untrack(&inflight_rq, bkey, bs))
		return NULL;
	track(&inflight_rq, key, &v, 0);
	return find(&inflight_rq, key, slot);
}

#endif /* IODUMP_INFLIGHT_BPF_H */
