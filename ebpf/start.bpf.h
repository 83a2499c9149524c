/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * start.bpf.h — the start of an I/O, in the submitter's context: the device it targets,
 * the filters, the submitter (pid, comm, cgroup, syscall), the file (file.bpf.h) and its
 * path record (paths.bpf.h), into a new in-flight entry (inflight.bpf.h). Handlers:
 * on_rq_start (block_io_start), on_getrq and on_rq_insert (kernels without
 * block_io_start), on_bio_queue (bio-based devices).
 */
#ifndef IODUMP_START_BPF_H
#define IODUMP_START_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "iodump.h"
#include "settings.bpf.h"
#include "maps.bpf.h"
#include "read.bpf.h"
#include "helpers.bpf.h"
#include "core_fixes.bpf.h"
#include "codes.bpf.h"
#include "file.bpf.h"
#include "paths.bpf.h"
#include "inflight.bpf.h"
#include "stack.bpf.h"
#include "dirtier.bpf.h"

/* The device an I/O targets: dev_t of the partition (or whole disk), its first sector, and
 * whether its queue is request-based (blk-mq). */
struct iodump_target {
	__u64 start_sect;
	__u32 dev;
	__u8 mq;
};

/* Count a request whose start was seen and not tracked (filtered, sampled out) when its
 * completion will count as IODUMP_CNT_NO_START (untracked_rq_complete in complete.bpf.h),
 * so that user space can take one from the other: not a passthrough command, nor an empty
 * REQ_PREFLUSH write (counted apart at their completion). */
static __always_inline void untracked_rq_start(__u64 opf, __u32 bytes)
{
	if (op_passthrough(opf) || empty_flush(opf, bytes))
		return;
	cnt(IODUMP_CNT_RQ_UNTRACKED);
}

static __always_inline int bdev_target(struct iodump_target *t, struct block_device *bdev,
				       int btf)
{
	if (!bdev)
		return -1;
	t->dev = RD(btf, bdev, bd_dev);
	t->start_sect = RD(btf, bdev, bd_start_sect);
	t->mq = RD(btf, bdev, bd_queue, mq_ops) != NULL;
	return 0;
}

/* The target of a bio; -1 if it has none. */
static __always_inline int bio_target(struct iodump_target *t, struct bio *bio, int btf)
{
	if (bpf_core_field_exists(struct bio, bi_bdev))
		return bdev_target(t, RD(btf, bio, bi_bdev), btf);

	struct bio___old *b = (void *)bio;
	struct gendisk___old *disk = BPF_CORE_READ(b, bi_disk);
	__u32 partno = BPF_CORE_READ(b, bi_partno);
	struct hd_struct___old *part = NULL;

	if (!disk)
		return -1;
	t->mq = BPF_CORE_READ(disk, queue, mq_ops) != NULL;
	if (!partno) {
		t->dev = BPF_CORE_READ(disk, part0.__dev.devt);
		t->start_sect = 0;
		return 0;
	}
	struct disk_part_tbl___old *tbl = BPF_CORE_READ(disk, part_tbl);

	if (!tbl)
		return -1;
	bpf_probe_read_kernel(&part, sizeof(part),
			      (void *)tbl + bpf_core_field_offset(struct disk_part_tbl___old, part) +
				      (partno & 0xff) * sizeof(part));
	if (!part)
		return -1;
	t->dev = BPF_CORE_READ(part, __dev.devt);
	t->start_sect = BPF_CORE_READ(part, start_sect);
	return 0;
}

/* x86_64 without KASAN: pt_regs sit at the top of the 16 KiB kernel stack */
#define IODUMP_THREAD_SIZE 16384

/* What the submitter is doing: syscall number, fault, or kernel thread. task: the current
 * task as a BTF-typed pointer (HAVE_TASK_BTF), else NULL and read through helpers. */
