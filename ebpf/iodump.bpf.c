// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * iodump.bpf.c — kernel side of `iodump record`.
 *
 * One event per block I/O, emitted at completion, with the submitter taken where the I/O
 * enters the block layer:
 *
 *   request-based (virtio, SCSI, NVMe, loop):
 *       block_io_start (or block_rq_insert, fallback)  -> track the request
 *       block_rq_issue                                  -> issue_ns, final sector/bytes
 *       block_rq_merge                                  -> drop the merged-away request
 *       block_rq_complete                               -> emit
 *   bio-based (zram, dm, md, nvme multipath head): only devices whose queue has no mq_ops
 *       block_bio_queue                                 -> track the bio
 *       block_bio_complete                              -> emit
 *   writeback_dirty_folio                               -> dirtiers[inode] = tgid
 *
 * In-flight I/Os live in inflight_slots (lock-free slot table), with the LRU hash maps
 * inflight_rq / inflight_bio as fallback. Every program exists twice: SEC("tp_btf/...")
 * (preferred) and SEC("raw_tp/...") (fallback); user space attaches one set, chosen by
 * probing. Both share the bodies below; see "Reading kernel memory" for how they read.
 *
 * See README.md for the layout of the records (iodump.h) and what was verified.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "iodump.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * IODUMP_NO_ATOMICS (ebpf/build.sh builds iodump-noatomics.bpf.o with it): for kernels
 * that refuse BPF atomic compare-and-exchange (before 5.12), anywhere in a program, even in
 * code never run. Without it there is no lock-free slot table: every in-flight I/O lives in
 * the hash maps inflight_rq / inflight_bio (plain hash maps, so that a full map refuses an
 * entry, counted, instead of evicting a live one), and file ids are allocated per CPU.
 */
#ifdef IODUMP_NO_ATOMICS
#define IODUMP_INFLIGHT_MAP_TYPE BPF_MAP_TYPE_HASH
#else
#define IODUMP_INFLIGHT_MAP_TYPE BPF_MAP_TYPE_LRU_HASH
#endif

/* ---------------------------------------------------------------------------------------
 * Settings, written by user space before load (read-only for the program, so the verifier
 * prunes disabled branches).
 * ------------------------------------------------------------------------------------- */
const volatile __u32 cfg_filter_dev = 0;     /* 1: only devs present in dev_filter */
const volatile __u32 cfg_filter_pid = 0;     /* 1: only tgids in pid_filter (or, for
                                              * page-cache writes, whose dirtier is) */
const volatile __u32 cfg_filter_comm = 0;    /* 1: only comms in comm_filter */
const volatile __u32 cfg_filter_cgroup = 0;  /* 1: only tasks under cgroup_filter[0] */
const volatile __u32 cfg_op_mask = 0x7f;     /* bit (1 << IODUMP_OP_x) set = record op x */
const volatile __u32 cfg_min_bytes = 0;      /* drop completed I/Os smaller than this */
const volatile __u32 cfg_max_bytes = 0;      /* drop completed I/Os larger; 0 = no limit */
const volatile __u32 cfg_sample_every = 1;   /* record 1 I/O in N (per CPU); 0/1 = all */
const volatile __u32 cfg_enable_paths = 1;   /* send path records */
const volatile __u32 cfg_enable_dirtier = 1; /* track writeback dirtiers */
const volatile __u32 cfg_enable_syscall = 1; /* read the submitter's syscall number */
const volatile __u32 cfg_exclude_tgid = 0;   /* ignore I/O of this tgid (the recorder) and
                                              * writeback of pages it dirtied; 0 = none */
/* 1: honour the map bench_ctl (benchmarks only, `iodump record --bench-ctl`); 0: the
 * verifier removes its checks, so a normal recording pays nothing for it */
const volatile __u32 cfg_bench_ctl = 0;
/* 1: requests start at block_getrq (kernels without block_io_start, before 6.5): tracked
 * under their first bio's address until block_rq_insert or block_rq_issue re-keys them */
const volatile __u32 cfg_start_at_getrq = 0;
const volatile __u64 cfg_wakeup_bytes = 65536; /* wake the consumer only when at least this
                                                * much data is pending; 0 = kernel default
                                                * (wake when the consumer has caught up) */

/* Kernel function addresses from /proc/kallsyms (0 = unknown, feature off). */
const volatile __u64 ksym_bio_chain_endio = 0;
const volatile __u64 ksym_iomap_dio_bio_end_io = 0;
const volatile __u64 ksym_blkdev_bio_end_io = 0;
const volatile __u64 ksym_blkdev_bio_end_io_async = 0;
const volatile __u64 ksym_btrfs_simple_end_io = 0;
const volatile __u64 ksym_btrfs_orig_write_end_io = 0;
const volatile __u64 ksym_btrfs_clone_write_end_io = 0;
const volatile __u64 ksym_submit_bio_wait_endio = 0;
const volatile __u64 ksym_xfs_buf_bio_end_io = 0;
const volatile __u64 ksym_xlog_bio_end_io = 0;

