/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * helpers.bpf.h — small helpers every part uses: entering and leaving a program
 * (cpu_enter/cpu_leave: the per-CPU state and the nesting level), the counters, the ring
 * buffer's wake-up flags, the benchmark switch (bench_ctl), and the few kernel constants
 * vmlinux.h does not carry (it has no #defines).
 */
#ifndef IODUMP_HELPERS_BPF_H
#define IODUMP_HELPERS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "iodump.h"
#include "settings.bpf.h"
#include "maps.bpf.h"

#define compiler_barrier() asm volatile("" ::: "memory")

/* Enter/leave a program: see struct iodump_cpu_state. */
static __always_inline struct iodump_cpu_state *cpu_enter(__u32 *lvl)
{
	__u32 zero = 0;
	struct iodump_cpu_state *cs = bpf_map_lookup_elem(&cpu_state, &zero);

	if (!cs)
		return NULL;
	*lvl = *(volatile __u32 *)&cs->nest;
	*(volatile __u32 *)&cs->nest = *lvl + 1;
	compiler_barrier();
	return cs;
}

static __always_inline void cpu_leave(struct iodump_cpu_state *cs, __u32 lvl)
{
	compiler_barrier();
	*(volatile __u32 *)&cs->nest = lvl;
}

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h, stable since 2.6 */
#define PF_IO_WORKER 0x00000010 /* io_uring's own threads (iou-wrk-*, iou-sqp-*), since 5.5 */
#define NR_IO_URING_ENTER 426 /* x86-64 */
#define S_IFMT     00170000
#define S_IFBLK    0060000
#define ENOSYS     38
#define EEXIST     17
#define MAPPING_FLAGS 3UL /* low bits of folio->mapping: PAGE_MAPPING_ANON=1, MOVABLE=2 */
#define BTRFS_BTREE_INODE_OBJECTID 1

static __always_inline void cnt_add(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		__sync_fetch_and_add(c, n);
}

static __always_inline void cnt(__u32 idx)
{
	cnt_add(idx, 1);
}

/*
 * Wake-up policy for ring buffer submissions: no wake-up unless at least cfg_wakeup_bytes
 * are waiting; the consumer also polls on a timer. Asking the ring buffer how much is
 * waiting reads the consumer's position, a cache line the consumer keeps writing (~70 ns
 * here), so each CPU asks only on every 16th record it submits.
 */
static __always_inline __u64 rb_flags(void)
{
	__u32 zero = 0;
	struct iodump_cpu_state *cs;

	if (!cfg_wakeup_bytes)
		return 0; /* kernel default: wake when the consumer has caught up */
	cs = bpf_map_lookup_elem(&cpu_state, &zero);
	if (cs && (++cs->rb_ctr & 15))
		return BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= cfg_wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/* bench_ctl[0] & what: paused by a benchmark (IODUMP_BENCH_*). */
static __always_inline int bench_paused(__u32 what)
{
	__u32 zero = 0, *p;

	if (!cfg_bench_ctl)
		return 0;
	p = bpf_map_lookup_elem(&bench_ctl, &zero);
	return p && (*p & what);
}
#define IODUMP_BENCH_PATHS 1u
#define IODUMP_BENCH_ALL   2u

#endif /* IODUMP_HELPERS_BPF_H */
