#!/bin/sh
# Build ebpf/iodump.bpf.o and ebpf/iodump-noatomics.bpf.o reproducibly.
#
#   ebpf/build.sh           rebuild both objects in place
#   ebpf/build.sh --check   rebuild into a temporary directory; exit 1 if either differs from
#                           the committed one (what .ci/run uses)
#   ebpf/build.sh --out F   write the main object to F (and the other to F's name with
#                           -noatomics before .bpf.o) instead
#
# The source is iodump.bpf.c (the programs), the *.bpf.h headers it includes (one per
# concern; every one of them must be included, which is checked here), iodump.h (shared
# with user space) and vmlinux.h. To check that a change of the source left the code as it
# was, compare the objects with ebpf/same-code.py (README.md, "Changing the source without
# changing the code").
#
# iodump-noatomics.bpf.o is the same source built with -DIODUMP_NO_ATOMICS, for kernels
# that refuse BPF atomic compare-and-exchange (before 5.12); it must hold no such
# instruction, which is checked here.
#
# The object must not depend on where the checkout lives: the compiler runs in one fixed
# directory (/tmp/iodump-ebpf-build, a copy of the sources) on relative file names, and
# -ffile-prefix-map rewrites any absolute path that
# still appears (DWARF, BTF line info) to ".". DWARF is then stripped (llvm-strip
# --strip-debug); .BTF and .BTF.ext stay, they are what CO-RE relocation and the verifier
# need. Tools: clang-19 and llvm-strip-19 (Debian 12 packages clang-19, llvm-19); the
# exact compiler version is part of what makes the bytes, see README.md.
set -eu

CLANG=${CLANG:-clang-19}
STRIP=${LLVM_STRIP:-llvm-strip-19}

here=$(cd "$(dirname "$0")" && pwd -P)
mode=build
out="$here/iodump.bpf.o"
while [ $# -gt 0 ]; do
	case "$1" in
	--check) mode=check ;;
	--out) shift; out=$1 ;;
	-h|--help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "build.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
	shift
done

for t in "$CLANG" "$STRIP"; do
	command -v "$t" >/dev/null 2>&1 || { echo "build.sh: $t not found" >&2; exit 2; }
done

tmp=$(mktemp -d)
# The sources are compiled in one fixed directory, whatever the checkout's path: with the
# prefix maps below no path reaches the object, yet clang-19 was seen to order the BTF
# strings of iodump-noatomics.bpf.o differently when built in /work/main/ebpf than in
# /tmp/ci/ebpf (the same code). One build at a time (flock) owns the directory.
src=/tmp/iodump-ebpf-build
exec 9>"$src.lock"
flock 9
rm -rf "$src"
mkdir -p "$src"
cp "$here"/*.c "$here"/*.h "$src"/
trap 'rm -rf "$tmp" "$src"' EXIT INT TERM

# Compile in $src with relative names only. -fno-ident keeps the compiler's version
# string out of the .comment section; -fdebug-prefix-map and -ffile-prefix-map cover
# paths clang would otherwise record absolutely.
compile() { # compile OUTPUT [DEFINES...]
	o=$1
	shift
	(
		cd "$src"
		"$CLANG" -target bpf -g -O2 -D__TARGET_ARCH_x86 "$@" \
			-Wall -Werror \
			-fno-ident \
			-ffile-prefix-map="$src"=. \
			-fdebug-prefix-map="$src"=. \
			-fdebug-compilation-dir=. \
			-I . \
			-MD -MF "$o.d" \
			-c iodump.bpf.c -o "$o"
	)
	# Every header of this directory is part of the program: one left out is a mistake.
	for h in "$here"/*.bpf.h; do
		if ! grep -q -w -F -- "$(basename "$h")" "$o.d"; then
			echo "build.sh: $(basename "$h") is not included by iodump.bpf.c" >&2
			exit 1
		fi
	done
	"$STRIP" --strip-debug "$o"

	# The stripped object must keep BTF (CO-RE relocations and func/line info live there).
	for sec in .BTF .BTF.ext; do
		if ! llvm-objdump-19 -h "$o" 2>/dev/null | awk '{print $2}' | grep -qx -- "$sec"; then
			echo "build.sh: $sec section missing after strip" >&2
			exit 1
		fi
	done
	# ... and must not mention the directory it was built in, or the checkout.
	for d in "$src" "$here"; do
		if grep -q -F -- "$d" "$o"; then
			echo "build.sh: object contains the directory path $d" >&2
			exit 1
		fi
	done
}
compile "$tmp/iodump.bpf.o"
compile "$tmp/iodump-noatomics.bpf.o" -DIODUMP_NO_ATOMICS
# Kernels before 5.12 refuse any atomic but a plain add, even in code never run.
bad=$(llvm-objdump-19 -d "$tmp/iodump-noatomics.bpf.o" | grep -E '^ *[0-9]+:' |
	grep -E '[[:space:]]lock |atomic|cmpxchg|xchg' |
	grep -vE 'lock \*\(u(32|64) \*\)\(r[0-9]+ \+ 0x[0-9a-f]+\) \+= [rw][0-9]+$' || true)
if [ -n "$bad" ]; then
	echo "build.sh: iodump-noatomics.bpf.o holds an atomic other than add:" >&2
	echo "$bad" | head -n 3 >&2
	exit 1
fi

case "$mode" in
check)
	for f in iodump.bpf.o iodump-noatomics.bpf.o; do
		if [ ! -f "$here/$f" ]; then
			echo "build.sh --check: ebpf/$f is missing" >&2
			exit 1
		fi
		if ! cmp -s "$tmp/$f" "$here/$f"; then
			echo "build.sh --check: ebpf/$f is out of date (rebuild with ebpf/build.sh and commit it;" >&2
			echo "  built with $("$CLANG" --version | head -n1))" >&2
			exit 1
		fi
	done
	echo "ebpf/iodump.bpf.o and ebpf/iodump-noatomics.bpf.o are up to date"
	;;
build)
	na="${out%.bpf.o}-noatomics.bpf.o"
	cp "$tmp/iodump.bpf.o" "$out.tmp.$$"
	mv "$out.tmp.$$" "$out"
	cp "$tmp/iodump-noatomics.bpf.o" "$na.tmp.$$"
	mv "$na.tmp.$$" "$na"
	echo "built $out ($(wc -c < "$out") bytes) and $na ($(wc -c < "$na") bytes)"
	;;
esac