/* BTF ids of btrfs's structs in the running kernel's vmlinux BTF, for rdonly_cast() (0: not
 * there, e.g. btrfs is a module: its types are in module BTF, which rdonly_cast does not
 * take; the btrfs reads then go through bpf_probe_read_kernel). Set by user space, which
 * finds them in vmlinux BTF: a bpf_core_type_id_kernel() relocation of a type the kernel
 * lacks would fail the whole object in aya-obj 0.3. */
const volatile __u32 cfg_btf_id_btrfs_bio = 0;
const volatile __u32 cfg_btf_id_btrfs_inode = 0;

/* ---------------------------------------------------------------------------------------
 * Maps
 * ------------------------------------------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* bytes; user space may override (power of 2) */
} events SEC(".maps");

/*
 * In-flight I/Os live in a slot table first: an array indexed by a hash of the request or
 * bio address, claimed with compare-and-swap. Array lookups are inlined by the verifier
 * and take no lock, where a hash-map update + lookup + delete cost ~300 ns per I/O on
 * this machine. A slot already owned by another in-flight I/O sends the new one to the
 * LRU hash maps below (inflight_rq / inflight_bio), which are also bounded.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IODUMP_SLOTS); /* fixed: the hash uses IODUMP_SLOT_BITS */
	__type(key, __u32);
	__type(value, struct iodump_slot);
} inflight_slots SEC(".maps");

/* Each CPU's batch of completed I/O events (see "Batches" in iodump.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iodump_batch);
} batch SEC(".maps");

/* [0]: events per batch, 0 = no batching (every event is its own record). Set by user
 * space after load, once it knows it can flush the batches (flush_batch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} batch_cfg SEC(".maps");

/* [0], bit 0: skip path resolution for now (as if cfg_enable_paths were 0, events flagged
 * IODUMP_IOF_PATH_LOST); bit 1: every tracing program returns at once (the recorder is
 * attached but does nothing). Never set by iodump: bench/paths-ab.sh and bench/record-ab.sh
 * flip them with bpftool every second during one fio run, to measure what paths, or the
 * whole recorder, cost with both states under the same conditions; only read when
 * cfg_bench_ctl is set. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} bench_ctl SEC(".maps");

/* [0]: number of entries currently in the LRU fallback maps, so that completions of
 * untracked I/O (filtered out, other devices) skip the hash lookup while it is 0. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} fallback_live SEC(".maps");

struct {
	__uint(type, IODUMP_INFLIGHT_MAP_TYPE);
	__uint(max_entries, 16384); /* fallback only: slot collisions */
	__type(key, __u64); /* struct request * */
	__type(value, struct iodump_inflight);
} inflight_rq SEC(".maps");

struct {
	__uint(type, IODUMP_INFLIGHT_MAP_TYPE);
	__uint(max_entries, 16384); /* fallback only: slot collisions */
	__type(key, __u64); /* struct bio * */
	__type(value, struct iodump_inflight);
} inflight_bio SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IODUMP_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* A file whose path record was sent: with which file_id, in which epoch (about a second,
 * start_ns >> 30) its names were last checked, and their fingerprint then (see
 * iodump_path_fp()): a rename changes the fingerprint, and the path is sent again. */
struct iodump_seen_val {
	__u32 id;
	__u32 epoch;
	__u64 fp;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct iodump_inode_key);
	__type(value, struct iodump_seen_val);
} seen_inodes SEC(".maps");

/* The last file_id given to a path record (iodump_path_event.file_id). 64 bits: the BPF
 * compare-and-swap this takes without -mcpu=v3 is 64-bit only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} file_id_last SEC(".maps");

/* Per-CPU cache in front of seen_inodes: a 32-bit tag of an inode's (ino, dev, gen) found
 * here means its path was sent; this saves the LRU-hash lookup. Every I/O of a workload
 * spread over thousands of files touches one set, and with each I/O's data going through
 * the cache the set is rarely still in L2 by its next use: the table is kept small (16 KiB
 * per CPU, half of what profiling showed at 64 KiB), so it holds tags only. The file_id is
 * not kept: an I/O found here carries file_id 0 and user space finds its path record by
 * (ino_dev, ino, ino_gen). 16-way set associative, most recent first, 256 sets of one
 * 64-byte cache line. Level 0 only. A new inode is taken for a sent one (and its path never
 * sent: user space counts its events as `[unknown]`) only if its tag equals one of the 16
 * in its set: about 4e-9 per new inode. */
