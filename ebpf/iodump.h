/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * iodump.h — the one header shared by the BPF program (iodump.bpf.c and its *.bpf.h) and
 * user space.
 *
 * Everything that crosses the ring buffer or a map is defined here with fixed-size fields
 * only (integers, char arrays), explicit padding, and sizes that are multiples of 8. The
 * offsets are pinned below with _Static_assert, so moving a field breaks the BPF build. The
 * Rust side (record/src/abi.rs) does not mirror the structs: it parses each record field by
 * field from its bytes, at these offsets, and repeats the constants it needs; its unit test
 * tests::offsets_match_the_header reads this file and fails (`cargo test -p iodump-record`)
 * when the pinned offsets, the record sizes or those constants differ from abi.rs.
 *
 * Compiles two ways:
 *   - BPF:     #include "vmlinux.h" first (it defines __VMLINUX_H__ and the __u64... types);
 *   - plain C: #include "iodump.h" alone; __u64... come from <linux/types.h>.
 *
 * All integers are in the host's byte order (little-endian on x86_64).
 * Time stamps are bpf_ktime_get_ns(): CLOCK_MONOTONIC nanoseconds (not counting suspend).
 * Device numbers use the kernel's internal dev_t encoding: major << 20 | minor (MKDEV in
 * include/linux/kdev_t.h), NOT the userspace (glibc makedev) encoding.
 */
#ifndef IODUMP_H
#define IODUMP_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Bumped whenever a struct or constant below changes meaning. */
#define IODUMP_ABI_VERSION 3

/* ---------------------------------------------------------------------------------------
 * Ring buffer record kinds: the first __u16 of every record.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_EV_IO   1 /* struct iodump_io_event, fixed size */
#define IODUMP_EV_PATH 2 /* struct iodump_path_event, variable size (header + names_len) */
#define IODUMP_EV_BATCH 3 /* struct iodump_batch: a header and `count` I/O events, size
                           * IODUMP_BATCH_HDR + count * sizeof(struct iodump_io_event) */

/* ---------------------------------------------------------------------------------------
 * Normalised operation codes (iodump_io_event.op). Kernel REQ_OP_* values are looked up
 * with CO-RE (enum req_op; enum req_opf before 5.19), so they are stable here whatever the
 * kernel numbers them.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_OP_READ         0
#define IODUMP_OP_WRITE        1 /* also REQ_OP_ZONE_APPEND (a data write) */
#define IODUMP_OP_FLUSH        2
#define IODUMP_OP_DISCARD      3
#define IODUMP_OP_SECURE_ERASE 4
#define IODUMP_OP_WRITE_ZEROES 5
#define IODUMP_OP_OTHER        6 /* zone management, driver-private (REQ_OP_DRV_*), ... */
#define IODUMP_OP_COUNT        7

/* ---------------------------------------------------------------------------------------
 * Normalised request flag bits (iodump_io_event.flags), from the kernel's REQ_* bits whose
 * numbers are looked up with CO-RE (enum req_flag_bits), since they move between kernels.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_F_SYNC       (1u << 0) /* REQ_SYNC */
#define IODUMP_F_META       (1u << 1) /* REQ_META */
#define IODUMP_F_FUA        (1u << 2) /* REQ_FUA */
#define IODUMP_F_PREFLUSH   (1u << 3) /* REQ_PREFLUSH */
#define IODUMP_F_READAHEAD  (1u << 4) /* REQ_RAHEAD */
#define IODUMP_F_BACKGROUND (1u << 5) /* REQ_BACKGROUND */
#define IODUMP_F_NOWAIT     (1u << 6) /* REQ_NOWAIT */

/* ---------------------------------------------------------------------------------------
 * iodump_io_event.ioflags: how the event was recorded.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_IOF_BIO_BASED (1u << 0) /* bio-based device (zram, dm, md, nvme multipath
                                        * head): block_bio_queue -> block_bio_complete;
                                        * issue_ns is 0 */
