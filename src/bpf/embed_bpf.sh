#!/bin/sh
# Turns BPF text into a C string: embed_bpf.sh SYMBOL FILE > out.c
# Local #include "x.h" lines are inlined (from FILE's folder) with #line markers, so
# clang's errors at run time name the real file and line. A marker inside a block
# that the preprocessor skips has no effect, so one also follows every #else, #elif
# and #endif: the lines after an #ifdef'd-out include are numbered right too. And
# one follows each TRACEPOINT_PROBE(cat, ev) line: libbcc inserts the args struct,
# several lines, before it, which shifted every later line's number.
set -eu
symbol=$1
file=$2
dir=$(dirname "$file")
awk -v dir="$dir" -v symbol="$symbol" '
function emit(s) {
	gsub(/\\/, "&&", s); gsub(/"/, "\\\"", s); gsub(/\t/, "\\t", s)
	printf "\t\"%s\\n\"\n", s
}
function inline(path,    line, n, inc, resync) {
	if (path in busy) { print "embed_bpf.sh: include loop at " path > "/dev/stderr"; exit 1 }
	busy[path] = 1
	emit("#line 1 \"" path "\"")
	n = 0
	while ((getline line < path) > 0) {
		n++
		if (line ~ /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/) {
			inc = line
			sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
			if ((getline tmp < (dir "/" inc)) >= 0) {
				close(dir "/" inc)
				inline(dir "/" inc)
				emit("#line " (n + 1) " \"" path "\"")
				continue
			}
		}
		emit(line)
		if (line ~ /^[ \t]*#[ \t]*(else|elif|endif)([^A-Za-z0-9_]|$)/ ||
		    line ~ /^[ \t]*TRACEPOINT_PROBE[ \t]*\([^)]*\)/)
			resync = 1
		if (resync && line !~ /\\$/) {
			emit("#line " (n + 1) " \"" path "\"")
			resync = 0
		}
	}
	close(path)
	delete busy[path]
}
BEGIN {
	printf "/* Generated from %s by src/bpf/embed_bpf.sh: do not edit. */\n", ARGV[1]
	printf "const char %s[] =\n", symbol
	inline(ARGV[1])
	printf ";\n"
	ARGV[1] = ""
}
' "$file"
