#!/bin/sh
# make's check of the JSON keys a tracker sets against its schemas, so that a typo
# in a key fails the build instead of a run as root (where the sinks only warn:
# "record ... has a key that is not in its schema"): keycheck.sh BUILD FILE...
#
# Each key is a string literal in a key's place: the second argument of
# json_object_set*, json_set_* and record_set_int_or_null; the "...key" arguments of
# the file's own setters (a static function whose first parameter is a json_t * and
# whose key parameters are named key or *_key); the literals of an array named
# *_keys and the first literal of each row of a struct array with a member
# "const char *key". Keys of an object that is not a record (an element of a list
# in a field) are left out when its declaration says so:
#	json_t *u = json_object(); /* not a record (keycheck.sh) */
# Every key must be a field name that the file's tool prints with
# --fields: src/trackers/TOOL.c or TOOL_*.c is TOOL's; the shared record setters
# (record.c, pytargets.c, pyebpf_bpf.c) are checked against pymonitor, which prints
# every tracker's fields. Errors name FILE:LINE.
set -eu
build=$1
shift
tmp=${TMPDIR:-/tmp}/keycheck.$$
trap 'rm -f "$tmp"' EXIT INT TERM
status=0

for file; do
	base=${file##*/}
	base=${base%.c}
	case $file in
	src/trackers/*)
		tool=$base
		while [ ! -x "$build/$tool" ] && [ "$tool" != "${tool%_*}" ]; do
			tool=${tool%_*}
		done
		;;
	*) tool=pymonitor ;;
	esac
	if [ ! -x "$build/$tool" ]; then
		echo "keycheck: $file: no tool $build/$tool" >&2
		exit 1
	fi
	# --fields: a header line, then metric kind name type unit meaning
	"$build/$tool" --fields | awk 'NR > 1 { print $3 }' | sort -u > "$tmp"
	awk -v file="$file" -v fieldsfile="$tmp" '
	BEGIN {
		while ((getline f < fieldsfile) > 0)
			field[f] = 1
		n = split("json_object_set json_object_set_new json_object_set_nocheck " \
			  "json_object_set_new_nocheck json_set_str json_set_strn json_set_int " \
			  "json_set_real json_set_hex record_set_int_or_null", s, " ")
		for (i = 1; i <= n; i++)
			setter[s[i]] = "2"
		bad = 0
	}
	{ line[NR] = $0 }
	END {
		# the file'"'"'s own setters: f(json_t *o, ..., const char *key, ...)
		for (i = 1; i <= NR; i++) {
			if (line[i] !~ /^static [^(]*[a-z_0-9]+\(json_t \*[a-z_0-9]+,.*\)$/)
				continue
			name = line[i]
			sub(/\(.*/, "", name)
			sub(/.*[^a-z_0-9]/, "", name)
			params = line[i]
			sub(/^[^(]*\(/, "", params)
			sub(/\)$/, "", params)
			np = split(params, p, ", ")
			pos = ""
			for (k = 1; k <= np; k++)
				if (p[k] ~ /^const char \*([a-z_0-9]+_)?key$/)
					pos = pos (pos == "" ? "" : " ") k
			if (pos != "")
				setter[name] = pos
		}
		for (i = 1; i <= NR; i++) {
			# calls of setters, their arguments read up to three lines on
			text = line[i] " " line[i + 1] " " line[i + 2]
			off = 0
			while (off < length(line[i]) && match(substr(text, off + 1), /[a-z_0-9]+\(/)) {
				name = substr(text, off + RSTART, RLENGTH - 1)
				before = off + RSTART > 1 ? substr(text, off + RSTART - 1, 1) : " "
				args = substr(text, off + RSTART + RLENGTH)
				if (off + RSTART > length(line[i]))
					break
				off += RSTART + RLENGTH - 1
				if ((name in setter) && before !~ /[a-z_0-9.>]/)
					check_call(args, setter[name], i)
			}
			# objects that are not records
			if (line[i] ~ /json_t \*[a-z_0-9]+ = json_object\(\);.*keycheck/) {
				v = line[i]
				sub(/.*json_t \*/, "", v)
				sub(/ .*/, "", v)
				notrecord[v] = 1
			}
			# arrays of keys
			if (line[i] ~ /[a-z_0-9]+_keys\[[A-Z_0-9]*\] = \{/)
				inkeys = 1
			else if (line[i] ~ /const char \*key;/)
				keymember = 1
			else if (keymember && line[i] ~ /^[ \t]*\} [a-z_0-9]+\[\] = \{/)
				inrows = 1
			else if (inkeys || inrows) {
				if (line[i] ~ /^[ \t]*\};/) {
					inkeys = inrows = keymember = 0
					continue
				}
				l = line[i]
				re = inkeys ? "\"[^\"]*\"" : "\\{ *\"[^\"]*\""
				while (match(l, re)) {
					k = substr(l, RSTART, RLENGTH)
					sub(/^\{ */, "", k)
					check(substr(k, 2, length(k) - 2), i)
					l = substr(l, RSTART + RLENGTH)
				}
			}
		}
		exit bad
	}
	# args: the text after "name(", positions: "2" or "2 3"
	function check_call(args, positions, ln,    depth, c, j, a, arg, np, p, k) {
		depth = 0
		a = 1
		arg[1] = ""
		for (j = 1; j <= length(args); j++) {
			c = substr(args, j, 1)
			if (c == "\"") {
				k = j + 1
				while (k <= length(args) && substr(args, k, 1) != "\"")
					k += substr(args, k, 1) == "\\" ? 2 : 1
				arg[a] = arg[a] substr(args, j, k - j + 1)
				j = k
				continue
			}
			if (c == "(")
				depth++
			if (c == ")" && depth-- == 0)
				break
			if (c == "," && depth == 0) {
				arg[++a] = ""
				continue
			}
			arg[a] = arg[a] c
		}
		c = arg[1]
		gsub(/^[ \t]+|[ \t]+$/, "", c)
		if (c in notrecord)
			return
		np = split(positions, p, " ")
		for (k = 1; k <= np; k++) {
			c = arg[p[k]]
			gsub(/^[ \t]+|[ \t]+$/, "", c)
			if (c ~ /^"[^"]*"$/)
				check(substr(c, 2, length(c) - 2), ln)
		}
	}
	function check(key, ln) {
		if (!(key in field)) {
			printf "%s:%d: key \"%s\" is not a field of %s --fields\n", file, ln, key, tool > "/dev/stderr"
			bad = 1
		}
	}
	' tool="$tool" "$file" || status=1
done
exit $status
