/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * read.bpf.h — how the program reads kernel memory: the two program flavours (BTF, RAW)
 * and RD(), which reads a chain of fields with a direct load in one and BPF_CORE_READ in
 * the other; ptr_bits() and key_of(), a pointer's numeric value; rdonly_cast() and
 * IOD_CAST(), which turn a pointer held as a number back into a BTF-typed one.
 */
#ifndef IODUMP_READ_BPF_H
#define IODUMP_READ_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"

/* ---------------------------------------------------------------------------------------
 * Reading kernel memory: one body, two program flavours
 *
 * RD(btf, p, a, b, ...) reads p->a->b... Every program body (the handlers in the other
 * headers) is written once and instantiated twice with a constant `btf` argument (the
 * functions are always_inline, so the compiler drops the other branch):
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

#endif /* IODUMP_READ_BPF_H */
