/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * codes.bpf.h — the kernel's numbers in iodump's terms: REQ_OP_* -> IODUMP_OP_*, REQ_*
 * flag bits -> IODUMP_F_* (both looked up in the kernel's BTF), blk_status_t -> errno.
 */
#ifndef IODUMP_CODES_BPF_H
#define IODUMP_CODES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include "iodump.h"
#include "core_fixes.bpf.h"

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

/* A passthrough command (SCSI, NVMe admin or I/O passthrough, a driver's own): no block
 * I/O of the disk's data. REQ_OP_DRV_IN/OUT, and until 5.18 SCSI's own REQ_OP_SCSI_IN/OUT
 * (enum req_opf; the relocation of what the kernel lacks is dead code). */
static __always_inline int op_passthrough(__u32 opf)
{
	__u32 op = opf & 0xff;

	if (op == REQ_OP_VAL(REQ_OP_DRV_IN) || op == REQ_OP_VAL(REQ_OP_DRV_OUT))
		return 1;
	if (!bpf_core_type_exists(enum req_op) &&
	    bpf_core_enum_value_exists(enum req_opf___old, REQ_OP_SCSI_IN___old))
		return op == bpf_core_enum_value(enum req_opf___old, REQ_OP_SCSI_IN___old) ||
		       op == bpf_core_enum_value(enum req_opf___old, REQ_OP_SCSI_OUT___old);
	return 0;
}

#define REQ_BIT(b) (1ULL << bpf_core_enum_value(enum req_flag_bits, b))

/* An empty REQ_PREFLUSH write: a cache flush (iostat counts it as a write), which the
 * block layer's flush machinery completes itself. */
static __always_inline int empty_flush(__u64 opf, __u32 bytes)
{
	return !bytes && (opf & 0xff) == REQ_OP_VAL(REQ_OP_WRITE) &&
	       (opf & REQ_BIT(__REQ_PREFLUSH));
}

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

#endif /* IODUMP_CODES_BPF_H */
