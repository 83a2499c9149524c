/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * complete.bpf.h — what follows a tracked I/O's start: its issue (on_rq_issue: issue time,
 * final extent), a merge into another request (on_rq_merge), and its completion
 * (on_rq_complete, on_bio_complete): the event goes into this CPU's batch (batch_event,
 * send_batch) or straight into the ring buffer (finish).
 */
#ifndef IODUMP_COMPLETE_BPF_H
#define IODUMP_COMPLETE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "iodump.h"
#include "settings.bpf.h"
#include "maps.bpf.h"
#include "read.bpf.h"
#include "helpers.bpf.h"
#include "codes.bpf.h"
#include "inflight.bpf.h"
#include "stack.bpf.h"
#include "start.bpf.h"

static __always_inline int on_rq_issue(struct iodump_cpu_state *cs, __u32 lvl,
				       struct request *rq, int btf)
{
	__u64 key = key_of(cs, lvl, rq, btf);
	struct iodump_slot *slot;
	struct iodump_inflight *v = find(&inflight_rq, key, &slot);

	if (!v && cfg_start_at_getrq) {
		v = adopt(cs, lvl, rq, key, &slot, btf);
		if (!v && stack_active())
			v = start_clone(cs, lvl, rq, key, &slot, btf);
		if (!v)
			untracked_clone(rq, btf);
	}
	if (!v)
		return 0;
	v->ev.issue_ns = bpf_ktime_get_ns();
	v->ev.ioflags |= IODUMP_IOF_ISSUED;
	/* merges are over once a request is dispatched: take its final extent */
	v->ev.sector = RD(btf, rq, __sector);
	v->ev.bytes = RD(btf, rq, __data_len);
	return 0;
}

static __always_inline int on_rq_merge(struct iodump_cpu_state *cs, __u32 lvl,
				       struct request *next, int btf)
{
	__u64 key = key_of(cs, lvl, next, btf);
	struct iodump_slot *slot;
	struct iodump_inflight *v = find(&inflight_rq, key, &slot);

	if (!v && cfg_start_at_getrq)
		v = adopt(cs, lvl, next, key, &slot, btf);
	if (v && untrack(&inflight_rq, key, slot))
		cnt(IODUMP_CNT_RQ_MERGED);
	return 0;
}

/* Send this CPU's batch (level 0 only, or with no program running on the CPU). */
static __always_inline void send_batch(struct iodump_batch *b)
{
	__u32 n = b->count, size;

	if (!n)
		return;
	if (n > IODUMP_BATCH_MAX)
		n = IODUMP_BATCH_MAX; /* never: count is kept <= batch_cfg[0] <= MAX */
	b->kind = IODUMP_EV_BATCH;
	b->count = n;
	size = IODUMP_BATCH_HDR + n * sizeof(b->ev[0]);
	/* clang turns the sum into an OR the verifier bounds loosely: bound it again */
	asm volatile("" : "+r"(size));
	if (size > sizeof(*b))
		size = sizeof(*b);
	if (bpf_ringbuf_output(&events, b, size, rb_flags())) {
		cnt_add(IODUMP_CNT_LOST_RINGBUF, n);
	} else {
		cnt_add(IODUMP_CNT_EMITTED, n);
		cnt(IODUMP_CNT_BATCHES);
	}
	b->count = 0;
}

/*
 * Append a completed (and claimed) I/O's event to this CPU's batch (level 0) and release
 * it: returns 0 if batching is off, 1 if the event was taken care of.
 */
static __always_inline int batch_event(void *map, __u64 key, struct iodump_inflight *v,
				       struct iodump_slot *slot, __u64 now, __u32 lvl)
{
	__u32 zero = 0, *limit;
	struct iodump_batch *b;
	struct iodump_io_event *e;
	__u32 n;

