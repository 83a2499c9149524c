/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * dirtier.bpf.h — the process that dirtied a file's pages, for writeback: on_dirty_folio
 * (writeback_dirty_folio / writeback_dirty_page) records dirtiers[inode] = tgid, which the
 * start of a page-cache write reads (start.bpf.h), and dirtier_wanted() asks it for the
 * pid filter.
 */
#ifndef IODUMP_DIRTIER_BPF_H
#define IODUMP_DIRTIER_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "iodump.h"
#include "settings.bpf.h"
#include "maps.bpf.h"
#include "read.bpf.h"
#include "file.bpf.h"

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

#endif /* IODUMP_DIRTIER_BPF_H */
