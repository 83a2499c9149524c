/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * maps.bpf.h — every map of the program, in their order in the object's .maps section, and
 * the kernel-only types of their values: the per-CPU state (struct iodump_cpu_state, with
 * the nesting level every program keeps), the seen_inodes value and the seen_cache sets,
 * the path-record scratch. The types shared with user space are in iodump.h.
 */
#ifndef IODUMP_MAPS_BPF_H
#define IODUMP_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "iodump.h"

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

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* bytes; user space may override (power of 2) */
} events SEC(".maps");

/*
 * In-flight I/Os live in a slot table first: an array indexed by a hash of the request or
 * bio address, claimed with compare-and-swap. Array lookups are inlined by the verifier
 * and take no lock, where a hash-map update + lookup + delete cost ~300 ns per I/O on
 * this machine. A slot already owned by another in-flight I/O sends the new one to the
 * LRU hash maps below (inflight_rq / inflight_bio), which are also bounded. Mappable:
 * with a trigger, user space reads the keys through a read-only mapping once a second to
 * find I/Os that hang (~0.5 ms a look; a batch lookup copying every slot took ~20 ms).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
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

/* [0]: number of entries currently in the fallback maps (inflight_rq, inflight_bio), so
 * that completions of untracked I/O (filtered out, other devices) skip the hash lookup
 * while it is 0. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} fallback_live SEC(".maps");

/* The stacked devices (device-mapper, md: a bio-based disk with slaves/ in sysfs), dev_t
 * (kernel encoding) -> 1, filled by user space before attach, and again when one is made
 * while recording (stack.bpf.h); stack_named says whether it names any. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} stack_devs SEC(".maps");

/* The I/Os in flight on stacked devices, keyed by their bio's bio_vec array (bi_io_vec),
 * which every clone and split the driver sends down shares (stack.bpf.h); value: the
 * upper I/O as it was started, with ev.complete_ns holding the upper bio's address (the
 * entry's owner) until the lower I/O copies from it. LRU in both objects: an entry whose
 * completion was never seen ages out instead of filling the map. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct iodump_inflight);
} stack_ios SEC(".maps");

/* [0]: where md RAID4/5/6's stripe_head keeps its disks' bios (iodump.h), written by user
 * space once raid456 is loaded (stack.bpf.h, stack_raid5_upper). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iodump_raid5_layout);
} stack_raid5 SEC(".maps");

/* [0]: bytes from the closure of bcache's struct search to its clone's bi_io_vec (search.cl
 * to search.bio.bio.bi_io_vec), written by user space from bcache's module BTF once bcache
 * is loaded; 0: not known (stack.bpf.h, stack_bcache_upper). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stack_bcache SEC(".maps");

/* [0]: entries in stack_ios, so that devices with nothing stacked above skip the lookup;
 * [1]: those a request of a request-based stacked device owns (dm-multipath; an entry
 * replaced or evicted before its request completed stays counted: the count only spares
 * every other request's completion a lookup while it is 0). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __s64);
} stack_live SEC(".maps");

struct {
	__uint(type, IODUMP_INFLIGHT_MAP_TYPE);
	__uint(max_entries, 16384); /* slot collisions (IODUMP_NO_ATOMICS: every I/O) */
	__type(key, __u64); /* struct request * (started at block_getrq: its bio's, until adopt()) */
	__type(value, struct iodump_inflight);
} inflight_rq SEC(".maps");

struct {
	__uint(type, IODUMP_INFLIGHT_MAP_TYPE);
	__uint(max_entries, 16384); /* slot collisions (IODUMP_NO_ATOMICS: every I/O) */
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

/* The names generation: moved by every rename(2), renameat(2), renameat2(2), unlink(2) and
 * unlinkat(2) as it returns (on_names_changed, attached to their sys_exit tracepoints when
 * the kernel has them). It is part of ensure_path's epoch, so a file's names are checked
 * again at its next I/O once anything was renamed or unlinked anywhere: an I/O that enters
 * the block layer after rename() returned carries the new name. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} names_gen SEC(".maps");

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

/* Devices of dev_filter whose I/O below is recorded too, whatever device it is sent to: an
 * NVMe multipath head (and its partitions) named with -d, whose requests are done on hidden
 * path disks that have no number to name beforehand (start.bpf.h, start_io). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32); /* dev, kernel encoding */
	__type(value, __u8);
} filter_below SEC(".maps");

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
	/* set while the first program on block_rq_complete / block_bio_complete runs on this
	 * CPU: then the kernel skips it for a completion that comes meanwhile (an interrupt, or
	 * another task where tracing programs can be preempted), and the second program on the
	 * tracepoint does its work, see on_rq_complete_again() */
	__u8 rq_done_busy;
	__u8 bio_done_busy;
	__u8 _pad0[2];
	/* key of the bio the first program on block_bio_queue last began on this CPU (0: done
	 * with), see on_bio_queue_again() */
	__u64 queued_key;
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

#endif /* IODUMP_MAPS_BPF_H */
