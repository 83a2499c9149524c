// SPDX-License-Identifier: GPL-2.0
/*
 * The least any recorder of bio start and completion costs: one program on each of
 * block_bio_queue and block_bio_complete (the hooks iodump uses for bio-based devices such as
 * zram), doing nothing, or (-DWITH_CLOCK) reading the clock once each, as a recorder of
 * latencies must. Benchmark only (bench/record-profile.sh, bench/record-ab.sh); built by
 * bench/floor/build.sh and loaded by bench/floor/load.py.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink SEC(".maps");

static __always_inline int body(void)
{
#ifdef WITH_CLOCK
	__u32 zero = 0;
	__u64 *s = bpf_map_lookup_elem(&sink, &zero);

	if (s)
		*s += bpf_ktime_get_ns(); /* kept, so the read is not optimised away */
#endif
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(floor_q, struct bio *bio)
{
	return body();
}

SEC("tp_btf/block_bio_complete")
int BPF_PROG(floor_c, struct request_queue *q, struct bio *bio)
{
	return body();
}