#define IODUMP_SEEN_SET_BITS  8
#define IODUMP_SEEN_WAYS      16
struct iodump_seen_set {
	__u32 tag[IODUMP_SEEN_WAYS];
};
struct iodump_seen_cache {
	struct iodump_seen_set set[1u << IODUMP_SEEN_SET_BITS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iodump_seen_cache);
} seen_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);   /* struct inode * of the page-cache host */
	__type(value, __u32); /* tgid that last dirtied one of its pages */
} dirtiers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* dev, kernel encoding; add a disk's partitions explicitly */
	__type(value, __u8);
} dev_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tgid */
	__type(value, __u8);
} pid_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, char[16]); /* comm, NUL-padded to 16 bytes */
	__type(value, __u8);
} comm_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32); /* cgroup directory fd, set by user space */
} cgroup_filter SEC(".maps");

/*
 * Per-CPU state: sampling counter and one-entry caches that save hash lookups and reads.
 *
 * Programs can nest on one CPU (a completion interrupt runs tp_rq_done while tp_io_start
 * is running). Every program increments `nest` on entry and restores it on exit, so a
 * program knows its level: only level 0 uses the caches and the sampling counter, and
 * each level has its own launder word, so an interrupting program never tears state that
 * the interrupted one is in the middle of using.
 */
struct iodump_cpu_state {
	__u32 nest;
	__u32 seen_id; /* ensure_path's answer for seen_ino/seen_dev/seen_gen */
	__u64 sample_ctr;
	/* last inode whose path record is known to be sent */
	__u64 seen_ino;
	__u32 seen_dev;
	__u32 seen_gen;
	/* last (inode, tgid) written to dirtiers */
	__u64 dirty_inode;
	__u32 dirty_tgid;
	__u32 seen_ok; /* seen_ino/seen_dev/seen_gen/seen_id are set, in epoch seen_epoch */
	/* last direct-I/O inode: (address, i_ino, i_generation) -> the rest of its identity */
	__u64 dio_inode;
	__u64 dio_ino;
	__u32 dio_gen;
	__u32 dio_dev;
	__u32 dio_sb_dev;
	__u8 dio_kind;
	__u8 _pad1[3];
	/* scratch words, one per nesting level, see ptr_bits() */
	__u64 launder[4];
	/* records submitted on this CPU, see rb_flags() */
	__u64 rb_ctr;
	/* last device dev_filter accepted (+1; 0: none yet): the map is filled before attach
	 * and never changes, so its answer for a device can be kept */
	__u64 dev_ok;
	/* file ids taken on this CPU (IODUMP_NO_ATOMICS only, see next_file_id()) */
	__u64 file_ctr;
	__u32 seen_epoch;
	__u32 _pad2;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iodump_cpu_state);
} cpu_state SEC(".maps");

/* Per-CPU scratch for building a path record (too big for the 512-byte stack). */
struct iodump_path_scratch {
	/* a struct iodump_path_event followed by room for names[] plus one component of
	 * slack, so the verifier sees every write in bounds */
	__u64 raw[(sizeof(struct iodump_path_event) + IODUMP_PATH_BUF + IODUMP_NAME_MAX) / 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iodump_path_scratch);
} path_scratch SEC(".maps");

/* ---------------------------------------------------------------------------------------
 * Reading kernel memory: one body, two program flavours
 *
 * RD(btf, p, a, b, ...) reads p->a->b... Every program body below is written once and
 * instantiated twice with a constant `btf` argument (the functions are always_inline, so
 * the compiler drops the other branch):
 *   - BTF (tp_btf programs): the tracepoint arguments are BTF-typed pointers, so RD is a
 *     plain dereference: one load instruction, CO-RE relocated all the same (vmlinux.h
 *     types carry preserve_access_index), faults handled by the BPF exception table.
 *   - RAW (raw_tp programs): the arguments are plain numbers to the verifier, so RD is
 *     BPF_CORE_READ (bpf_probe_read_kernel with CO-RE relocation).
 * Measured on this machine: one bpf_probe_read_kernel costs about 30 ns; the whole start
 * handler went from ~1.1 us to a fraction of that with direct loads.
 * Pointers that come out of a helper or arithmetic (bi_private, container_of, a compound
 * page head) are plain numbers in both flavours and are read with BPF_CORE_READ, except
 * the iomap direct-I/O chain and btrfs's containers (every btrfs data I/O), which the BTF
 * flavour turns into BTF-typed pointers with rdonly_cast() (below).
 * ------------------------------------------------------------------------------------- */
