# pyebpf: small eBPF tools for CPython processes and the network around them.
# Targets: all check demo install deps bench clean (unit, integration: parts of check).
# V=1 shows the commands; SAN=1 builds with ASan/UBSan into build-san/; BPFCHECK=
# leaves out the check of the BPF text that `all` runs (src/bpf/bpfcheck.sh).

VERSION := 0.1.0
PREFIX ?= /usr/local
DESTDIR ?=
SAN ?=
BUILD ?= $(if $(SAN),build-san,build)
# BPFCHECK= skips the build's check of the BPF text (it needs clang, BTF and root)
BPFCHECK ?= 1

# The tools are the mains in tools/; adding a tool adds tools/<tool>.c and
# bpf_text/<tool>.bpf.c (and its man page), nothing here.
TOOLS := $(patsubst tools/%.c,%,$(wildcard tools/*.c))
BPF_TOOLS := $(patsubst bpf_text/%.bpf.c,%,$(wildcard bpf_text/*.bpf.c))
# src/ is in layers, one folder each (pyebpf(7), ARCHITECTURE): base, host, bpf,
# python, run, trackers. src/bpf/bpfcheck_helper.c is a main of the build's BPF text
# check, not a module.
SRC_DIRS := $(sort $(dir $(wildcard src/*/*.c)))
LIB_SRCS := $(filter-out src/bpf/bpfcheck_helper.c,$(wildcard src/*/*.c))
UNIT_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))

PKGS := libbcc jansson libbpf
# the database sinks (src/run/sink_sqlite.c, sink_clickhouse.c)
PKGS += libcurl sqlite3
CC ?= cc
CFLAGS ?= -O2 -g
# snprintf into fixed buffers truncates on purpose (an over-long path is then not
# found); gcc warns about that, clang has no such warning (nor the option)
NO_FORMAT_TRUNCATION := $(shell $(CC) -Werror -Wformat-truncation -x c -c -o /dev/null \
	/dev/null 2>/dev/null && echo -Wno-format-truncation)
CFLAGS += -std=gnu11 -Wall -Wextra -Werror $(NO_FORMAT_TRUNCATION) -MMD -MP
CPPFLAGS += $(SRC_DIRS:%=-I%) -Ibpf_text -DPYEBPF_VERSION='"$(VERSION)"'
ifneq ($(SAN),)
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# Debian packages the build, the tests and the demo need (make deps installs them).
DEB_BUILD := make gcc clang pkg-config libbpfcc-dev libbpf-dev libjansson-dev libelf-dev \
	zlib1g-dev linux-headers-amd64 mandoc
DEB_TEST := libcmocka-dev python3 python3-pytest iproute2 nftables ethtool bpfcc-tools bpftool \
	binutils patchelf python3-gunicorn wrk uwsgi-core uwsgi-plugin-python3 python3.11 procps \
	util-linux debootstrap jq groff-base
DEB_TEST += libcurl4-openssl-dev libsqlite3-dev clickhouse-server  # the database sinks and their tests

# Debian's interpreter: pytest is its package (a pyenv python3 may come first on PATH).
PYTEST ?= /usr/bin/python3 -m pytest

Q := $(if $(V),,@)
say = $(if $(V),,@printf '  %-7s %s\n' $(1) $(2);)

.PHONY: all check unit integration demo install deps bench clean
# Objects and generated sources stay: make deleted them as intermediates after a first
# build, and the next one, which sees them in the .d files, made everything again.
.SECONDARY:
all: $(TOOLS:%=$(BUILD)/%) $(if $(BPFCHECK),$(BPF_TOOLS:%=$(BUILD)/bpfcheck/%.ok))

$(BUILD)/lib/%.o: src/%.c
	$(call say,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -c -o $@ $<

# The library holds the trackers and their BPF texts too: a tool links what it runs.
$(BUILD)/libpyebpf.a: $(LIB_SRCS:src/%.c=$(BUILD)/lib/%.o) $(BPF_TOOLS:%=$(BUILD)/gen/%_bpf.o)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# BPF text, with its local includes inlined, as a C string <tool>_bpf_text.
$(BUILD)/gen/%_bpf.c: bpf_text/%.bpf.c $(wildcard bpf_text/*.h) src/bpf/embed_bpf.sh
	$(call say,EMBED,$@)
	$(Q)mkdir -p $(@D)
	$(Q)sh src/bpf/embed_bpf.sh $*_bpf_text $< > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/%_bpf.o: $(BUILD)/gen/%_bpf.c
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tools/%.o: tools/%.c
	$(call say,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/%: $(BUILD)/tools/%.o $(BUILD)/libpyebpf.a
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lelf -lz -lm

# The BPF text compiled as libbcc would compile it (clang -fsyntax-only), so a typo
# fails here, naming bpf_text/FILE:LINE; see src/bpf/bpfcheck.sh for what it uses.
$(BUILD)/bpfcheck_helper: $(BUILD)/lib/bpf/bpfcheck_helper.o $(BUILD)/libpyebpf.a
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lelf -lz -lm

$(BUILD)/bpfcheck/%.ok: $(BUILD)/% $(BUILD)/bpfcheck_helper src/bpf/bpfcheck.sh
	$(call say,BPFCHK,$*)
	$(Q)mkdir -p $(@D)
	$(Q)sh src/bpf/bpfcheck.sh $(BUILD) $* && touch $@

$(BUILD)/unit/%: tests/unit/%.c $(BUILD)/libpyebpf.a
	$(call say,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.a,$^) -lcmocka $(PKG_LIBS) -lelf -lz -lm

# Test programs that run trackers in one process (tests/integration/*.c).
TEST_PROGS := $(patsubst tests/integration/%.c,%,$(wildcard tests/integration/*.c))
$(BUILD)/tests/%: tests/integration/%.c $(BUILD)/libpyebpf.a
	$(call say,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.a,$^) $(PKG_LIBS) -lelf -lz -lm

# The README's test command: installs what is missing, builds, runs every test; the
# unit tests also as an ASan/UBSan build (in $(BUILD)-san).
check: deps
	$(Q)$(MAKE) --no-print-directory all unit
	$(Q)$(if $(SAN),,$(MAKE) --no-print-directory SAN=1 BUILD=$(BUILD)-san unit)
	$(Q)$(MAKE) --no-print-directory integration

unit: $(UNIT_TESTS:%=$(BUILD)/unit/%)
	$(Q)set -e; for t in $^; do echo "== $$t"; $$t; done

integration: all $(TEST_PROGS:%=$(BUILD)/tests/%)
	$(Q)PYEBPF_BUILD=$(abspath $(BUILD)) $(PYTEST) -ra tests/integration

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tests/targets/demo.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/share/man/man7
	install -m 0755 $(TOOLS:%=$(BUILD)/%) $(DESTDIR)$(PREFIX)/sbin/
	install -m 0644 $(wildcard man/man8/*.8) $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 $(wildcard man/man7/*.7) $(DESTDIR)$(PREFIX)/share/man/man7/

# Quick when everything is there: apt runs only for what is missing.
deps:
	$(Q)missing=$$(for p in $(DEB_BUILD) $(DEB_TEST); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "deps: installing" $$missing; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

bench: all $(TEST_PROGS:%=$(BUILD)/tests/%)
	$(Q)bench/run.sh $(BUILD)

clean:
	rm -rf build build-san build-clang

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