static __always_inline __u16 current_syscall(struct task_struct *task, __u8 *ioflags)
{
	struct task_struct *t = NULL;
	__u64 ax, orig_ax;
	__u32 flags;

	if (HAVE_TASK_BTF) {
		flags = task->flags;
	} else {
		t = (struct task_struct *)bpf_get_current_task();
		flags = BPF_CORE_READ(t, flags);
	}
	if (flags & PF_KTHREAD) {
		*ioflags |= IODUMP_IOF_KTHREAD;
		return IODUMP_SC_NONE;
	}
	if (!cfg_enable_syscall)
		return IODUMP_SC_NONE;
	/* A worker of io_uring (a request punted to io-wq) or its SQPOLL thread: user threads
	 * in no syscall of their own, whose registers are not the user's; the I/O is
	 * io_uring's. */
	if (flags & PF_IO_WORKER)
		return NR_IO_URING_ENTER;
	if (HAVE_TASK_PT_REGS && HAVE_TASK_BTF) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

		ax = regs->ax;
		orig_ax = regs->orig_ax;
	} else {
		struct pt_regs *regs;

		if (!t)
			t = (struct task_struct *)bpf_get_current_task();
		regs = (struct pt_regs *)((__u64)BPF_CORE_READ(t, stack) + IODUMP_THREAD_SIZE -
					  sizeof(struct pt_regs));
		ax = BPF_CORE_READ(regs, ax);
		orig_ax = BPF_CORE_READ(regs, orig_ax);
	}
	/* The syscall entry stores -ENOSYS in pt_regs->ax until the syscall returns;
	 * exceptions (page faults) keep the user's rax there. */
	if ((long)ax == -ENOSYS && orig_ax < IODUMP_SC_FAULT)
		return orig_ax;
	return IODUMP_SC_FAULT;
}

/*
 * Fill v for an I/O entering the block layer; returns 0 to track it, -1 if filtered out.
 * t: the partition (or whole disk) the I/O targets; bio: its (first) bio. any_dev: ignore
 * the device filter (a stacked device's I/O is kept for the devices below, stack.bpf.h).
 * An I/O a stacked device sent down takes its upper I/O's submitter, file and dirtier; the
 * upper one passed the process filters already.
 */
static __always_inline int start_io(struct iodump_inflight *v, const struct iodump_target *t,
				    struct bio *bio, __u64 opf, __u64 sector, __u32 bytes,
				    struct iodump_cpu_state *cs, __u32 lvl, int btf, int any_dev)
{
	struct iodump_file_info fi = {};
	struct iodump_inflight *up = NULL;
	struct task_struct *task = NULL;
	__u32 tgid = 0, pid = 0;
	__u64 now;
	__u8 op;
	int below = 0;
	v->ev.dev = t->dev;
	if (cfg_filter_dev && !any_dev && (lvl || cs->dev_ok != (__u64)v->ev.dev + 1)) {
		if (!bpf_map_lookup_elem(&dev_filter, &v->ev.dev)) {
			/* kept only if it does I/O of a device of filter_below (below) */
			if (!cfg_filter_below || !bio || !stack_active())
				goto filtered;
			below = 1;
		} else if (!lvl) {
			cs->dev_ok = (__u64)v->ev.dev + 1;
		}
	}
	op = norm_op(opf);
	if (empty_flush(opf, bytes))
		op = IODUMP_OP_FLUSH;
	if (!(cfg_op_mask & (1u << op)))
		goto filtered;
	now = bpf_ktime_get_ns();
	if (bio && stack_active())
		up = stack_find(cs, lvl, bio, now, btf);
	if (below && !(up && bpf_map_lookup_elem(&filter_below, &up->ev.dev)))
		goto filtered;
	if (up) {
		stack_inherit(v, up);
		goto fill;
	}

	/* the BTF-typed current task in both flavours: direct loads; its tgid and pid are what
	 * bpf_get_current_pid_tgid() returns, without a second helper call (~11 ns here) */
	if (HAVE_TASK_BTF) {
		task = bpf_get_current_task_btf();
		tgid = task->tgid;
		pid = task->pid;
	} else {
		__u64 pt = bpf_get_current_pid_tgid();

		task = NULL;
		tgid = pt >> 32;
		pid = (__u32)pt;
	}
	if (cfg_exclude_tgid && tgid == cfg_exclude_tgid)
		goto filtered;
	if (cfg_filter_pid && !bpf_map_lookup_elem(&pid_filter, &tgid)) {
		/* writeback by a flusher: accept if the pages' dirtier is wanted */
		if (!cfg_enable_dirtier || op != IODUMP_OP_WRITE)
			goto filtered;
		resolve_bio(&fi, cs, lvl, bio, opf, v->ev.dev, btf);
		if (!dirtier_wanted(&fi))
			goto filtered;
	}
	/* task->comm: two direct loads (bpf_get_current_comm costs ~50 ns here) */
	if (HAVE_TASK_BTF) {
		*(__u64 *)&v->ev.comm[0] = *(__u64 *)&task->comm[0];
		*(__u64 *)&v->ev.comm[8] = *(__u64 *)&task->comm[8];
	} else {
		bpf_get_current_comm(v->ev.comm, sizeof(v->ev.comm));
	}
	if (cfg_filter_comm && !bpf_map_lookup_elem(&comm_filter, v->ev.comm))
		goto filtered;
	if (cfg_filter_cgroup && bpf_current_task_under_cgroup(&cgroup_filter, 0) != 1)
		goto filtered;