#define BTF 1
#define RAW 0

#define IOD_NARG(...) IOD_NARG_(__VA_ARGS__, 7, 6, 5, 4, 3, 2, 1, 0)
#define IOD_NARG_(_1, _2, _3, _4, _5, _6, _7, N, ...) N
#define IOD_CAT(a, b) IOD_CAT_(a, b)
#define IOD_CAT_(a, b) a##b
#define IOD_ARROW2(a, b) (a)->b
#define IOD_ARROW3(a, b, c) (a)->b->c
#define IOD_ARROW4(a, b, c, d) (a)->b->c->d
#define IOD_ARROW5(a, b, c, d, e) (a)->b->c->d->e
#define IOD_ARROW6(a, b, c, d, e, f) (a)->b->c->d->e->f
#define IOD_ARROW7(a, b, c, d, e, f, g) (a)->b->c->d->e->f->g
#define IOD_DIRECT(...) IOD_CAT(IOD_ARROW, IOD_NARG(__VA_ARGS__))(__VA_ARGS__)

#define RD(btf, ...) ((btf) ? IOD_DIRECT(__VA_ARGS__) : BPF_CORE_READ(__VA_ARGS__))

/*
 * The numeric value of a pointer, to test its low bits (folio->mapping flags). The
 * verifier refuses bit operations on a typed pointer; a privileged program (tracing
 * programs always are: CAP_BPF + CAP_PERFMON) may store a pointer into a map value and
 * load it back as a number. In the RAW flavour the pointer already is a number.
 */
static __always_inline __u64 ptr_bits(struct iodump_cpu_state *cs, __u32 lvl, const void *p,
				      int btf)
{
	volatile __u64 *w = &cs->launder[lvl & 3];

	if (!btf)
		return (__u64)p;
	*w = (__u64)p;
	return *w;
}

/* The address of a request or bio as a number (map key, slot hash). */
static __always_inline __u64 key_of(struct iodump_cpu_state *cs, __u32 lvl, const void *p,
				    int btf)
{
	return ptr_bits(cs, lvl, p, btf);
}

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

/* ---------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------- */
#define PF_KTHREAD 0x00200000 /* include/linux/sched.h, stable since 2.6 */
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

/* REQ_OP_* -> IODUMP_OP_*; the kernel's numbers come from its BTF: enum req_op, or enum
 * req_opf before 5.19 (the values the flavour below gives are never used: CO-RE relocates
 * them; the flavour the kernel lacks is dead code). */
enum req_opf___old {
	REQ_OP_READ___old = 0,
	REQ_OP_WRITE___old = 1,
	REQ_OP_FLUSH___old = 2,
	REQ_OP_DISCARD___old = 3,
	REQ_OP_SECURE_ERASE___old = 5,
	REQ_OP_WRITE_ZEROES___old = 9,
	REQ_OP_ZONE_APPEND___old = 13,
};