#define IODUMP_IOF_ISSUED    (1u << 1) /* issue_ns is valid (block_rq_issue was seen); a
                                        * request-based I/O without it was completed by the
                                        * flush state machine (pure REQ_PREFLUSH) */
#define IODUMP_IOF_DIRTIER   (1u << 2) /* dirtier_pid is valid */
#define IODUMP_IOF_PATH_LOST (1u << 3) /* ino/ino_dev valid but the path record could not be
                                        * sent (ring buffer full, or paths disabled):
                                        * resolve another way or label [unknown] */
#define IODUMP_IOF_KTHREAD   (1u << 4) /* submitter is a kernel thread (flusher kworker,
                                        * jbd2, xfsaild, kblockd...): pid/comm are that
                                        * thread's; for writeback see dirtier_pid */
#define IODUMP_IOF_PARTIAL   (1u << 5) /* the request completed in several parts
                                        * (block_rq_complete with nr_bytes < remaining);
                                        * one event is emitted at the last part */
#define IODUMP_IOF_INSERT    (1u << 6) /* started at block_getrq (kernels without
                                        * block_io_start) */

/* ---------------------------------------------------------------------------------------
 * Where the file behind an I/O came from (iodump_io_event.path_kind and
 * iodump_path_event.path_kind). Codes 0..5 equal the trace format's PathKind codes.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_PK_UNKNOWN  0 /* no data pages (flush, discard...) or nothing recognised */
#define IODUMP_PK_FILE     1 /* page-cache page of a file: buffered read, readahead,
                              * writeback, fsync, mmap fault. ino/ino_dev/ino_gen valid */
#define IODUMP_PK_META     2 /* filesystem metadata recognised by the kernel side; ino_dev = dev
                              * (xfs_buf_bio_end_io; btrfs's btree inode) */
#define IODUMP_PK_JOURNAL  3 /* filesystem journal recognised by the kernel side; ino_dev = dev
                              * (xlog_bio_end_io) */
#define IODUMP_PK_SWAP     4 /* swap: writes carry REQ_SWAP; reads are recognised by a
                              * swap-backed folio without mapping */
#define IODUMP_PK_RAWDEV   5 /* O_DIRECT on a block device node (blkdev_bio_end_io[_async],
                              * or user pages completed by submit_bio_wait_endio);
                              * ino_dev = the device */
#define IODUMP_PK_BDEV     6 /* page cache of a block device inode: buffer-head metadata
                              * (ext4 inode tables, bitmaps, directories via bdev), the ext4
                              * jbd2 journal, or buffered I/O on /dev/X. ino_dev = that block
                              * device (i_rdev), ino = 0. User space labels it from comm
                              * (jbd2/...), REQ_META and whether the device is mounted. */
#define IODUMP_PK_DIO      7 /* direct I/O on a file: iomap (ext4, xfs) or a btrfs bio.
                              * ino/ino_dev/ino_gen valid */
#define IODUMP_PK_USERMEM  8 /* anonymous/user pages not attributed to a file: O_DIRECT
                              * through a path the kernel side does not recognise */

/* ---------------------------------------------------------------------------------------
 * iodump_io_event.syscall: what the submitting thread was doing (x86_64 only).
 * ------------------------------------------------------------------------------------- */
#define IODUMP_SC_NONE  0xffff /* kernel thread, or disabled (cfg_enable_syscall = 0) */
#define IODUMP_SC_FAULT 0xfffe /* user thread not inside a syscall: a page fault on a
                                * mapped file (or another exception) */
/* Any other value: the raw x86_64 syscall number (pt_regs->orig_ax) the submitter is in,
 * e.g. 0 read, 1 write, 17 pread64, 18 pwrite64, 74 fsync, 75 fdatasync, 209 io_submit,
 * 426 io_uring_enter. */