	if (cfg_sample_every > 1) {
		/* every Nth I/O per CPU; an I/O started in an interrupt on top of another
		 * one (rare) is sampled at random instead of touching the counter */
		if (lvl ? bpf_get_prandom_u32() % cfg_sample_every :
			  ++cs->sample_ctr < cfg_sample_every) {
			cnt(IODUMP_CNT_SAMPLED_OUT);
			return -1;
		}
		if (!lvl)
			cs->sample_ctr = 0;
	}

fill:
	v->ev.kind = IODUMP_EV_IO;
	v->ev.op = op;
	v->ev.flags = norm_flags(opf);
	v->ev.sector = sector;
	v->ev.bytes = bytes;
	v->ev.start_ns = now;
	v->part_start = t->start_sect;
	if (up)
		return 0;
	v->ev.pid = tgid;
	v->ev.tid = pid;
	v->ev.cpu = bpf_get_smp_processor_id();
	v->ev.syscall = current_syscall(task, &v->ev.ioflags);

	if ((v->ev.ioflags & IODUMP_IOF_KTHREAD) && bio &&
	    bpf_core_field_exists(struct bio, bi_blkg)) {
		/* cgroup writeback: the bio is charged to the dirtier's cgroup (a kernel
		 * without CONFIG_BLK_CGROUP has no bi_blkg: user space says so) */
		struct blkcg_gq *blkg = RD(btf, bio, bi_blkg);

		if (blkg)
			v->ev.cgroup_id = RD(btf, blkg, blkcg, css.cgroup, kn, id);
	}
	if (!v->ev.cgroup_id)
		/* what bpf_get_current_cgroup_id() returns, as four loads from the BTF-typed
		 * task (the helper cost ~50 ns per I/O here) */
		v->ev.cgroup_id = btf && HAVE_TASK_BTF ? task->cgroups->dfl_cgrp->kn->id :
							 bpf_get_current_cgroup_id();

	if (op <= IODUMP_OP_WRITE) {
		if (!fi.done)
			resolve_bio(&fi, cs, lvl, bio, opf, v->ev.dev, btf);
		v->ev.path_kind = fi.kind;
		v->ev.ino_dev = fi.dev;
		if (fi.inode) {
			v->ev.ino = fi.ino;
			v->ev.ino_gen = fi.gen;
			if (cfg_enable_dirtier && op == IODUMP_OP_WRITE &&
			    fi.kind == IODUMP_PK_FILE) {
				__u64 ikey = (__u64)fi.inode;
				__u32 *dp = bpf_map_lookup_elem(&dirtiers, &ikey);

				if (dp) {
					if (cfg_exclude_tgid && *dp == cfg_exclude_tgid)
						goto filtered;
					v->ev.dirtier_pid = *dp;
					v->ev.ioflags |= IODUMP_IOF_DIRTIER;
				}
			}
			int sent = cfg_enable_paths && !bench_paused(IODUMP_BENCH_PATHS) ?
					   ensure_path(&fi, cs, lvl, v->ev.start_ns) : -1;

			if (sent > 0)
				v->ev.file_id = sent;
			else if (sent < 0)
				v->ev.ioflags |= IODUMP_IOF_PATH_LOST;
		}
	}
	return 0;

filtered:
	cnt(IODUMP_CNT_FILTERED);
	return -1;
}

/* A request-based stacked device's I/O (dm-multipath): kept for the requests it clones onto
 * the devices below (each clone's bios share the upper bios' arrays), under its first bio,
 * which owns the entry until the request completes (rq_complete). 1 when the I/O is then
 * not recorded itself (its device filtered out). */
static __always_inline int stack_push_rq(struct iodump_cpu_state *cs, __u32 lvl,
					 struct bio *bio, struct iodump_inflight *v, int btf)
{
	if (!bio)
		return 0;
	if (stack_push(cs, lvl, bio, key_of(cs, lvl, bio, btf), v, btf))
		stack_add_at(1, 1);
	if (cfg_filter_dev && !bpf_map_lookup_elem(&dev_filter, &v->ev.dev)) {
		cnt(IODUMP_CNT_FILTERED);
		return 1;
	}
	return 0;
}