	if (lvl)
		return 0;
	limit = bpf_map_lookup_elem(&batch_cfg, &zero);
	if (!limit || !*limit)
		return 0;
	b = bpf_map_lookup_elem(&batch, &zero);
	if (!b)
		return 0;
	n = b->count;
	if (n >= IODUMP_BATCH_MAX)
		return 0; /* never: sent when it reaches the limit */
	e = &b->ev[n];
	__builtin_memcpy(e, &v->ev, sizeof(*e));
	e->complete_ns = now;
	e->sector = v->ev.sector - v->part_start;
	if (!release(map, key, slot)) {
		cnt(IODUMP_CNT_NO_START); /* a fallback entry someone else deleted */
		return 1;
	}
	b->count = n + 1;
	if (n + 1 >= *limit)
		send_batch(b);
	return 1;
}

/* Send the event of a completed I/O and stop tracking it. */
static __always_inline void finish(void *map, __u64 key, struct iodump_inflight *v,
				   struct iodump_slot *slot, __u64 now, __u32 lvl)
{
	struct iodump_io_event *e;

	if (v->ev.bytes < cfg_min_bytes || (cfg_max_bytes && v->ev.bytes > cfg_max_bytes)) {
		if (untrack(map, key, slot))
			cnt(IODUMP_CNT_SIZE_FILTERED);
		return;
	}
	if (!claim(slot, key)) {
		cnt(IODUMP_CNT_NO_START);
		return;
	}
	if (batch_event(map, key, v, slot, now, lvl))
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		if (release(map, key, slot))
			cnt(IODUMP_CNT_LOST_RINGBUF);
		return;
	}
	__builtin_memcpy(e, &v->ev, sizeof(*e));
	e->complete_ns = now;
	e->sector = v->ev.sector - v->part_start;
	if (!release(map, key, slot)) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		cnt(IODUMP_CNT_NO_START);
		return;
	}
	bpf_ringbuf_submit(e, rb_flags());
	cnt(IODUMP_CNT_EMITTED);
}

/* The I/Os of a bio-based device whose very bios went down into request rq, which
 * completed: an NVMe multipath head passes the bio it got to a path disk whole. They end
 * with the request. Kernels that do not trace such a bio's own completion (6.1: blk-mq takes
 * a bio's completion trace over when it puts the bio in a request, and nvme does not trace
 * the head's) would never end them otherwise; where the kernel does (6.12: nvme traces the
 * head's bio before it ends the request), the bio's completion came first and finds nothing
 * left here. Only while a stacked I/O is in flight (an NVMe head is a stacked device). */
#define IODUMP_PASSED_DOWN_BIOS 4
static __always_inline void complete_passed_down(struct iodump_cpu_state *cs, __u32 lvl,
						 struct request *rq, __u16 err, __u64 now)
{
	__u64 bio = (__u64)BPF_CORE_READ(rq, bio);
	struct iodump_inflight *v;
	struct iodump_slot *slot;

#pragma clang loop unroll(disable)
	for (int i = 0; i < IODUMP_PASSED_DOWN_BIOS && bio; i++) {
		v = find(&inflight_bio, bio, &slot);
		if (v) {
			stack_pop(cs, lvl, (struct bio *)bio, bio, 0);
			if (err && !v->ev.error)
				v->ev.error = err;
			finish(&inflight_bio, bio, v, slot, now, lvl);
		}
		bio = (__u64)BPF_CORE_READ((struct bio *)bio, bi_next);
	}
}

/* Which program on a completion tracepoint runs a completion handler: the first; the
 * second after the first ran (it finds nothing left to do, unless the first was skipped at
 * an instant the busy flag does not cover); the second while the first is running on this
 * CPU, so that the kernel skipped the first for this completion (RESCUE: it does all the
 * first would have, counted or not, and counts itself as a rescue, so that the skip is not
 * counted as a lost I/O where none was). */
#define IODUMP_FIRST  0
#define IODUMP_AGAIN  1
#define IODUMP_RESCUE 2

