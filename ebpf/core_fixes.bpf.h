/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * core_fixes.bpf.h — what differs between kernels, for CO-RE: "___old" flavours of types
 * that were renamed or changed (enum req_opf before 5.19, struct page's flags before 6.17,
 * struct bio before 5.12's bi_bdev and the 5.10 gendisk/hd_struct behind it; since 7.0
 * struct dentry's alias and struct page's compound_info) and the
 * helpers a kernel may lack (HAVE_TASK_*). Each flavour is relocated against the running
 * kernel's BTF; the branch for the layout it does not have is dead code there.
 */
#ifndef IODUMP_CORE_FIXES_BPF_H
#define IODUMP_CORE_FIXES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* REQ_OP_VAL(REQ_OP_x): the kernel's number of REQ_OP_x (for norm_op(), codes.bpf.h), from
 * its BTF: enum req_op, or enum req_opf before 5.19 (the values the flavour below gives are
 * never used: CO-RE relocates them; the flavour the kernel lacks is dead code). */
enum req_opf___old {
	REQ_OP_READ___old = 0,
	REQ_OP_WRITE___old = 1,
	REQ_OP_FLUSH___old = 2,
	REQ_OP_DISCARD___old = 3,
	REQ_OP_SECURE_ERASE___old = 5,
	REQ_OP_WRITE_ZEROES___old = 9,
	REQ_OP_ZONE_APPEND___old = 13,
	REQ_OP_SCSI_IN___old = 32,
	REQ_OP_SCSI_OUT___old = 33,
	REQ_OP_DRV_IN___old = 34,
	REQ_OP_DRV_OUT___old = 35,
};

#define REQ_OP_VAL(x)                                                                      \
	(bpf_core_type_exists(enum req_op) ? bpf_core_enum_value(enum req_op, x) :          \
					     bpf_core_enum_value(enum req_opf___old, x##___old))

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

/* A dentry's place on its inode's alias list: dentry->d_u.d_alias until 6.19, d_alias in
 * an anonymous union since (7.0). The dentry of a list node, or NULL when the kernel has
 * neither (user space then says paths are off: record/src/bpf.rs, field_checks). */
struct dentry___anon_alias {
	struct hlist_node d_alias;
} __attribute__((preserve_access_index));

static __always_inline struct dentry *alias_dentry(struct hlist_node *first)
{
	if (!first)
		return NULL;
	if (bpf_core_field_exists(struct dentry, d_u.d_alias))
		return (void *)first - bpf_core_field_offset(struct dentry, d_u.d_alias);
	if (bpf_core_field_exists(struct dentry___anon_alias, d_alias))
		return (void *)first - bpf_core_field_offset(struct dentry___anon_alias, d_alias);
	return NULL;
}

/* The first dentry on an inode's alias list (inode->i_dentry), or NULL; NULL as well on a
 * kernel whose struct inode has no i_dentry (user space says paths are off). */
static __always_inline struct dentry *inode_alias(struct inode *inode)
{
	if (!bpf_core_field_exists(struct inode, i_dentry))
		return NULL;
	return alias_dentry(BPF_CORE_READ(inode, i_dentry.first));
}

/* A tail page's head, for the page cache behind a large folio: page->compound_head until
 * 6.19 (bit 0 set: the head's address + 1); page->compound_info since 7.0, which holds that,
 * or, where the size of struct page is a power of two, a mask that the tail's own address
 * is ANDed with (bit 0 set too; told apart: a mask is ones down to some bit, then zeros,
 * which no address of the vmemmap is). The head's address + 1 for a tail page; 0 for a head
 * or order-0 page, and when the kernel has neither field (record/src/bpf.rs says so). */
struct page___compound_info {
	unsigned long compound_info;
} __attribute__((preserve_access_index));

static __always_inline __u64 compound_info_head(__u64 page_bits)
{
	__u64 w = 0, m;

	if (!bpf_core_field_exists(struct page___compound_info, compound_info))
		return 0;
	bpf_core_read(&w, sizeof(w), &((struct page___compound_info *)page_bits)->compound_info);
	if (!(w & 1))
		return 0;
	m = w & ~1ULL;
	if (((~m) & (~m + 1)) == 0)
		return (page_bits & m) | 1;
	return w;
}

/* Before 5.12 a bio names its disk and partition number, not a block_device, and
 * partitions are struct hd_struct (5.10's layout; relocated, never used on newer kernels):
 * bio_target() in start.bpf.h. */
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

/* Before 5.15 a request_queue names no disk; a request names its own (rq_disk, gone in
 * 5.19): rq_disk_target() in start.bpf.h. */
struct request___old {
	struct gendisk___old *rq_disk;
} __attribute__((preserve_access_index));

/* Helpers this kernel has, from its BTF (enum bpf_func_id): a call of one it lacks sits in
 * a branch the verifier sees is never taken. bpf_get_current_task_btf: 5.11;
 * bpf_task_pt_regs: 5.15. */
#define HAVE_TASK_BTF bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)
#define HAVE_TASK_PT_REGS bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)

#endif /* IODUMP_CORE_FIXES_BPF_H */
