/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * settings.bpf.h — every setting of the program: the `const volatile` globals (.rodata)
 * user space writes before load (record/src/bpf.rs, `override_global`): filters, switches,
 * the ring buffer's wake-up threshold, kernel function addresses and BTF ids. Read-only
 * for the program, so the verifier prunes the branches a setting turns off.
 *
 * The order of the globals is their order in .rodata: keep it (see README.md, "Changing
 * the source without changing the code").
 */
#ifndef IODUMP_SETTINGS_BPF_H
#define IODUMP_SETTINGS_BPF_H

#include "vmlinux.h"

const volatile __u32 cfg_filter_dev = 0;     /* 1: only devs present in dev_filter */
const volatile __u32 cfg_filter_below = 0;   /* 1: filter_below names some of them */
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
/* 1: bio_endio does not trace a chained bio's completion (it passes it to its parent before
 * the trace: 5.10, and every kernel before 5.12.17 and 5.13): such a bio on a bio-based
 * device is not tracked, it would stay in flight for ever (IODUMP_CNT_CHAIN_UNTRACED) */
const volatile __u32 cfg_chain_untraced = 0;
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
const volatile __u64 ksym_end_clone_request = 0; /* dm_mod: a request-based dm clone's end_io */
/* the end_io of a request in the flush machinery's sequence while its data is written */
const volatile __u64 ksym_mq_flush_data_end_io = 0;

/* BTF ids of btrfs's structs in the running kernel's vmlinux BTF, for rdonly_cast() (0: not
 * there, e.g. btrfs is a module: its types are in module BTF, which rdonly_cast does not
 * take; the btrfs reads then go through bpf_probe_read_kernel). Set by user space, which
 * finds them in vmlinux BTF: a bpf_core_type_id_kernel() relocation of a type the kernel
 * lacks would fail the whole object in aya-obj 0.3. */
const volatile __u32 cfg_btf_id_btrfs_bio = 0;
const volatile __u32 cfg_btf_id_btrfs_inode = 0;

#ifdef IODUMP_NO_ATOMICS
/* Number of possible CPUs: file ids are striped by CPU (next_file_id() in paths.bpf.h). */
const volatile __u32 cfg_nr_cpus = 1;
#endif

#endif /* IODUMP_SETTINGS_BPF_H */