/* Count the completion of request rq that nothing tracks (complete.bpf.h, rq_complete). */
static __always_inline void untracked_rq_complete(struct request *rq, __u32 nr_bytes, int btf)
{
	__u32 opf = RD(btf, rq, cmd_flags);
	__u8 op = norm_op(opf);
	__u64 bio = (__u64)RD(btf, rq, bio);

	if (op_passthrough(opf)) {
		/* before 6.5 no start hook sees a passthrough command (6.5+: block_io_start,
		 * recorded with op "other") */
		cnt(IODUMP_CNT_PASSTHROUGH_NO_START);
	} else if (op == IODUMP_OP_FLUSH && !bio) {
		cnt(IODUMP_CNT_FLUSH_NO_START); /* the flush machinery's own (blk_kick_flush) */
	} else if (op == IODUMP_OP_WRITE && !nr_bytes && bio && !RD(btf, rq, __data_len)) {
		/* the end of a write's flush sequence (rq_complete) that nothing tracks: a write
		 * not tracked (filtered, started before attach) that was completed once already,
		 * for its data, or any such write where ksym_mq_flush_data_end_io is unknown; or an
		 * empty REQ_PREFLUSH write that started before attach */
		cnt(IODUMP_CNT_FLUSH_NO_START);
	} else if (nr_bytes || bio) {
		cnt(IODUMP_CNT_NO_START);
	}
	/* else: the end of a request its bios completed in full already, an I/O that ended at
	 * that first completion: request-based device-mapper's, which its clone's bios
	 * complete (end_clone_bio) before the request is ended */
}

static __always_inline int rq_complete(struct iodump_cpu_state *cs, __u32 lvl,
				       struct request *rq, __u32 status, __u32 nr_bytes, int btf,
				       int again)
{
	__u64 key = key_of(cs, lvl, rq, btf);
	__u64 now = bpf_ktime_get_ns();
	struct iodump_slot *slot;
	struct iodump_inflight *v = find(&inflight_rq, key, &slot);
	__u16 err;

	/* started at block_getrq and completed without an insert or issue (an empty
	 * REQ_PREFLUSH request the flush machinery completes itself) */
	if (again == IODUMP_RESCUE)
		cnt(IODUMP_CNT_RQ_RESCUED);
	if (!v && cfg_start_at_getrq && again != IODUMP_AGAIN)
		v = adopt(cs, lvl, rq, key, &slot, btf);
	if (stack_active() && nr_bytes >= RD(btf, rq, __data_len)) {
		complete_passed_down(cs, lvl, rq, status_errno(status), now);
		/* a request-based stacked device's request (stack_push_rq) */
		__u64 first = stack_rq_live() ? key_of(cs, lvl, RD(btf, rq, bio), btf) : 0;

		if (first && stack_pop(cs, lvl, (struct bio *)first, first, 0))
			stack_add_at(1, -1);
	}
	if (!v) {
		if (again == IODUMP_AGAIN)
			return 0; /* done by the first program, or not tracked */
		untracked_rq_complete(rq, nr_bytes, btf);
		return 0;
	}
	err = status_errno(status);
	if (err && !v->ev.error)
		v->ev.error = err;
	/* blk_update_request may complete a request in parts; the tracepoint fires before
	 * __data_len is reduced, so nr_bytes < __data_len means more parts follow. */
	if (nr_bytes < RD(btf, rq, __data_len)) {
		v->ev.ioflags |= IODUMP_IOF_PARTIAL;
		if (again != IODUMP_AGAIN)
			cnt(IODUMP_CNT_PARTIAL);
		return 0;
	}
	/* A write in the flush machinery's sequence (REQ_PREFLUSH or REQ_FUA on a device with a
	 * write cache) completes its data here, and is completed again, with no bytes left, at
	 * the end of its sequence: after the cache flush that follows its data when it is a
	 * REQ_FUA write on a device without FUA (virtio-blk, loop, many SATA disks), which its
	 * writer waits for too. It ends then (its end_io restored by then). */
	if (ksym_mq_flush_data_end_io &&
	    (__u64)RD(btf, rq, end_io) == ksym_mq_flush_data_end_io) {
		if (again != IODUMP_AGAIN)
			cnt(IODUMP_CNT_FLUSH_FOLLOWED);
		return 0;
	}
	if (again == IODUMP_AGAIN) /* found it: the first was skipped, at an uncovered instant */
		cnt(IODUMP_CNT_RQ_RESCUED);
	finish(&inflight_rq, key, v, slot, now, lvl);
	return 0;
}

