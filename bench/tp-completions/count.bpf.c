// SPDX-License-Identifier: GPL-2.0
/*
 * Counts, for one block device major, how often each request tracepoint fires:
 * block_rq_issue, block_rq_complete (tp_btf and raw_tp, separately) and block_io_done.
 * Used by bench/tp-completions.sh to check, independently of iodump, whether the kernel
 * fires a completion tracepoint for every request the device's own statistics count.
 */
#include "../../ebpf/vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

const volatile int major = 7; /* set by the loader before load */

/* [0] block_rq_issue (raw_tp), [1] block_rq_complete (tp_btf),
 * [2] block_rq_complete (raw_tp), [3] block_io_done (raw_tp) */
__u64 counts[4];

static __always_inline int ours(struct request *rq)
{
	return BPF_CORE_READ(rq, q, disk, major) == major;
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(issue, struct request *rq)
{
	if (ours(rq))
		__sync_fetch_and_add(&counts[0], 1);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(complete_btf, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	if (rq->q->disk->major == major)
		__sync_fetch_and_add(&counts[1], 1);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(complete_raw, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	if (ours(rq))
		__sync_fetch_and_add(&counts[2], 1);
	return 0;
}

SEC("raw_tp/block_io_done")
int BPF_PROG(done, struct request *rq)
{
	if (ours(rq))
		__sync_fetch_and_add(&counts[3], 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
