#!/bin/sh
# make's check of a tool's BPF text, so that a typo fails the build instead of the
# tool's first run as root: bpfcheck.sh BUILD TOOL
#
# The built tool prints its text with --ebpf; the first lines, "// cflag: -D...",
# are the options it computed (from BTF, tracefs and its own options), and they are
# passed on as they are. clang -fsyntax-only then compiles the text the way libbcc
# compiles it at run time:
#  - libbcc's flags and -D defines (its loader and kbuild helper: -nostdinc,
#    -D__KERNEL__, -D__BPF_TRACING__, KBUILD_MODNAME, the kernel tree's include
#    order, -include helpers.h ...), run from inside the header tree as libbcc is;
#  - libbcc's own virtual headers (bcc/helpers.h, bcc/bpf.h, bcc/proto.h,
#    bcc/bpf_workaround.h, stdarg.h), cut out of the libbcc.so the tool is linked
#    with, where each is one string;
#  - before each TRACEPOINT_PROBE(cat, ev), the args struct libbcc would insert
#    there, made from the tracepoint's format file by bpfcheck_helper (tpformat.c);
#  - against pyebpf's built-in kernel header set, and also against the tree the
#    tools use on this machine (kheaders.c's order) when that is another one.
# A tool is also run with the options that turn on the #ifdef'd parts of its text,
# which its bpf_text/TOOL.bpf.c lists beside the text, one run a line:
#   // bpfcheck: -p {pid} --min-ms 1
# ({pid}: a running process, {tmp}: a scratch folder). A text with the Python stack
# walker is checked once more with its plain bounded loops (PYEBPF_BOUNDED_LOOPS=1: the
# text a kernel without may_goto gets, python.bpf.h). Errors name
# bpf_text/FILE:LINE (embed_bpf.sh's #line markers). Warnings count as errors: at
# run time they would reach the user's terminal.
#
# Needs clang (CLANG=... to pick one), the kernel's BTF, and tracefs readable
# (root) for tracepoint formats. libbcc's second pass (its rewriter, code
# generation) is not run: errors only it finds still show at run time.
set -eu
build=$1
tool=$2
exe=$build/$tool
helper=$build/bpfcheck_helper
clang=${CLANG:-clang}
me="bpfcheck: $tool"

fail() {
	echo "$me: $*" >&2
	exit 1
}

src=$(dirname "$0")/../../bpf_text/$tool.bpf.c

# The default text, then the variants its source lists (// bpfcheck: OPTIONS).
variants() {
	echo ""
	if grep -q '^#include "python.bpf.h"' "$src"; then echo "@bounded-loops"; fi
	sed -n 's|^// bpfcheck: *||p' "$src" | sed "s|{pid}|$$|g; s|{tmp}|$tmp|g"
}

command -v "$clang" >/dev/null || fail "$clang not found (make deps installs clang)"
[ -r "$src" ] || fail "no $src"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pyebpf-bpfcheck-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/cwd" "$tmp/builtin"

# libbcc's virtual headers: NULs become line ends and line ends \001, so each
# string is a line; a header is the one whose guard opens it. Its text starts
# after its first line end (what precedes is not part of it).
lib=$(ldd "$exe" | awk '$1 ~ /^libbcc\.so/ { print $3; exit }')
[ -r "$lib" ] || fail "cannot find the libbcc.so that $exe is linked with"
tr '\000\n' '\n\001' < "$lib" > "$tmp/strings"
virtual() { # GUARD PATH
	mkdir -p "$(dirname "$tmp/virtual/$2")"
	awk -v g="$1" 'index($0, "#ifndef " g "\001#define " g "\001") {
		sub(/^[^\001]*\001/, ""); print }' "$tmp/strings" |
		tr '\001' '\n' > "$tmp/virtual/$2"
	if [ "$(grep -c "^#define $1\$" "$tmp/virtual/$2")" != 1 ]; then
		fail "$lib: no single built-in /virtual/$2 (guard $1); a libbcc unlike 0.26?"
	fi
}
virtual __BPF_HELPERS_H include/bcc/helpers.h
virtual _UAPI__LINUX_BPF_H__ include/bcc/bpf.h
virtual __HAVE_BUILTIN_BSWAP16__ include/bcc/bpf_workaround.h
virtual __BCC_PROTO_H include/bcc/proto.h
virtual __STDARG_H lib/clang/include/stdarg.h
rm "$tmp/strings"

# The header trees: pyebpf's built-in set, and the one the tools use here if other.
"$helper" builtin "$tmp/builtin" || fail "cannot write the built-in header set"
trees=$tmp/builtin
found=$(TMPDIR=$tmp "$helper" kheaders) || fail "finding kernel headers failed"
[ -z "$found" ] || trees="$trees $(echo "$found" | head -1)"

case $(uname -m) in
x86_64 | i?86) arch=x86 ;;
aarch64* | arm64*) arch=arm64 ;;
arm*) arch=arm ;;
s390x) arch=s390 ;;
ppc*) arch=powerpc ;;
riscv*) arch=riscv ;;
*) arch=$(uname -m) ;;
esac

