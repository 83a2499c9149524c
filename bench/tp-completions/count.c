// SPDX-License-Identifier: GPL-2.0
/*
 * Loader for count.bpf.o: count MAJOR, run until SIGINT/SIGTERM, print the counters.
 *   count OBJECT MAJOR
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *rodata, *bss;
	int major, zero = 0;
	__u64 v[4];

	if (argc != 3) {
		fprintf(stderr, "usage: %s OBJECT MAJOR\n", argv[0]);
		return 2;
	}
	major = atoi(argv[2]);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "count: cannot open %s\n", argv[1]);
		return 1;
	}
	rodata = bpf_object__find_map_by_name(obj, ".rodata");
	if (!rodata || bpf_map__set_initial_value(rodata, &major, sizeof(major)) ||
	    bpf_object__load(obj)) {
		fprintf(stderr, "count: cannot load %s\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program(prog, obj) {
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "count: cannot attach %s\n", bpf_program__name(prog));
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "count: attached\n");
	while (!stop)
		pause();
	bss = bpf_object__find_map_by_name(obj, ".bss");
	if (!bss || bpf_map_lookup_elem(bpf_map__fd(bss), &zero, v)) {
		fprintf(stderr, "count: cannot read the counters\n");
		return 1;
	}
	printf("%llu %llu %llu %llu\n", (unsigned long long)v[0], (unsigned long long)v[1],
	       (unsigned long long)v[2], (unsigned long long)v[3]);
	return 0;
}