/* ---------------------------------------------------------------------------------------
 * iodump_path_event.pflags
 * ------------------------------------------------------------------------------------- */
#define IODUMP_PF_TRUNCATED    (1u << 0) /* root side cut: depth > IODUMP_PATH_MAX_DEPTH or
                                          * names longer than IODUMP_PATH_BUF; show "…/" */
#define IODUMP_PF_DELETED      (1u << 1) /* inode had i_nlink == 0 (unlinked while open) */
#define IODUMP_PF_DISCONNECTED (1u << 2) /* the walk ended at a root dentry that is not the
                                          * superblock's s_root (btrfs subvolume root,
                                          * NFS-exported disconnected dentry...) */
#define IODUMP_PF_NO_DENTRY    (1u << 3) /* inode has no dentry alias: names is empty */

#define IODUMP_PATH_BUF       4096 /* max bytes of names[] */
#define IODUMP_NAME_MAX       256  /* max bytes of one component incl. its NUL */
#define IODUMP_PATH_MAX_DEPTH 256  /* max components walked */

/* ---------------------------------------------------------------------------------------
 * Per-CPU counters (map "counters": PERCPU_ARRAY, key __u32 index, value __u64). Sum over
 * CPUs. The LOST_* ones are events that were lost; the others are statistics.
 *
 * Every tracked I/O ends in exactly one of: EMITTED, LOST_RINGBUF, SIZE_FILTERED,
 * RQ_MERGED, LOST_STALE, still in flight, or silently evicted by the LRU fallback maps
 * (which the kernel cannot count). So at the end of a recording:
 *   evicted = TRACKED - EMITTED - LOST_RINGBUF - SIZE_FILTERED - RQ_MERGED - LOST_STALE
 *             - (used inflight_slots + entries of inflight_rq + inflight_bio)
 * and events lost = LOST_RINGBUF + LOST_INFLIGHT + LOST_STALE + evicted. The kernel also
 * skips a program that would run nested inside itself on one CPU (e.g. block_io_start
 * fired from an interrupt while tp_io_start runs); it counts those in the program's
 * recursion_misses (bpf_prog_info), which user space should add to the losses.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_CNT_LOST_RINGBUF   0  /* I/O event dropped: ring buffer reserve failed */
#define IODUMP_CNT_LOST_INFLIGHT  1  /* I/O not tracked: in-flight map update failed */
#define IODUMP_CNT_LOST_STALE     2  /* an in-flight entry was replaced before its
                                      * completion was seen: its request/bio address started
                                      * a new I/O, or its slot was older than
                                      * IODUMP_STALE_NS and reclaimed */
#define IODUMP_CNT_LOST_PATH      3  /* path record not sent (ring buffer full, or no
                                      * file_id could be taken); the I/O event has
                                      * IODUMP_IOF_PATH_LOST, retried next I/O */
#define IODUMP_CNT_TRACKED        4  /* I/Os entered into the in-flight slots or maps */
#define IODUMP_CNT_EMITTED        5  /* I/O events submitted to the ring buffer */
#define IODUMP_CNT_NO_START       6  /* request completions with no in-flight entry: I/O
                                      * filtered out or sampled out at its start, started
                                      * before attach, evicted entries (statistic, not a
                                      * loss; flushes and passthrough commands are counted
                                      * apart) */
#define IODUMP_CNT_RQ_MERGED      7  /* requests merged into another one (block_rq_merge):
                                      * entry dropped, its bytes are in the survivor */