static __always_inline int on_rq_complete(struct iodump_cpu_state *cs, __u32 lvl,
					  struct request *rq, __u32 status, __u32 nr_bytes,
					  int btf)
{
	*(volatile __u8 *)&cs->rq_done_busy = 1;
	compiler_barrier();
	rq_complete(cs, lvl, rq, status, nr_bytes, btf, IODUMP_FIRST);
	compiler_barrier();
	*(volatile __u8 *)&cs->rq_done_busy = 0;
	return 0;
}

/* The second program on block_rq_complete (tp_rq_done2), as on_bio_complete_again below:
 * a request completed from a hard interrupt while the first program ran for another one in
 * a soft interrupt or a task on the same CPU (virtio-blk, loop). While the first runs on
 * this CPU (rq_done_busy) the kernel skipped it for this completion, which the second then
 * handles in full: a request not tracked (filtered, a flush the flush machinery ends) or a
 * partial completion is a rescue too, not an I/O lost. Outside that flag the second acts
 * only on an I/O it finds still in flight: the kernel marks a program running a little
 * before it sets the flag and a little after it clears it, and a skip there that finds
 * nothing counts as lost (the safe side). */
static __always_inline int on_rq_complete_again(struct iodump_cpu_state *cs, __u32 lvl,
						struct request *rq, __u32 status,
						__u32 nr_bytes, int btf)
{
	int busy = *(volatile __u8 *)&cs->rq_done_busy;

	return rq_complete(cs, lvl, rq, status, nr_bytes, btf,
			   busy ? IODUMP_RESCUE : IODUMP_AGAIN);
}

static __always_inline int bio_complete(struct iodump_cpu_state *cs, __u32 lvl,
					struct bio *bio, int btf, int again)
{
	__u64 key = key_of(cs, lvl, bio, btf);
	__u64 now = bpf_ktime_get_ns();
	struct iodump_slot *slot;
	struct iodump_inflight *v;

	if (again == IODUMP_RESCUE)
		cnt(IODUMP_CNT_BIO_RESCUED);
	if (stack_active())
		stack_pop(cs, lvl, bio, key, btf);
	v = find(&inflight_bio, key, &slot);
	if (!v)
		return 0; /* not tracked (filtered, or started before attach), or done already */
	if (again == IODUMP_AGAIN) /* found it: the first was skipped, at an uncovered instant */
		cnt(IODUMP_CNT_BIO_RESCUED);
	v->ev.error = status_errno(RD(btf, bio, bi_status));
	finish(&inflight_bio, key, v, slot, now, lvl);
	return 0;
}

static __always_inline int on_bio_complete(struct iodump_cpu_state *cs, __u32 lvl,
					   struct bio *bio, int btf)
{
	*(volatile __u8 *)&cs->bio_done_busy = 1;
	compiler_barrier();
	bio_complete(cs, lvl, bio, btf, IODUMP_FIRST);
	compiler_barrier();
	*(volatile __u8 *)&cs->bio_done_busy = 0;
	return 0;
}

/* The second program on block_bio_complete (tp_bio_done2) runs after the first on every
 * completion and finds nothing left to do, except when the kernel skipped the first because
 * it was already running on this CPU: a bio completed from an interrupt while the first ran
 * in a task, or, on kernels whose tracing programs can be preempted (7.x with lazy
 * preemption), by another task on the same CPU. Bio-based completions (dm, md, zram) run in
 * tasks, so a busy stack lost them. Then the first program is running and the second is
 * not: one of the two always runs. As on_rq_complete_again: while bio_done_busy says the
 * first is running on this CPU, a bio not tracked is a rescue too, not an I/O lost. */
static __always_inline int on_bio_complete_again(struct iodump_cpu_state *cs, __u32 lvl,
						 struct bio *bio, int btf)
{
	int busy = *(volatile __u8 *)&cs->bio_done_busy;

	return bio_complete(cs, lvl, bio, btf, busy ? IODUMP_RESCUE : IODUMP_AGAIN);
}

#endif /* IODUMP_COMPLETE_BPF_H */
