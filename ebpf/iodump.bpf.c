// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * iodump.bpf.c — kernel side of `iodump record`: the programs (SEC), which include the
 * rest by concern.
 *
 * One event per block I/O, emitted at completion, with the submitter taken where the I/O
 * enters the block layer:
 *
 *   request-based (virtio, SCSI, NVMe, loop):
 *       block_io_start                                  -> track the request
 *         (before 6.5: block_getrq tracks it under its bio, block_rq_insert or
 *          block_rq_issue re-keys it to the request)
 *       block_rq_issue                                  -> issue_ns, final sector/bytes
 *       block_rq_merge                                  -> drop the merged-away request
 *       block_rq_complete                               -> emit
 *   bio-based (zram, dm, md, nvme multipath head): only devices whose queue has no mq_ops
 *       block_bio_queue                                 -> track the bio (not a chained
 *                                                          one where its completion is not
 *                                                          traced: before 5.12.17/5.13)
 *       block_bio_complete                              -> emit
 *   writeback_dirty_folio (before 5.19: _page)          -> dirtiers[inode] = tgid
 *   syscalls/sys_exit_rename*, _unlink*, _link*         -> names_gen += 1 (paths.bpf.h)
 *
 * In-flight I/Os live in inflight_slots (lock-free slot table), with the LRU hash maps
 * inflight_rq / inflight_bio as fallback (iodump-noatomics.bpf.o, built with
 * IODUMP_NO_ATOMICS: no slot table, everything in those maps as plain hash maps). Every
 * program exists twice, SEC("tp_btf/...") (preferred) and SEC("raw_tp/...") (fallback),
 * except the raw_tp-only ones for the older argument lists (raw_getrq_q, raw_bio_queue_q)
 * and flush_batch; user space attaches one set, chosen by probing. Both share the bodies,
 * written once for both flavours (read.bpf.h).
 *
 * Where things are (each header opens with what it owns; included in this order, which is
 * the order of the maps, .rodata globals and global functions in the object):
 *   settings.bpf.h    the const volatile settings user space writes before load
 *   maps.bpf.h        the maps, and the kernel-only types of their values
 *   read.bpf.h        the two flavours: RD(), ptr_bits(), rdonly_cast()
 *   helpers.bpf.h     program enter/leave (nesting level), counters, ring-buffer flags
 *   core_fixes.bpf.h  ___old type flavours and helper probes for older kernels
 *   codes.bpf.h       kernel op / flag / status numbers -> iodump's
 *   file.bpf.h        the file behind a bio (resolve_bio)
 *   paths.bpf.h       path records (ensure_path, iodump_send_path, iodump_path_fp)
 *   inflight.bpf.h    the in-flight table: track, find, claim/release, untrack, adopt
 *   stack.bpf.h       I/O through stacked devices (dm, md, bcache): the upper I/O's origin below
 *   dirtier.bpf.h     who dirtied an inode's pages (on_dirty_folio)
 *   start.bpf.h       the start of an I/O (start_io; on_rq_start, on_getrq, on_bio_queue...)
 *   complete.bpf.h    issue, merge, completion (on_rq_issue ... on_bio_complete; batches)
 *   iodump.h          the records and constants shared with user space (record/src/abi.rs)
 *
 * See README.md for the layout of the records (iodump.h) and what was verified.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "iodump.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

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
#include "start.bpf.h"
#include "complete.bpf.h"

/* ---------------------------------------------------------------------------------------
 * Programs: tp_btf (preferred) and raw_tp (fallback), same bodies
 * ------------------------------------------------------------------------------------- */
/* Run a handler with this CPU's state and nesting level (see struct iodump_cpu_state). */
#define RUN(handler, ...)                                                                  \
	({                                                                                 \
		__u32 __lvl = 0;                                                           \
		struct iodump_cpu_state *__cs =                                             \
			bench_paused(IODUMP_BENCH_ALL) ? NULL : cpu_enter(&__lvl);         \
		if (__cs) {                                                                \
			handler(__cs, __lvl, __VA_ARGS__);                                 \
			cpu_leave(__cs, __lvl);                                            \
		}                                                                          \
		0;                                                                         \
	})

SEC("tp_btf/block_io_start")
int BPF_PROG(tp_io_start, struct request *rq)
{
	return RUN(on_rq_start, rq, BTF);
}