#define IODUMP_CNT_PATHS          8  /* path records sent */
#define IODUMP_CNT_PATH_TRUNC     9  /* path records sent with IODUMP_PF_TRUNCATED */
#define IODUMP_CNT_FILTERED       10 /* I/Os dropped by dev/op/pid/comm/cgroup filters */
#define IODUMP_CNT_SAMPLED_OUT    11 /* I/Os skipped by 1/N sampling */
#define IODUMP_CNT_SIZE_FILTERED  12 /* completed I/Os dropped by min/max size */
#define IODUMP_CNT_PARTIAL        13 /* partial completions (not events) */
#define IODUMP_CNT_BATCHES        14 /* batch records sent (IODUMP_EV_BATCH) */
#define IODUMP_CNT_FLUSH_NO_START 15 /* cache-flush request completions with no in-flight
                                      * entry: the flush requests the block layer makes
                                      * itself (blk_kick_flush), which no start hook sees,
                                      * and the second completion, with no bytes, that
                                      * ends the flush sequence of a write nothing tracks
                                      * (a tracked one ends there, see rq_complete) */
#define IODUMP_CNT_RQ_UNTRACKED   16 /* requests whose start was seen but not tracked
                                      * (filtered, sampled out): their completions count
                                      * as IODUMP_CNT_NO_START too (passthrough commands
                                      * and empty flushes, counted apart at completion,
                                      * are not counted here) */
#define IODUMP_CNT_NAMES_CHANGED  17 /* renames and unlinks seen (their sys_exit
                                      * tracepoints): each moves names_gen */
#define IODUMP_CNT_BIO_RESCUED    18 /* bio completions the second program on
                                      * block_bio_complete finished because the kernel
                                      * skipped the first (it was running on that CPU
                                      * already): recursion misses of tp_bio_done that lost
                                      * nothing */
#define IODUMP_CNT_RQ_RESCUED     19 /* request completions the second program on
                                      * block_rq_complete finished because the kernel
                                      * skipped the first (recursion misses of tp_rq_done
                                      * that lost nothing) */
#define IODUMP_CNT_QUEUE_RESCUED  20 /* bio starts the second program on block_bio_queue
                                      * did because the kernel skipped the first
                                      * (recursion misses of tp_bio_queue that lost
                                      * nothing) */
#define IODUMP_CNT_CHAIN_UNTRACED 21 /* bios of a chain (bio_chain: discard and zero-out
                                      * runs, XFS buffers) queued on a bio-based device of
                                      * a kernel that does not trace a chained bio's
                                      * completion (cfg_chain_untraced): not tracked, so
                                      * counted as lost (their upper I/O is still kept for
                                      * the I/O they send below) */
#define IODUMP_CNT_PASSTHROUGH_NO_START 22 /* passthrough commands (SCSI, NVMe admin,
                                            * a driver's own: no block I/O) completing
                                            * without an entry: before 6.5 no start hook
                                            * sees them; 6.5+, those filtered or sampled
                                            * out (statistic) */
#define IODUMP_CNT_FLUSH_FOLLOWED 23 /* writes the flush machinery sequences, kept in flight
                                      * at their data's completion to end at the end of
                                      * their sequence, after the post-flush of a REQ_FUA
                                      * write on a device without FUA (rq_complete;
                                      * statistic) */
#define IODUMP_CNT_MAX            24

/* ---------------------------------------------------------------------------------------
 * struct iodump_io_event: one block I/O, sent at completion. 120 bytes.
 * ------------------------------------------------------------------------------------- */