# The tracepoints whose args struct libbcc inserts (before the function taking one):
# the awk with list=1 names them; with_tp_structs IN OUT inserts them, each followed by
# a #line marker so numbers stay right.
# shellcheck disable=SC2016 # awk's own $2, $3
tp_awk='
	function found(cat, ev,    file, l) {
		if (cat !~ /^[A-Za-z0-9_]+$/ || ev !~ /^[A-Za-z0-9_]+$/)
			return
		if (list) {
			print cat ":" ev
			return
		}
		file = dir "/" cat ":" ev
		print "#line 1 \"<args struct of " cat ":" ev ", as libbcc makes it>\""
		while ((getline l < file) > 0)
			print l
		close(file)
		print "#line " line " " name
	}
	BEGIN { line = 1; name = "\"--ebpf output\"" }
	/^#line [0-9]+ "/ { line = $2; name = $3; if (!list) print; next }
	/^[ \t]*TRACEPOINT_PROBE[ \t]*\(/ {
		s = $0
		sub(/^[ \t]*TRACEPOINT_PROBE[ \t]*\([ \t]*/, "", s)
		cat = s; sub(/[ \t]*,.*/, "", cat)
		ev = s; sub(/^[^,]*,[ \t]*/, "", ev); sub(/[ \t]*\).*/, "", ev)
		found(cat, ev)
	}
	# written out: int tracepoint__CAT__EV(struct tracepoint__CAT__EV *args)
	/^[A-Za-z_].*\([ \t]*struct[ \t]+tracepoint__[A-Za-z0-9_]+__[A-Za-z0-9_]+[ \t]*\*/ {
		s = $0
		sub(/^[^(]*\([ \t]*struct[ \t]+tracepoint__/, "", s)
		sub(/[^A-Za-z0-9_].*/, "", s)
		ev = s; sub(/^.*__/, "", ev)
		found(substr(s, 1, length(s) - length(ev) - 2), ev)
	}
	{ if (!list) print; line++ }'
mkdir "$tmp/tp"
with_tp_structs() { # IN OUT
	new=$(awk -v list=1 "$tp_awk" "$1" | sort -u | while IFS= read -r tp; do
		[ -e "$tmp/tp/$tp" ] || echo "$tp"
	done)
	# shellcheck disable=SC2086 # a word list
	[ -z "$new" ] || "$helper" tpstructs "$tmp/tp" $new ||
		fail "tracepoint format files unreadable (root only; make BPFCHECK= skips the check)"
	awk -v dir="$tmp/tp" "$tp_awk" "$1" > "$2"
}

variants | while IFS= read -r opts; do
	bounded=
	if [ "$opts" = "@bounded-loops" ]; then bounded=1 opts=; fi
	# shellcheck disable=SC2086 # opts is a word list
	if ! PYEBPF_BOUNDED_LOOPS=$bounded "$exe" --ebpf $opts > "$tmp/text.c" 2> "$tmp/err"; then
		cat "$tmp/err" >&2
		fail "$exe --ebpf $opts failed"
	fi
	with_tp_structs "$tmp/text.c" "$tmp/main.c"
	for tree in $trees; do
		set -- -fsyntax-only -Werror -O2 -I "$tmp/cwd" -D__BPF_TRACING__ \
			-Wno-deprecated-declarations -Wno-gnu-variable-sized-type-not-at-end \
			-Wno-pragma-once-outside-header -Wno-address-of-packed-member \
			-Wno-unknown-warning-option -fno-color-diagnostics -x c \
			-nostdinc -isystem "$tmp/virtual/lib/clang/include" \
			-Iarch/"$arch"/include/ -Iarch/"$arch"/include/generated -Iinclude \
			-Iarch/"$arch"/include/uapi -Iarch/"$arch"/include/generated/uapi \
			-Iinclude/uapi -Iinclude/generated/uapi \
			-include ./include/linux/kconfig.h -D__KERNEL__ '-DKBUILD_MODNAME="bcc"' \
			-Wno-unused-value -Wno-pointer-sign -fno-stack-protector \
			-include "$tmp/virtual/include/bcc/bpf.h" \
			-include "$tmp/virtual/include/bcc/bpf_workaround.h" \
			-include "$tmp/virtual/include/bcc/helpers.h" -isystem "$tmp/virtual/include"
		while IFS= read -r flag; do
			if [ -n "$flag" ]; then set -- "$@" "$flag"; fi
		done <<EOF
$(sed -n 's|^// cflag: ||p' "$tmp/text.c")
EOF
		[ "$tree" = "$tmp/builtin" ] && what="pyebpf's built-in headers" ||
			what=$(echo "$found" | tail -1)
		(cd "$tree" && "$clang" "$@" "$tmp/main.c") ||
			fail "the BPF text (${bounded:+PYEBPF_BOUNDED_LOOPS=1 }--ebpf${opts:+ $opts}) does not compile as libbcc" \
				"would compile it, against $what"
	done
done