SEC("raw_tp/block_io_start")
int BPF_PROG(raw_io_start, struct request *rq)
{
	return RUN(on_rq_start, rq, RAW);
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(tp_rq_insert, struct request *rq)
{
	return RUN(on_rq_insert, rq, BTF);
}

SEC("raw_tp/block_rq_insert")
int BPF_PROG(raw_rq_insert, struct request *rq)
{
	return RUN(on_rq_insert, rq, RAW);
}

SEC("tp_btf/block_getrq")
int BPF_PROG(tp_getrq, struct bio *bio)
{
	return RUN(on_getrq, bio, BTF);
}

SEC("raw_tp/block_getrq")
int BPF_PROG(raw_getrq, struct bio *bio)
{
	return RUN(on_getrq, bio, RAW);
}

/* Before 5.11 block_getrq and block_bio_queue also passed the request_queue first. */
SEC("raw_tp/block_getrq")
int BPF_PROG(raw_getrq_q, struct request_queue *q, struct bio *bio)
{
	return RUN(on_getrq, bio, RAW);
}

SEC("raw_tp/block_bio_queue")
int BPF_PROG(raw_bio_queue_q, struct request_queue *q, struct bio *bio)
{
	return RUN(on_bio_queue, bio, RAW);
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(tp_rq_issue, struct request *rq)
{
	return RUN(on_rq_issue, rq, BTF);
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(raw_rq_issue, struct request *rq)
{
	return RUN(on_rq_issue, rq, RAW);
}

SEC("tp_btf/block_rq_merge")
int BPF_PROG(tp_rq_merge, struct request *rq)
{
	return RUN(on_rq_merge, rq, BTF);
}

SEC("raw_tp/block_rq_merge")
int BPF_PROG(raw_rq_merge, struct request *rq)
{
	return RUN(on_rq_merge, rq, RAW);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(tp_rq_done, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	return RUN(on_rq_complete, rq, error, nr_bytes, BTF);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(raw_rq_done, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	return RUN(on_rq_complete, rq, error, nr_bytes, RAW);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(tp_rq_done2, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	return RUN(on_rq_complete_again, rq, error, nr_bytes, BTF);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(raw_rq_done2, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	return RUN(on_rq_complete_again, rq, error, nr_bytes, RAW);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(tp_bio_queue, struct bio *bio)
{
	return RUN(on_bio_queue_first, bio, BTF);
}

SEC("raw_tp/block_bio_queue")
int BPF_PROG(raw_bio_queue, struct bio *bio)
{
	return RUN(on_bio_queue_first, bio, RAW);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(tp_bio_queue2, struct bio *bio)
{
	return RUN(on_bio_queue_again, bio, BTF);
}

SEC("raw_tp/block_bio_queue")
int BPF_PROG(raw_bio_queue2, struct bio *bio)
{
	return RUN(on_bio_queue_again, bio, RAW);
}

SEC("tp_btf/block_bio_complete")
int BPF_PROG(tp_bio_done, struct request_queue *q, struct bio *bio)
{
	return RUN(on_bio_complete, bio, BTF);
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(raw_bio_done, struct request_queue *q, struct bio *bio)
{
	return RUN(on_bio_complete, bio, RAW);
}

SEC("tp_btf/block_bio_complete")
int BPF_PROG(tp_bio_done2, struct request_queue *q, struct bio *bio)
{
	return RUN(on_bio_complete_again, bio, BTF);
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(raw_bio_done2, struct request_queue *q, struct bio *bio)
{
	return RUN(on_bio_complete_again, bio, RAW);
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(tp_dirty_folio, struct folio *folio, struct address_space *mapping)
{
	return RUN(on_dirty_folio, mapping, BTF);
}

SEC("raw_tp/writeback_dirty_folio")
int BPF_PROG(raw_dirty_folio, struct folio *folio, struct address_space *mapping)
{
	return RUN(on_dirty_folio, mapping, RAW);
}

/* Kernels before writeback_dirty_folio (5.19): the page flavour, same arguments' places. */
SEC("tp_btf/writeback_dirty_page")
int BPF_PROG(tp_dirty_page, struct page *page, struct address_space *mapping)
{
	return RUN(on_dirty_folio, mapping, BTF);
}

SEC("raw_tp/writeback_dirty_page")
int BPF_PROG(raw_dirty_page, struct page *page, struct address_space *mapping)
{
	return RUN(on_dirty_folio, mapping, RAW);
}

/*
 * Names changed: attached (perf tracepoint links, one per tracepoint) to syscalls'
 * sys_exit_rename, _renameat, _renameat2, _unlink, _unlinkat, _link and _linkat
 * where the kernel has them (CONFIG_FTRACE_SYSCALLS). It runs as the
 * syscall returns, so the generation has moved before the caller can submit I/O.
 */
SEC("tracepoint/syscalls/sys_exit_rename")
int on_names_changed(void *ctx)
{
	__u32 zero = 0;
	__u64 *g = bpf_map_lookup_elem(&names_gen, &zero);

	if (g)
		__sync_fetch_and_add(g, 1);
	cnt(IODUMP_CNT_NAMES_CHANGED);
	return 0;
}

/*
 * Not attached: user space runs it on one CPU with BPF_PROG_TEST_RUN and
 * BPF_F_TEST_RUN_ON_CPU (from an IPI when that CPU is not the caller's) to send that CPU's
 * batch now: on a timer, so no event waits long, and after detaching, so none is left.
 * If it interrupted one of our programs on that CPU (nesting level > 0), that program may
 * be appending to the batch: it leaves the batch alone and answers IODUMP_FLUSH_BUSY.
 */
SEC("raw_tp")
int flush_batch(void *ctx)
{
	__u32 zero = 0, lvl = 0;
	struct iodump_cpu_state *cs = cpu_enter(&lvl);
	struct iodump_batch *b;
	int ret = IODUMP_FLUSH_DONE;

	if (!cs)
		return IODUMP_FLUSH_DONE;
	if (lvl) {
		ret = IODUMP_FLUSH_BUSY;
	} else {
		b = bpf_map_lookup_elem(&batch, &zero);
		if (b)
			send_batch(b);
	}
	cpu_leave(cs, lvl);
	return ret;
}