struct iodump_io_event {
	__u16 kind;        /*   0  IODUMP_EV_IO */
	__u8  op;          /*   2  IODUMP_OP_* */
	__u8  flags;       /*   3  IODUMP_F_* bit set */
	__u8  path_kind;   /*   4  IODUMP_PK_* */
	__u8  ioflags;     /*   5  IODUMP_IOF_* bit set */
	__u16 error;       /*   6  completion status as a positive errno; 0 = success */
	__u64 start_ns;    /*   8  ns, CLOCK_MONOTONIC: entered the block layer
	                    *      (block_io_start / block_bio_queue; block_getrq on
	                    *      kernels without block_io_start), submitter context */
	__u64 issue_ns;    /*  16  ns: handed to the driver (last block_rq_issue); 0 if none */
	__u64 complete_ns; /*  24  ns: completion (block_rq_complete / block_bio_complete) */
	__u64 sector;      /*  32  first sector, 512-byte units, relative to dev (the
	                    *      partition when the I/O targets one) */
	__u64 cgroup_id;   /*  40  cgroup v2 id of the submitter; for kernel threads with a
	                    *      blkcg on the bio (cgroup writeback) the bio's cgroup */
	__u64 ino;         /*  48  inode number of the file (PK_FILE, PK_DIO); 0 otherwise */
	__u32 ino_dev;     /*  56  st_dev of that inode (PK_FILE, PK_DIO): sb->s_dev, or on
	                    *      btrfs the subvolume's anonymous dev (root->anon_dev);
	                    *      for PK_BDEV the block device (i_rdev); for PK_RAWDEV,
	                    *      PK_META, PK_JOURNAL = dev; 0 otherwise */
	__u32 ino_gen;     /*  60  inode generation (i_generation): with ino_dev+ino it
	                    *      identifies the file across inode number reuse */
	__u32 dev;         /*  64  device the I/O was sent to: bd_dev of the partition (sda1)
	                    *      or whole disk, kernel encoding major << 20 | minor */
	__u32 bytes;       /*  68  size in bytes (0 for a pure flush) */
	__u32 pid;         /*  72  submitter's process id (tgid) */
	__u32 tid;         /*  76  submitter's thread id (kernel pid) */
	__u32 dirtier_pid; /*  80  for page-cache writes: tgid that last dirtied a page of the
	                    *      inode (writeback_dirty_folio); valid if IODUMP_IOF_DIRTIER */
	__u16 cpu;         /*  84  CPU the I/O was submitted on */
	__u16 syscall;     /*  86  IODUMP_SC_* or raw x86_64 syscall number */
	char  comm[16];    /*  88  submitter's comm (task->comm), NUL-padded */
	__u32 file_id;     /* 104  PK_FILE, PK_DIO: the file_id of the path record sent for
	                    *      this inode (iodump_path_event.file_id) when the program had
	                    *      it at hand, so user space finds the file with an array index;
	                    *      0 = find the record by (ino_dev, ino, ino_gen), or none
	                    *      (IODUMP_IOF_PATH_LOST: paths off, or the record was lost) */
	__u32 upper_dev;   /* 108  an I/O a stacked device (dm, md) sent down: the stacked
	                    *      device of the I/O it serves (stack.bpf.h); 0 otherwise */
	__u64 upper_start_ns; /* 112  and that I/O's start_ns (with upper_dev and this
	                    *      event's tid, which it inherited, it names that event) */
};                         /* 120 */

/* ---------------------------------------------------------------------------------------
 * struct iodump_path_event: the path of an inode, sent once per (ino_dev, ino, ino_gen)
 * per recording, before the first I/O event that refers to it. The record is
 * sizeof(struct iodump_path_event) + names_len bytes long.
 *
 * names[] holds depth components, LEAF FIRST, each terminated by one NUL byte, e.g.
 * "file.txt\0dir\0home\0" for /home/dir/file.txt; reverse and join with '/'. Components
 * are raw bytes (anything but NUL and '/'). The path is relative to the root of the
 * filesystem (the superblock's s_root); user space prefixes the mount point by matching
 * sb_dev against /proc/self/mountinfo (major:minor, converted from this encoding) and
 * choosing a mount whose root (4th mountinfo field) is a prefix of the path. depth == 0 and
 * no flags means the filesystem root itself. (dev, ino, gen) identifies the file.
 * ------------------------------------------------------------------------------------- */