#define REQ_OP_VAL(x)                                                                      \
	(bpf_core_type_exists(enum req_op) ? bpf_core_enum_value(enum req_op, x) :          \
					     bpf_core_enum_value(enum req_opf___old, x##___old))

static __always_inline __u8 norm_op(__u32 opf)
{
	__u32 op = opf & 0xff; /* REQ_OP_MASK: REQ_OP_BITS = 8 */

	if (op == REQ_OP_VAL(REQ_OP_READ))
		return IODUMP_OP_READ;
	if (op == REQ_OP_VAL(REQ_OP_WRITE))
		return IODUMP_OP_WRITE;
	if (op == REQ_OP_VAL(REQ_OP_FLUSH))
		return IODUMP_OP_FLUSH;
	if (op == REQ_OP_VAL(REQ_OP_DISCARD))
		return IODUMP_OP_DISCARD;
	if (op == REQ_OP_VAL(REQ_OP_SECURE_ERASE))
		return IODUMP_OP_SECURE_ERASE;
	if (op == REQ_OP_VAL(REQ_OP_WRITE_ZEROES))
		return IODUMP_OP_WRITE_ZEROES;
	if (op == REQ_OP_VAL(REQ_OP_ZONE_APPEND))
		return IODUMP_OP_WRITE;
	return IODUMP_OP_OTHER;
}

#define REQ_BIT(b) (1ULL << bpf_core_enum_value(enum req_flag_bits, b))

/* REQ_* bits -> IODUMP_F_*; bit numbers come from the kernel's BTF (enum req_flag_bits). */
static __always_inline __u8 norm_flags(__u64 opf)
{
	__u8 f = 0;

	if (opf & REQ_BIT(__REQ_SYNC))
		f |= IODUMP_F_SYNC;
	if (opf & REQ_BIT(__REQ_META))
		f |= IODUMP_F_META;
	if (opf & REQ_BIT(__REQ_FUA))
		f |= IODUMP_F_FUA;
	if (opf & REQ_BIT(__REQ_PREFLUSH))
		f |= IODUMP_F_PREFLUSH;
	if (opf & REQ_BIT(__REQ_RAHEAD))
		f |= IODUMP_F_READAHEAD;
	if (opf & REQ_BIT(__REQ_BACKGROUND))
		f |= IODUMP_F_BACKGROUND;
	if (opf & REQ_BIT(__REQ_NOWAIT))
		f |= IODUMP_F_NOWAIT;
	return f;
}

/* blk_status_t -> positive errno (block/blk-core.c blk_errors[]). */
static __always_inline __u16 status_errno(__u32 st)
{
	switch (st & 0xff) {
	case 0:  return 0;
	case 1:  return 95;  /* BLK_STS_NOTSUPP         EOPNOTSUPP */
	case 2:  return 110; /* BLK_STS_TIMEOUT         ETIMEDOUT */
	case 3:  return 28;  /* BLK_STS_NOSPC           ENOSPC */
	case 4:  return 67;  /* BLK_STS_TRANSPORT       ENOLINK */
	case 5:  return 121; /* BLK_STS_TARGET          EREMOTEIO */
	case 6:  return 52;  /* BLK_STS_RESV_CONFLICT   EBADE */
	case 7:  return 61;  /* BLK_STS_MEDIUM          ENODATA */
	case 8:  return 84;  /* BLK_STS_PROTECTION      EILSEQ */
	case 9:  return 12;  /* BLK_STS_RESOURCE        ENOMEM */
	case 10: return 5;   /* BLK_STS_IOERR           EIO */
	case 11: return 78;  /* BLK_STS_DM_REQUEUE      EREMCHG */
	case 12: return 11;  /* BLK_STS_AGAIN           EAGAIN */
	case 13: return 16;  /* BLK_STS_DEV_RESOURCE    EBUSY */
	case 14: return 109; /* BLK_STS_ZONE_OPEN_RESOURCE   ETOOMANYREFS */
	case 15: return 75;  /* BLK_STS_ZONE_ACTIVE_RESOURCE EOVERFLOW */
	case 16: return 19;  /* BLK_STS_OFFLINE         ENODEV */
	case 17: return 62;  /* BLK_STS_DURATION_LIMIT  ETIME */
	case 18:             /* BLK_STS_INVAL after the 2025 renumbering fix */
	case 19: return 22;  /* BLK_STS_INVAL (6.11+)   EINVAL */
	default: return 5;   /* unknown: EIO, as blk_status_to_errno does */
	}
}

/* ---------------------------------------------------------------------------------------
 * The file behind a bio
 * ------------------------------------------------------------------------------------- */
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

/*
 * bpf_rdonly_cast(p, btf_id): the kernel function (a kfunc, since 6.2) that lets a program
 * read through a pointer it only has as a number with direct loads (faults handled by the
 * exception table), where bpf_probe_read_kernel costs ~30 ns a call. aya-obj 0.3 has no
 * `__ksym` externs, so the call is emitted as a helper call with a placeholder number, and
 * user space (record/src/bpf.rs) rewrites it into a kfunc call with the function's BTF id
 * in the running kernel. Without the function the placeholder stays, the tp_btf programs
 * fail to load, and the raw_tp ones (which do not use it) are attached.
 */
#define IODUMP_KFUNC_RDONLY_CAST 0x1d0dca57
static __always_inline void *rdonly_cast(__u64 p, __u32 btf_id)
{
	void *r;

	asm volatile("r1 = %[p]\n\t"
		     "r2 = %[id]\n\t"
		     "call %[fn]\n\t"
		     "%[r] = r0"
		     : [r] "=r"(r)
		     : [p] "r"(p), [id] "r"(btf_id), [fn] "i"(IODUMP_KFUNC_RDONLY_CAST)
		     : "r0", "r1", "r2", "r3", "r4", "r5", "memory");
	return r;
}

/* A pointer held as a number (bi_private, a container_of result), as a pointer to `type`
 * each flavour reads with RD(): BTF-typed through rdonly_cast() in the BTF flavour, the
 * number itself (read with BPF_CORE_READ) in the RAW one. */
#define IOD_CAST(bits, type, btf)                                                          \
	((type *)((btf) ? rdonly_cast((bits), bpf_core_type_id_kernel(type)) : (void *)(bits)))

/* page->flags: an unsigned long until 6.17, a memdesc_flags_t (a struct holding one) since;
 * the relocation of the flavour the kernel does not have is dead code. */
struct page___ulong_flags {
	unsigned long flags;
} __attribute__((preserve_access_index));

static __always_inline __u64 page_flags(const void *page)
{
	__u64 f = 0;

	if (bpf_core_field_exists(struct page___ulong_flags, flags))
		bpf_core_read(&f, sizeof(f), &((struct page___ulong_flags *)page)->flags);
	else
		bpf_core_read(&f, sizeof(f), &((struct page *)page)->flags);
	return f;
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
	struct file *file = RD(btf, d, iocb, ki_filp);
	struct inode *inode = RD(btf, file, f_inode);
	__u64 ino;
	__u32 gen;

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

	if (page) {
		/* compound_head shares its offset with lru.next: the verifier types it as a
		 * pointer, so take its bits through ptr_bits() as well */
		__u64 head = ptr_bits(cs, lvl, (const void *)RD(btf, page, compound_head), btf);

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

/* ---------------------------------------------------------------------------------------
 * Path records: once per (dev, ino, gen). Runs once per inode, so it reads with
 * BPF_CORE_READ throughout and does not care about speed.
 * ------------------------------------------------------------------------------------- */

/* A new file_id: the last one plus one, by compare-and-swap (a fetch-and-add returning the
 * old value needs -mcpu=v3; a 64-bit cmpxchg does not). 0 if 16 attempts in a row lost a
 * race. Called before the dentry walk: after it, the loop's branches would be verified once
 * per state the walk can end in. */
#ifdef IODUMP_NO_ATOMICS
/* Per CPU, without atomics: the CPU's own counter (cpu_state) striped by CPU number, so
 * ids stay unique; 0 (no id now: the path is sent at a later I/O) when run nested on top
 * of another of our programs on this CPU, which may be in the middle of taking one. */
const volatile __u32 cfg_nr_cpus = 1;
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
 *   inode, file: struct inode * / struct file * (file may be 0)
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
	}
	if (!d) {
		/* page cache: the inode's first alias */
		struct hlist_node *first = BPF_CORE_READ(inode, i_dentry.first);

		if (first)
			d = (void *)first - bpf_core_field_offset(struct dentry, d_u.d_alias);
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

	hdr->kind = IODUMP_EV_PATH;
	hdr->path_kind = gen_kind >> 32;
	hdr->pflags = pflags;
	hdr->depth = depth;
	hdr->names_len = off;
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
	struct hlist_node *first;
	struct dentry *d, *parent;
	__u64 fp = 0xcbf29ce484222325ULL;

	if (!inode)
		return 0;
	first = BPF_CORE_READ(inode, i_dentry.first);
	if (!first)
		return 1;
	d = (void *)first - bpf_core_field_offset(struct dentry, d_u.d_alias);
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

/* Make sure the path of fi was sent once. Returns the file_id it was sent with (> 0) when
 * that is at hand, 0 when it was sent before and only seen_cache knows (user space finds
 * the record by the inode), -1 if it could not be sent. */
static __always_inline int ensure_path(struct iodump_file_info *fi,
				       struct iodump_cpu_state *cs, __u32 lvl, __u64 now_ns)
{
	struct iodump_inode_key k = { .ino = fi->ino, .dev = fi->dev, .gen = fi->gen };
	struct iodump_seen_set *set = NULL;
	struct iodump_seen_val *known, sent = {};
	__u32 epoch = now_ns >> 30, tag = 0;
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

/* ---------------------------------------------------------------------------------------
 * Start of an I/O (submitter context)
 * ------------------------------------------------------------------------------------- */

/* The device an I/O targets: dev_t of the partition (or whole disk), its first sector, and
 * whether its queue is request-based (blk-mq). */
struct iodump_target {
	__u64 start_sect;
	__u32 dev;
	__u8 mq;
};

/* Before 5.12 a bio names its disk and partition number, not a block_device, and
 * partitions are struct hd_struct (5.10's layout; relocated, never used on newer kernels). */
struct hd_struct___old {
	sector_t start_sect;
	struct device __dev;
} __attribute__((preserve_access_index));

struct disk_part_tbl___old {
	struct hd_struct___old *part[0];
} __attribute__((preserve_access_index));

struct gendisk___old {
	int major;
	int first_minor;
	struct disk_part_tbl___old *part_tbl;
	struct hd_struct___old part0;
	struct request_queue *queue;
} __attribute__((preserve_access_index));

struct bio___old {
	struct gendisk___old *bi_disk;
	__u8 bi_partno;
} __attribute__((preserve_access_index));

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

/* Helpers this kernel has, from its BTF (enum bpf_func_id): a call of one it lacks sits in
 * a branch the verifier sees is never taken. bpf_get_current_task_btf: 5.11;
 * bpf_task_pt_regs: 5.15. */
#define HAVE_TASK_BTF bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)
#define HAVE_TASK_PT_REGS bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)
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

/* Is this page-cache write one the pid filter wants (its dirtier is in pid_filter)? */
static __always_inline int dirtier_wanted(struct iodump_file_info *fi)
{
	__u64 ikey = (__u64)fi->inode;
	__u32 *dp;

	if (fi->kind != IODUMP_PK_FILE)
		return 0;
	dp = bpf_map_lookup_elem(&dirtiers, &ikey);
	return dp && bpf_map_lookup_elem(&pid_filter, dp);
}

/*
 * Fill v for an I/O entering the block layer; returns 0 to track it, -1 if filtered out.
 * t: the partition (or whole disk) the I/O targets; bio: its (first) bio.
 */
static __always_inline int start_io(struct iodump_inflight *v, const struct iodump_target *t,
				    struct bio *bio, __u64 opf, __u64 sector, __u32 bytes,
				    struct iodump_cpu_state *cs, __u32 lvl, int btf)
{
	struct iodump_file_info fi = {};
	struct task_struct *task;
	__u32 tgid, pid;
	__u8 op;
	v->ev.dev = t->dev;
	if (cfg_filter_dev && (lvl || cs->dev_ok != (__u64)v->ev.dev + 1)) {
		if (!bpf_map_lookup_elem(&dev_filter, &v->ev.dev))
			goto filtered;
		if (!lvl)
			cs->dev_ok = (__u64)v->ev.dev + 1;
	}
	op = norm_op(opf);
	/* an empty REQ_PREFLUSH write is a cache flush (iostat counts it as a write) */
	if (op == IODUMP_OP_WRITE && !bytes && (opf & REQ_BIT(__REQ_PREFLUSH)))
		op = IODUMP_OP_FLUSH;
	if (!(cfg_op_mask & (1u << op)))
		goto filtered;

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

	v->ev.kind = IODUMP_EV_IO;
	v->ev.op = op;
	v->ev.flags = norm_flags(opf);
	v->ev.sector = sector;
	v->ev.bytes = bytes;
	v->ev.start_ns = bpf_ktime_get_ns();
	v->ev.pid = tgid;
	v->ev.tid = pid;
	v->ev.cpu = bpf_get_smp_processor_id();
	v->ev.syscall = current_syscall(task, &v->ev.ioflags);
	v->part_start = t->start_sect;

	if ((v->ev.ioflags & IODUMP_IOF_KTHREAD) && bio) {
		/* cgroup writeback: the bio is charged to the dirtier's cgroup */
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
	long err;

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
	err = bpf_map_update_elem(map, &key, v, BPF_NOEXIST);
	if (err == -EEXIST) {
		cnt(IODUMP_CNT_LOST_STALE);
		err = bpf_map_update_elem(map, &key, v, BPF_ANY);
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

static __always_inline int on_rq_start(struct iodump_cpu_state *cs, __u32 lvl,
				       struct request *rq, int btf)
{
	struct iodump_inflight v = {};
	struct iodump_target t = {};
	struct bio *bio;

	/* rq->part is not set yet when block_io_start fires (6.5+): use the bio's bdev */
	bio = RD(btf, rq, bio);
	if (bdev_target(&t, bio ? RD(btf, bio, bi_bdev) : RD(btf, rq, q, disk, part0), btf))
		return 0;
	if (start_io(&v, &t, bio, RD(btf, rq, cmd_flags), RD(btf, rq, __sector),
		     RD(btf, rq, __data_len), cs, lvl, btf)) {
		cnt(IODUMP_CNT_RQ_UNTRACKED);
		return 0;
	}
	track(&inflight_rq, key_of(cs, lvl, rq, btf), &v, 1);
	return 0;
}

/*
 * Kernels without block_io_start: block_getrq fires in the submitter's context when a bio
 * gets a new request, before the request holds it. The I/O is tracked under the bio's
 * address; adopt() moves it to the request's once block_rq_insert (a scheduler) or
 * block_rq_issue (every request, also those issued directly without an insert, as with
 * the `none` scheduler) shows the request.
 */
static __always_inline int on_getrq(struct iodump_cpu_state *cs, __u32 lvl, struct bio *bio,
				    int btf)
{
	struct iodump_inflight v = {};
	struct iodump_target t = {};

	if (!bio || bio_target(&t, bio, btf))
		return 0;
	if (start_io(&v, &t, bio, RD(btf, bio, bi_opf), RD(btf, bio, bi_iter.bi_sector),
		     RD(btf, bio, bi_iter.bi_size), cs, lvl, btf)) {
		cnt(IODUMP_CNT_RQ_UNTRACKED);
		return 0;
	}
	v.ev.ioflags |= IODUMP_IOF_INSERT;
	track(&inflight_rq, key_of(cs, lvl, bio, btf), &v, 1);
	return 0;
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
		bkey = bio;
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
	if (start_io(&v, &t, bio, RD(btf, bio, bi_opf), RD(btf, bio, bi_iter.bi_sector),
		     RD(btf, bio, bi_iter.bi_size), cs, lvl, btf))
		return 0;
	v.ev.ioflags |= IODUMP_IOF_BIO_BASED;
	track(&inflight_bio, key_of(cs, lvl, bio, btf), &v, 1);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Issue, merge, completion
 * ------------------------------------------------------------------------------------- */
static __always_inline int on_rq_issue(struct iodump_cpu_state *cs, __u32 lvl,
				       struct request *rq, int btf)
{
	__u64 key = key_of(cs, lvl, rq, btf);
	struct iodump_slot *slot;
	struct iodump_inflight *v = find(&inflight_rq, key, &slot);

	if (!v && cfg_start_at_getrq)
		v = adopt(cs, lvl, rq, key, &slot, btf);
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

static __always_inline int on_rq_complete(struct iodump_cpu_state *cs, __u32 lvl,
					  struct request *rq, __u32 status, __u32 nr_bytes,
					  int btf)
{
	__u64 key = key_of(cs, lvl, rq, btf);
	__u64 now = bpf_ktime_get_ns();
	struct iodump_slot *slot;
	struct iodump_inflight *v = find(&inflight_rq, key, &slot);
	__u16 err;

	/* started at block_getrq and completed without an insert or issue (an empty
	 * REQ_PREFLUSH request the flush machinery completes itself) */
	if (!v && cfg_start_at_getrq)
		v = adopt(cs, lvl, rq, key, &slot, btf);
	if (!v) {
		if (norm_op(RD(btf, rq, cmd_flags)) == IODUMP_OP_FLUSH && !RD(btf, rq, bio))
			cnt(IODUMP_CNT_FLUSH_NO_START);
		else
			cnt(IODUMP_CNT_NO_START);
		return 0;
	}
	err = status_errno(status);
	if (err && !v->ev.error)
		v->ev.error = err;
	/* blk_update_request may complete a request in parts; the tracepoint fires before
	 * __data_len is reduced, so nr_bytes < __data_len means more parts follow. */
	if (nr_bytes < RD(btf, rq, __data_len)) {
		v->ev.ioflags |= IODUMP_IOF_PARTIAL;
		cnt(IODUMP_CNT_PARTIAL);
		return 0;
	}
	finish(&inflight_rq, key, v, slot, now, lvl);
	return 0;
}

static __always_inline int on_bio_complete(struct iodump_cpu_state *cs, __u32 lvl,
					   struct bio *bio, int btf)
{
	__u64 key = key_of(cs, lvl, bio, btf);
	__u64 now = bpf_ktime_get_ns();
	struct iodump_slot *slot;
	struct iodump_inflight *v = find(&inflight_bio, key, &slot);

	if (!v)
		return 0; /* not tracked (filtered, or started before attach) */
	v->ev.error = status_errno(RD(btf, bio, bi_status));
	finish(&inflight_bio, key, v, slot, now, lvl);
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Writeback dirtier
 * ------------------------------------------------------------------------------------- */
static __always_inline int on_dirty_folio(struct iodump_cpu_state *cs, __u32 lvl,
					  struct address_space *mapping, int btf)
{
	__u64 host;
	__u32 tgid;

	if (!cfg_enable_dirtier || !mapping)
		return 0;
	host = ptr_bits(cs, lvl, RD(btf, mapping, host), btf);
	if (!host)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	/* a buffered write dirties many folios of one inode in a row: update once */
	if (!lvl) {
		if (cs->dirty_inode == host && cs->dirty_tgid == tgid)
			return 0;
		cs->dirty_inode = host;
		cs->dirty_tgid = tgid;
	}
	bpf_map_update_elem(&dirtiers, &host, &tgid, BPF_ANY);
	return 0;
}

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

SEC("tp_btf/block_bio_queue")
int BPF_PROG(tp_bio_queue, struct bio *bio)
{
	return RUN(on_bio_queue, bio, BTF);
}

SEC("raw_tp/block_bio_queue")
int BPF_PROG(raw_bio_queue, struct bio *bio)
{
	return RUN(on_bio_queue, bio, RAW);
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