static __always_inline int on_rq_start(struct iodump_cpu_state *cs, __u32 lvl,
				       struct request *rq, int btf)
{
	struct iodump_inflight v = {};
	struct iodump_target t = {};
	struct bio *bio;
	__u64 opf;
	__u32 bytes;
	int stacked;

	/* rq->part is not set yet when block_io_start fires (6.5+): use the bio's bdev */
	bio = RD(btf, rq, bio);
	if (bdev_target(&t, bio ? RD(btf, bio, bi_bdev) : RD(btf, rq, q, disk, part0), btf))
		return 0;
	stacked = stack_dev(t.dev);
	opf = RD(btf, rq, cmd_flags);
	bytes = RD(btf, rq, __data_len);
	if (start_io(&v, &t, bio, opf, RD(btf, rq, __sector), bytes, cs, lvl, btf, stacked) ||
	    (stacked && stack_push_rq(cs, lvl, bio, &v, btf))) {
		untracked_rq_start(opf, bytes);
		return 0;
	}
	track(&inflight_rq, key_of(cs, lvl, rq, btf), &v, 1);
	return 0;
}

/* The whole disk a request is on, from its queue (5.15+) or its rq_disk (before). */
static __always_inline int rq_disk_target(struct iodump_target *t, struct request *rq, int btf)
{
	if (bpf_core_field_exists(struct request_queue, disk))
		return bdev_target(t, RD(btf, rq, q, disk, part0), btf);

	struct gendisk___old *disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);

	if (!disk)
		return -1;
	t->dev = BPF_CORE_READ(disk, part0.__dev.devt);
	t->start_sect = 0;
	t->mq = 1;
	return 0;
}

/*
 * Kernels without block_io_start: a request that a request-based stacked device
 * (dm-multipath) cloned onto the device below is inserted without block_getrq, and issued
 * at once (blk_insert_cloned_request). It starts at its issue, from its upper I/O (the
 * clone's bios share the upper request's arrays, stack_push_rq); a request with no upper
 * I/O is left alone. Returns the new entry, or NULL.
 */
static __always_inline struct iodump_inflight *start_clone(struct iodump_cpu_state *cs,
							   __u32 lvl, struct request *rq,
							   __u64 key, struct iodump_slot **slot,
							   int btf)
{
	struct iodump_inflight v = {};
	struct iodump_target t = {};
	struct bio *bio = RD(btf, rq, bio);
	struct iodump_inflight *up;

	if (!bio || rq_disk_target(&t, rq, btf))
		return NULL;
	up = stack_find(cs, lvl, bio, bpf_ktime_get_ns(), btf);
	/* none; or the request's own entry: a stacked device's request filtered out at
	 * block_getrq after stack_push_rq */
	if (!up || up->ev.dev == t.dev)
		return NULL;
	if (start_io(&v, &t, bio, RD(btf, rq, cmd_flags), RD(btf, rq, __sector),
		     RD(btf, rq, __data_len), cs, lvl, btf, 0))
		return NULL;
	track(&inflight_rq, key, &v, 1);
	return find(&inflight_rq, key, slot);
}

/* Kernels without block_io_start: a clone of request-based device-mapper issued and not
 * tracked (start_clone: its upper I/O was filtered or sampled out, or its own device is
 * filtered out) completes as any request does; no start hook sees it, so count it here with
 * the requests not tracked on purpose. Known by its end_io, dm's end_clone_request (its
 * address from /proc/kallsyms: dm_mod loaded when recording began). */
static __always_inline void untracked_clone(struct request *rq, int btf)
{
	if (ksym_end_clone_request && (__u64)RD(btf, rq, end_io) == ksym_end_clone_request)
		untracked_rq_start(RD(btf, rq, cmd_flags), RD(btf, rq, __data_len));
}

/*
 * Kernels without block_io_start: block_getrq fires in the submitter's context when a bio
 * gets a new request, before the request holds it. The I/O is tracked under the bio's
 * address (with IODUMP_KEY_GETRQ: a bio-based device above may track the same bio as its
 * own I/O); adopt() moves it to the request's once block_rq_insert (a scheduler) or
 * block_rq_issue (every request, also those issued directly without an insert, as with
 * the `none` scheduler) shows the request.
 */