struct iodump_path_event {
	__u16 kind;      /*  0  IODUMP_EV_PATH */
	__u8  path_kind; /*  2  IODUMP_PK_FILE or IODUMP_PK_DIO (how the inode was found) */
	__u8  pflags;    /*  3  IODUMP_PF_* bit set */
	__u16 depth;     /*  4  number of components in names[] */
	__u16 names_len; /*  6  bytes of names[] (including the NULs), <= IODUMP_PATH_BUF */
	__u64 ino;       /*  8  inode number */
	__u32 dev;       /* 16  the inode's st_dev (= iodump_io_event.ino_dev), kernel encoding:
	                  *     sb->s_dev, or on btrfs the subvolume's anonymous dev */
	__u32 gen;       /* 20  i_generation */
	__u32 mnt_id;    /* 24  mount id (as in mountinfo) of the file's mount when known
	                  *     (direct I/O, from the struct file); 0 = unknown */
	__u32 sb_dev;    /* 28  superblock dev (sb->s_dev) as in /proc/self/mountinfo: match the
	                  *     mount with this; equals dev except on btrfs */
	__u32 file_id;   /* 32  a number > 0 naming this record: I/O events of the inode carry it
	                  *     (iodump_io_event.file_id). Taken from one counter (one per
	                  *     CPU, striped, in iodump-noatomics.bpf.o), never reused
	                  *     within a recording; an inode whose record is sent again (its
	                  *     seen_inodes entry was evicted, or two CPUs raced to send it)
	                  *     gets a new one, for the same (dev, ino, gen) */
	__u32 _reserved; /* 36  0 */
	char  names[];   /* 40  */
};

/* ---------------------------------------------------------------------------------------
 * Batches of I/O events.
 *
 * A completion at nesting level 0 (struct iodump_cpu_state in maps.bpf.h) does not reserve
 * ring-buffer space for its event: it appends the event to its CPU's batch (map `batch`,
 * PERCPU_ARRAY), and the batch goes into the ring buffer as one IODUMP_EV_BATCH record when
 * it holds batch_cfg[0] events, or when user space runs the program `flush_batch` on that
 * CPU (BPF_PROG_TEST_RUN with BPF_F_TEST_RUN_ON_CPU: on a timer, and after detaching at the
 * end). One reservation and commit per batch instead of per event; the per-CPU batch
 * stays in the CPU's cache while the ring's lines are written 3.5 KiB at a time.
 * batch_cfg[0] = 0 (the initial value) sends every event on its own (IODUMP_EV_IO), as do
 * completions that interrupt another program on the CPU (nesting level > 0).
 * IODUMP_CNT_EMITTED / IODUMP_CNT_LOST_RINGBUF count a batch's events when it is sent
 * (or not); an event waiting in a batch is in neither until then.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_BATCH_MAX 32 /* events; 8 + 32 * 120 = 3,848 bytes */
#define IODUMP_BATCH_HDR 8

struct iodump_batch {
	__u16 kind;     /*  0  IODUMP_EV_BATCH (set when sent) */
	__u16 count;    /*  2  events in ev[] */
	__u32 _reserved;/*  4  0 */
	struct iodump_io_event ev[IODUMP_BATCH_MAX]; /* 8 */
};

/* flush_batch's return value (BPF_PROG_TEST_RUN retval) */
#define IODUMP_FLUSH_DONE 0 /* the CPU's batch was sent (or empty) */
#define IODUMP_FLUSH_BUSY 1 /* another program was running on the CPU: try again later */

/* ---------------------------------------------------------------------------------------
 * In-flight state (kernel side only; here so user space can size map values, e.g. to
 * count live entries at the end for the eviction formula above).
 *
 * Maps: inflight_slots (ARRAY of struct iodump_slot, IODUMP_SLOTS entries, slot chosen by
 * a hash of the request/bio address, claimed with compare-and-swap; key == 0 = free) and
 * the fallbacks inflight_rq / inflight_bio (LRU_HASH, key __u64 address, value struct
 * iodump_inflight) for addresses whose slot is taken. iodump-noatomics.bpf.o (kernels
 * without BPF compare-and-exchange) uses no slot: every in-flight I/O is in those two maps,
 * plain HASH maps there.
 * ------------------------------------------------------------------------------------- */
