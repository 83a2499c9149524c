#!/bin/sh
# Build ebpf/iodump.bpf.o reproducibly.
#
#   ebpf/build.sh           rebuild ebpf/iodump.bpf.o in place
#   ebpf/build.sh --check   rebuild into a temporary file; exit 1 if it differs from the
#                           committed ebpf/iodump.bpf.o (what .ci/run uses)
#   ebpf/build.sh --out F   write the object to F instead
#
# The object must not depend on where the checkout lives: the compiler runs inside this
# directory on relative file names, and -ffile-prefix-map rewrites any absolute path that
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
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "build.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
	shift
done

for t in "$CLANG" "$STRIP"; do
	command -v "$t" >/dev/null 2>&1 || { echo "build.sh: $t not found" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Compile in $here with relative names only. -fno-ident keeps the compiler's version
# string out of the .comment section; -fdebug-prefix-map and -ffile-prefix-map cover
# paths clang would otherwise record absolutely.
(
	cd "$here"
	"$CLANG" -target bpf -g -O2 -D__TARGET_ARCH_x86 \
		-Wall -Werror \
		-fno-ident \
		-ffile-prefix-map="$here"=. \
		-fdebug-prefix-map="$here"=. \
		-fdebug-compilation-dir=. \
		-I . \
		-c iodump.bpf.c -o "$tmp/iodump.bpf.o"
)
"$STRIP" --strip-debug "$tmp/iodump.bpf.o"

# The stripped object must keep BTF (CO-RE relocations and func/line info live there).
for sec in .BTF .BTF.ext; do
	if ! llvm-objdump-19 -h "$tmp/iodump.bpf.o" 2>/dev/null | awk '{print $2}' | grep -qx -- "$sec"; then
		echo "build.sh: $sec section missing after strip" >&2
		exit 1
	fi
done
# ... and must not mention the directory it was built in.
if grep -q -F -- "$here" "$tmp/iodump.bpf.o"; then
	echo "build.sh: object contains the build directory path $here" >&2
	exit 1
fi

case "$mode" in
check)
	if [ ! -f "$here/iodump.bpf.o" ]; then
		echo "build.sh --check: ebpf/iodump.bpf.o is missing" >&2
		exit 1
	fi
	if ! cmp -s "$tmp/iodump.bpf.o" "$here/iodump.bpf.o"; then
		echo "build.sh --check: ebpf/iodump.bpf.o is out of date (rebuild with ebpf/build.sh and commit it;" >&2
		echo "  built with $("$CLANG" --version | head -n1))" >&2
		exit 1
	fi
	echo "ebpf/iodump.bpf.o is up to date"
	;;
build)
	cp "$tmp/iodump.bpf.o" "$out.tmp.$$"
	mv "$out.tmp.$$" "$out"
	echo "built $out ($(wc -c < "$out") bytes)"
	;;
esac
