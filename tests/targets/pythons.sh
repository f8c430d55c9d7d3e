#!/bin/sh
# The CPython interpreters the tests run against (pyebpf(7), TESTING), one per line:
#   NAME<TAB>COMMAND...
# NAME is e.g. pyenv-3.8, debian-3.11, sid-3.14 (patchelf'ed copy: exe is python) or
# sid-3.14-ldso (started by sid's own loader: exe is ld.so). COMMAND runs the
# interpreter (append a script). Unsupported pyenv versions (2.7, 3.6, 3.7) are listed as
# unsupported-X.Y for the bad-input tests.
#
# Debian sid's 3.13/3.14/3.15 are fetched once with a private apt configuration (the
# system's apt sources stay untouched) and unpacked into $PYEBPF_CACHE (default
# /var/cache/pyebpf); later runs only list them. --no-fetch: list what is there.
set -eu

CACHE=${PYEBPF_CACHE:-/var/cache/pyebpf}
ROOT=$CACHE/sid-pythons
MIRROR=${PYEBPF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SID_VERSIONS="3.13 3.14 3.15"
fetch=1
[ "${1:-}" = "--no-fetch" ] && fetch=0

say() { echo "pythons.sh: $*" >&2; }

fetch_sid() {
	apt=$CACHE/apt
	mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/etc" "$ROOT"
	: > "$apt/status"
	echo "deb [trusted=yes] $MIRROR sid main" > "$apt/etc/sources.list"
	set -- -q -o Dir::Etc::SourceList="$apt/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State="$apt" -o Dir::State::Lists="$apt/lists" -o Dir::State::status="$apt/status" \
		-o Dir::Cache="$apt" -o Dir::Cache::archives="$apt/archives" \
		-o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root \
		-o Debug::NoLocking=true
	say "fetching Debian sid python$SID_VERSIONS into $ROOT (once)"
	apt-get "$@" update >&2
	pkgs=""
	for v in $SID_VERSIONS; do pkgs="$pkgs python$v"; done
	# shellcheck disable=SC2086
	apt-get "$@" -y --download-only install $pkgs >&2
	for deb in "$apt"/archives/*.deb; do
		dpkg -x "$deb" "$ROOT"
	done
	touch "$ROOT/.complete"
}

# A copy whose interpreter and rpath point at sid's loader and libraries: exe is python
# itself, and patchelf adds a LOAD segment (pyproc must map through program headers).
# It lives in its own prefix (lib/ links to sid's stdlib) so its name stays python3.X.
PATCHED=$CACHE/sid-patched
patch_sid() {
	lib=$ROOT/usr/lib/x86_64-linux-gnu
	mkdir -p "$PATCHED/bin" "$PATCHED/lib"
	for v in $SID_VERSIONS; do
		[ -x "$ROOT/usr/bin/python$v" ] && [ ! -x "$PATCHED/bin/python$v" ] || continue
		ln -sfn "$ROOT/usr/lib/python$v" "$PATCHED/lib/python$v"
		cp "$ROOT/usr/bin/python$v" "$PATCHED/bin/python$v.tmp"
		patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath \
			--set-rpath "$lib" "$PATCHED/bin/python$v.tmp" &&
			mv "$PATCHED/bin/python$v.tmp" "$PATCHED/bin/python$v"
	done
}

if [ ! -e "$ROOT/.complete" ] && [ $fetch = 1 ]; then
	fetch_sid || say "fetching the sid interpreters failed; they are not listed"
fi
if [ -e "$ROOT/.complete" ]; then
	if command -v patchelf >/dev/null; then
		patch_sid
	else
		say "patchelf missing (make deps installs it): only the ld.so variants are listed"
	fi
fi

pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
for d in "$pyenv_root"/versions/*; do
	[ -d "$d" ] || continue
	full=$(basename "$d")
	mm=$(echo "$full" | sed -n 's/^\([0-9]*\.[0-9]*\)\..*/\1/p')
	[ -n "$mm" ] || continue
	exe=$d/bin/python$mm
	[ -x "$exe" ] || continue
	case $mm in
	2.* | 3.[0-7]) printf 'unsupported-%s\t%s\n' "$mm" "$exe" ;;
	*) printf 'pyenv-%s\t%s\n' "$mm" "$exe" ;;
	esac
done
[ -x /usr/bin/python3.11 ] && printf 'debian-3.11\t/usr/bin/python3.11\n'
if [ -e "$ROOT/.complete" ]; then
	lib=$ROOT/usr/lib/x86_64-linux-gnu
	for v in $SID_VERSIONS; do
		[ -x "$ROOT/usr/bin/python$v" ] || continue
		[ -x "$PATCHED/bin/python$v" ] && printf 'sid-%s\t%s\n' "$v" "$PATCHED/bin/python$v"
		printf 'sid-%s-ldso\t%s --library-path %s %s\n' "$v" "$lib/ld-linux-x86-64.so.2" "$lib" \
			"$ROOT/usr/bin/python$v"
	done
fi