#define IODUMP_SLOT_COMPLETING 1ULL /* bit of iodump_slot.key (addresses are aligned) */
#define IODUMP_KEY_GETRQ 2ULL       /* set in the key of a request started at block_getrq
                                     * and tracked under its bio's address: that bio may be
                                     * tracked as itself on a bio-based device above (an
                                     * NVMe multipath head passes the bio it got down) */
#define IODUMP_SLOT_BITS 16
#define IODUMP_SLOTS     (1u << IODUMP_SLOT_BITS) /* fixed: the hash depends on it */
#define IODUMP_STALE_NS  (120ULL * 1000000000ULL) /* a slot older than this may be
                                                   * reclaimed by a colliding I/O
                                                   * (counted as IODUMP_CNT_LOST_STALE) */

struct iodump_inflight {
	struct iodump_io_event ev; /*   0  the event being built; ev.sector is whole-disk
	                            *      based until it is emitted */
	__u64 part_start;          /* 120  bd_start_sect of ev.dev, subtracted at emit time */
};                                 /* 128 */

struct iodump_slot {
	__u64 key;                 /*   0  address of the owning request/bio; 0 = free;
	                            *      address | IODUMP_SLOT_COMPLETING = its event is
	                            *      being copied out (taken by no one else) */
	struct iodump_inflight v;  /*   8 */
};                                 /* 136 */

/* ---------------------------------------------------------------------------------------
 * md RAID4/5/6 (the raid456 module): where its stripe cache keeps each disk's bio and the
 * upper bios waiting on that disk's block, as byte offsets user space reads from raid456's
 * module BTF (struct stripe_head, struct r5dev) once the module is loaded; the one value of
 * the stack_raid5 map (stack.bpf.h). dev_bytes == 0: not known, not followed.
 * ------------------------------------------------------------------------------------- */
struct iodump_raid5_layout {
	__u32 dev_off;     /*  0  stripe_head.dev: its struct r5dev array, one per disk */
	__u32 dev_bytes;   /*  4  sizeof(struct r5dev) */
	__u32 disks_off;   /*  8  stripe_head.disks (int) */
	__u32 req_off;     /* 12  r5dev.req: the bio sent to the disk */
	__u32 rreq_off;    /* 16  r5dev.rreq: the bio sent to the disk's replacement */
	__u32 vec_off;     /* 20  r5dev.vec: req's one bio_vec */
	__u32 rvec_off;    /* 24  r5dev.rvec: rreq's */
	__u32 toread_off;  /* 28  r5dev.toread: upper bios reading the block, waiting */
	__u32 towrite_off; /* 32  r5dev.towrite: upper bios writing it, not yet copied */
	__u32 written_off; /* 36  r5dev.written: upper bios whose data is in the block */
};                         /* 40 */

/* Key of the "seen_inodes" map (paths already sent). 16 bytes. */
struct iodump_inode_key {
	__u64 ino;
	__u32 dev;
	__u32 gen;
};

_Static_assert(sizeof(struct iodump_io_event) == 120, "iodump_io_event size");
_Static_assert(sizeof(struct iodump_batch) == IODUMP_BATCH_HDR + IODUMP_BATCH_MAX * 120,
	       "iodump_batch size");