static __always_inline int on_getrq(struct iodump_cpu_state *cs, __u32 lvl, struct bio *bio,
				    int btf)
{
	struct iodump_inflight v = {};
	struct iodump_target t = {};
	__u64 opf;
	__u32 bytes;
	int stacked;

	if (!bio || bio_target(&t, bio, btf))
		return 0;
	stacked = stack_dev(t.dev);
	opf = RD(btf, bio, bi_opf);
	bytes = RD(btf, bio, bi_iter.bi_size);
	if (start_io(&v, &t, bio, opf, RD(btf, bio, bi_iter.bi_sector), bytes, cs, lvl, btf,
		     stacked) ||
	    (stacked && stack_push_rq(cs, lvl, bio, &v, btf))) {
		untracked_rq_start(opf, bytes);
		return 0;
	}
	v.ev.ioflags |= IODUMP_IOF_INSERT;
	track(&inflight_rq, key_of(cs, lvl, bio, btf) | IODUMP_KEY_GETRQ, &v, 1);
	return 0;
}
static __always_inline int on_rq_insert(struct iodump_cpu_state *cs, __u32 lvl,
					struct request *rq, int btf)
{
	__u64 key = key_of(cs, lvl, rq, btf);
	struct iodump_slot *slot;

	if (!find(&inflight_rq, key, &slot))
		adopt(cs, lvl, rq, key, &slot, btf);
	return 0;
}

static __always_inline int on_bio_queue(struct iodump_cpu_state *cs, __u32 lvl,
					struct bio *bio, int btf)
{
	struct iodump_inflight v = {};
	struct iodump_target t = {};

	if (bio_target(&t, bio, btf))
		return 0;
	/* Request-based (blk-mq) devices are tracked per request; their bios also pass
	 * block_bio_queue and must not be counted twice. */
	if (t.mq)
		return 0;
	/* block_bio_queue runs after blk_partition_remap: bi_sector is whole-disk based
	 * (checked on 6.18 with a loop partition); start_io stores bd_start_sect to subtract */
	int stacked = stack_dev(t.dev);
	__u64 key;

	if (start_io(&v, &t, bio, RD(btf, bio, bi_opf), RD(btf, bio, bi_iter.bi_sector),
		     RD(btf, bio, bi_iter.bi_size), cs, lvl, btf, stacked))
		return 0;
	v.ev.ioflags |= IODUMP_IOF_BIO_BASED;
	key = key_of(cs, lvl, bio, btf);
	if (stacked) {
		stack_push(cs, lvl, bio, key, &v, btf);
		if (cfg_filter_dev && !bpf_map_lookup_elem(&dev_filter, &v.ev.dev)) {
			cnt(IODUMP_CNT_FILTERED);
			return 0;
		}
	}
	/* a chained bio whose completion this kernel will not trace: kept above for the
	 * I/O it sends below (stack_push), not tracked (it would never end) */
	if (cfg_chain_untraced && ksym_bio_chain_endio &&
	    (__u64)RD(btf, bio, bi_end_io) == ksym_bio_chain_endio) {
		cnt(IODUMP_CNT_CHAIN_UNTRACED);
		return 0;
	}
	track(&inflight_bio, key, &v, 1);
	return 0;
}

/* The first program on block_bio_queue: notes the bio it begins, for the second. */
static __always_inline int on_bio_queue_first(struct iodump_cpu_state *cs, __u32 lvl,
					      struct bio *bio, int btf)
{
	cs->queued_key = key_of(cs, lvl, bio, btf);
	return on_bio_queue(cs, lvl, bio, btf);
}

/* The second program on block_bio_queue runs after the first on every bio and finds the
 * bio the first noted, except when the kernel skipped the first because it was already
 * running on this CPU: a bio submitted from an interrupt while the first ran in a task, or,
 * on kernels whose tracing programs can be preempted (7.x with lazy preemption), by another
 * task on the same CPU. Then it does the bio itself, unless the bio is tracked already (the
 * first ran, and another task's first program ran between the two). */
static __always_inline int on_bio_queue_again(struct iodump_cpu_state *cs, __u32 lvl,
					      struct bio *bio, int btf)
{
	__u64 key = key_of(cs, lvl, bio, btf);
	struct iodump_slot *slot;

	if (cs->queued_key == key) {
		cs->queued_key = 0;
		return 0;
	}
	if (find(&inflight_bio, key, &slot))
		return 0;
	cnt(IODUMP_CNT_QUEUE_RESCUED);
	return on_bio_queue(cs, lvl, bio, btf);
}

#endif /* IODUMP_START_BPF_H */