_Static_assert(__builtin_offsetof(struct iodump_batch, count) == 2, "batch count");
_Static_assert(__builtin_offsetof(struct iodump_batch, ev) == 8, "batch ev");
_Static_assert(__builtin_offsetof(struct iodump_io_event, op) == 2, "op");
_Static_assert(__builtin_offsetof(struct iodump_io_event, flags) == 3, "flags");
_Static_assert(__builtin_offsetof(struct iodump_io_event, path_kind) == 4, "path_kind");
_Static_assert(__builtin_offsetof(struct iodump_io_event, ioflags) == 5, "ioflags");
_Static_assert(__builtin_offsetof(struct iodump_io_event, error) == 6, "error");
_Static_assert(__builtin_offsetof(struct iodump_io_event, start_ns) == 8, "start_ns");
_Static_assert(__builtin_offsetof(struct iodump_io_event, issue_ns) == 16, "issue_ns");
_Static_assert(__builtin_offsetof(struct iodump_io_event, complete_ns) == 24, "complete_ns");
_Static_assert(__builtin_offsetof(struct iodump_io_event, sector) == 32, "sector");
_Static_assert(__builtin_offsetof(struct iodump_io_event, cgroup_id) == 40, "cgroup_id");
_Static_assert(__builtin_offsetof(struct iodump_io_event, ino) == 48, "ino");
_Static_assert(__builtin_offsetof(struct iodump_io_event, ino_dev) == 56, "ino_dev");
_Static_assert(__builtin_offsetof(struct iodump_io_event, ino_gen) == 60, "ino_gen");
_Static_assert(__builtin_offsetof(struct iodump_io_event, dev) == 64, "dev");
_Static_assert(__builtin_offsetof(struct iodump_io_event, bytes) == 68, "bytes");
_Static_assert(__builtin_offsetof(struct iodump_io_event, pid) == 72, "pid");
_Static_assert(__builtin_offsetof(struct iodump_io_event, tid) == 76, "tid");
_Static_assert(__builtin_offsetof(struct iodump_io_event, dirtier_pid) == 80, "dirtier_pid");
_Static_assert(__builtin_offsetof(struct iodump_io_event, cpu) == 84, "cpu");
_Static_assert(__builtin_offsetof(struct iodump_io_event, syscall) == 86, "syscall");
_Static_assert(__builtin_offsetof(struct iodump_io_event, comm) == 88, "comm");
_Static_assert(__builtin_offsetof(struct iodump_io_event, file_id) == 104, "file_id");
_Static_assert(__builtin_offsetof(struct iodump_io_event, upper_dev) == 108, "upper_dev");
_Static_assert(__builtin_offsetof(struct iodump_io_event, upper_start_ns) == 112, "upper_start_ns");
_Static_assert(sizeof(struct iodump_path_event) == 40, "iodump_path_event size");
_Static_assert(__builtin_offsetof(struct iodump_path_event, path_kind) == 2, "path path_kind");
_Static_assert(__builtin_offsetof(struct iodump_path_event, pflags) == 3, "path pflags");
_Static_assert(__builtin_offsetof(struct iodump_path_event, depth) == 4, "path depth");
_Static_assert(__builtin_offsetof(struct iodump_path_event, names_len) == 6, "path names_len");
_Static_assert(__builtin_offsetof(struct iodump_path_event, ino) == 8, "path ino");
_Static_assert(__builtin_offsetof(struct iodump_path_event, dev) == 16, "path dev");
_Static_assert(__builtin_offsetof(struct iodump_path_event, gen) == 20, "path gen");
_Static_assert(__builtin_offsetof(struct iodump_path_event, mnt_id) == 24, "path mnt_id");
_Static_assert(__builtin_offsetof(struct iodump_path_event, sb_dev) == 28, "path sb_dev");
_Static_assert(__builtin_offsetof(struct iodump_path_event, file_id) == 32, "path file_id");
_Static_assert(__builtin_offsetof(struct iodump_path_event, names) == 40, "path names");
_Static_assert(sizeof(struct iodump_inode_key) == 16, "iodump_inode_key size");
_Static_assert(sizeof(struct iodump_raid5_layout) == 40, "iodump_raid5_layout size");
_Static_assert(sizeof(struct iodump_inflight) == 128, "iodump_inflight size");
_Static_assert(sizeof(struct iodump_slot) == 136, "iodump_slot size");

#endif /* IODUMP_H */
