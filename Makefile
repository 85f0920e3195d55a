# logengine -- plain Makefile.  See README.md.
#
#   make            build/liblogengine.a, build/liblogengine.so (and its
#                   versioned file and links), build/logengine
#   make check      build and run the whole test suite (installs the tools
#                   its tests need when run as root: CHECK_DEPS below),
#                   several tests at once (tests/run.sh: LE_JOBS binaries,
#                   LE_TEST_JOBS tests inside those that allow it);
#                   SUITE=lib runs only the library's tests (tests/unit,
#                   tests/fault), not the whole programs of tests/system
#   make asan|ubsan|tsan   the whole suite under a sanitizer (own build dir)
#   make asan-lib|ubsan-lib|tsan-lib   the library's tests under it (CI)
#   make demo       the main job: log millions of records, read them back
#                   (needs only a C compiler)
#   make bench      the quick benchmark preset (BENCH_FLAGS=--scan or --full
#                   for every scan; see bench/bench.c)
#   make install    the header, both libraries, logengine.pc, the CMake
#                   package, the logengine program and the man pages
#                   under $(DESTDIR)$(PREFIX) (PREFIX=/usr/local); make
#                   uninstall removes them
#
# WERROR=1 makes every warning an error, WERROR=0 does not.  The default
# is 1 in a git checkout (the project's own builds: check, the sanitizers,
# CI) and 0 in a release tarball, where a newer compiler's new warnings
# must not stop a user's build.

CC       ?= cc
BUILD    ?= build
OPT      ?= -O2
SAN      ?=
CFLAGS   ?=
OBJCOPY  ?= objcopy
WERROR   ?= $(if $(wildcard .git),1,0)
E_WERROR  = $(if $(filter 1,$(WERROR)),-Werror)
WARN      = -Wall -Wextra $(E_WERROR) -Wshadow -Wstrict-prototypes -Wvla
# Archived segments (.seg.zst) need libzstd (scripts/deps.sh archive);
# without it the library builds, refuses the archive_* settings and
# reports archived segments as unreadable.
ZSTD     := $(shell test -f /usr/include/zstd.h && echo 1)
BASEFLAGS = -std=c11 $(OPT) -g -fPIC -pthread $(WARN) -Iinclude -Isrc $(SAN) \
            $(if $(ZSTD),-DLE_HAVE_ZSTD)
# What a program of the public API is built with: include/ alone, no src/
# (the CLI, the examples): the compiler proves they need no internal header.
PUBFLAGS  = $(filter-out -Isrc,$(BASEFLAGS))
LDLIBS    = -pthread $(if $(ZSTD),-lzstd)

# What this build found (libzstd, libnats, libmicrohttpd), kept in
# $(FEATURES): every object depends on it, so objects made before
# scripts/deps.sh installed a library are made again after it (make demo,
# then make check, on a fresh machine).  Rewritten only when it changes.
FEATURES := $(BUILD)/features
FEATURE_SET := zstd=$(ZSTD) \
  nats=$(shell test -f /usr/include/nats/nats.h && echo 1) \
  mhd=$(shell pkg-config --exists libmicrohttpd 2>/dev/null && echo 1)
$(shell mkdir -p $(BUILD) && { test "$$(cat $(FEATURES) 2>/dev/null)" = \
  "$(FEATURE_SET)" || echo "$(FEATURE_SET)" >$(FEATURES); })

# The library's version, from the header; the shared library's file is
# liblogengine.so.$(SOMAJOR).MINOR.PATCH, its SONAME liblogengine.so.$(SOMAJOR).
# SOMAJOR changes only when a program linked to the old library would
# break (see the growable structs in include/logengine.h).
le_ver = $(shell sed -n 's/^\#define LE_VERSION_$(1) \([0-9]*\)$$/\1/p' include/logengine.h)
VERSION_MAJOR := $(call le_ver,MAJOR)
VERSION  := $(VERSION_MAJOR).$(call le_ver,MINOR).$(call le_ver,PATCH)
SOMAJOR  = 0
SONAME   = liblogengine.so.$(SOMAJOR)
SOFILE   = liblogengine.so.$(SOMAJOR).$(call le_ver,MINOR).$(call le_ver,PATCH)

LIB_SRC  := $(wildcard src/*/*.c)
LIB_HDR  := $(wildcard src/*/*.h)
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/obj/lib/%.o)
TEST_SRC := $(wildcard tests/unit/*.c) $(wildcard tests/system/test_*.c) \
            $(wildcard tests/fault/*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
# SUITE=lib: the library's own tests, without tests/system's programs,
# servers and browsers (CI runs those once, in the plain build).
SUITE    ?= all
LIB_TEST_BIN := $(filter $(BUILD)/tests/unit/% $(BUILD)/tests/fault/%,$(TEST_BIN))
# tests/system/: whole programs.  test_*.c are test binaries, test_*.py
# scripts run as they are (by tests/run.sh, with BUILD set); any other
# .c there is a helper program the scripts start (le_producer).
SYS_SCRIPTS := $(wildcard tests/system/test_*.py)
SYS_HELPERS := $(patsubst tests/system/%.c,$(BUILD)/tests/system/%,\
               $(filter-out $(wildcard tests/system/test_*.c),$(wildcard tests/system/*.c)))

# Two static archives of the same objects:
#   liblogengine.a           the public one (installed): the objects
#                            merged into one, every symbol but the LE_API
#                            functions of include/logengine.h made local,
#                            as the shared library exports them.
#   liblogengine-internal.a  INTERNAL: the objects as compiled, le__
#                            functions reachable.  For tests, fuzzers and
#                            perf tools that need internals; never installed.
# Programs that use only the public API (the CLI, the demo, the benchmark)
# link the public archive, so the linker proves they do.
LIB_A     = $(BUILD)/liblogengine.a
LIB_INT   = $(BUILD)/liblogengine-internal.a
LIB_SO    = $(BUILD)/liblogengine.so $(BUILD)/$(SONAME) $(BUILD)/$(SOFILE)

.PHONY: all check check-run check-long asan ubsan tsan asan-lib ubsan-lib \
        tsan-lib demo bench clean deps deps-bench
all: $(LIB_A) $(LIB_SO) $(BUILD)/logengine $(BUILD)/examples/ship_to_file

# -fvisibility=hidden: only what LE_API marks leaves the shared library.
$(BUILD)/obj/lib/%.o: src/%.c $(FEATURES) $(LIB_HDR) include/logengine.h
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -fvisibility=hidden $(CFLAGS) -c -o $@ $<

$(LIB_INT): $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/public/logengine.o: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(LD) -r -o $@ $^
	$(OBJCOPY) --localize-hidden $@

$(LIB_A): $(BUILD)/public/logengine.o
	rm -f $@
	ar rcs $@ $^

# A sanitizer's runtime is the program's to link, not the library's:
# -z defs (no undefined symbol left) only without one.
$(BUILD)/$(SOFILE): $(LIB_OBJ)
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -Wl,-soname,$(SONAME) \
		$(if $(SAN),,-Wl,-z,defs) -o $@ $^ $(LDLIBS)

$(BUILD)/$(SONAME): $(BUILD)/$(SOFILE)
	ln -sf $(SOFILE) $@

$(BUILD)/liblogengine.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# The tool: tools/logengine.c (main, the table of commands), one file per
# command group, what they share in tools/cli.h.  The commands use the
# public API only: built without -Isrc and linked with the public archive,
# so neither the compiler nor the linker lets them reach an internal name
# (tests/unit/test_layers.c checks their objects too); forward and collect
# are NATS glue over the spool and the collector (le_spool_*,
# le_collector_*).  forward and collect
# speak NATS through libnats (scripts/deps.sh nats), serve HTTP through
# libmicrohttpd (deps.sh observe): each is looked for when the tool is
# built, and without it that command says so while the rest builds with a
# C compiler alone.
TOOL_SRC := $(wildcard tools/*.c)
TOOL_OBJ := $(TOOL_SRC:tools/%.c=$(BUILD)/obj/tools/%.o)
NATS_HAVE = test -f /usr/include/nats/nats.h
MHD_HAVE = pkg-config --exists libmicrohttpd 2>/dev/null
TOOL_CFLAGS = $$($(NATS_HAVE) || echo -DLE_NO_NATS) \
              $$($(MHD_HAVE) && echo -DLE_HAVE_MHD $$(pkg-config --cflags libmicrohttpd))
TOOL_LIBS = $$($(NATS_HAVE) && echo -lnats) \
            $$($(MHD_HAVE) && pkg-config --libs libmicrohttpd && echo -lcrypt)

$(BUILD)/obj/tools/%.o: tools/%.c $(FEATURES) $(wildcard tools/*.h) include/logengine.h
	@mkdir -p $(dir $@)
	$(CC) $(PUBFLAGS) $(CFLAGS) $(TOOL_CFLAGS) -Itools -c -o $@ $<

$(BUILD)/obj/tools/serve.o: tools/dashboard.html

$(BUILD)/logengine: $(TOOL_OBJ) $(LIB_A)
	$(CC) $(PUBFLAGS) $(CFLAGS) -o $@ $(TOOL_OBJ) $(LIB_A) $(TOOL_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(FEATURES) tests/harness.h tests/tool.h tests/logtest.h $(wildcard tests/unit/*.h) $(wildcard tests/fault/*.h) \
                  $(wildcard tests/system/*.h) $(LIB_INT)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -o $@ $< $(LIB_INT) $(LDLIBS)

# Against real nats-servers (libnats: deps.sh nats; without it, the
# binary only says its tests are skipped).
$(BUILD)/tests/system/test_forward $(BUILD)/tests/system/test_hostile_cli: $(BUILD)/tests/system/%: tests/system/%.c $(FEATURES) tests/harness.h tests/tool.h \
                   tests/logtest.h $(wildcard tests/system/*.h) $(LIB_INT)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) $$($(NATS_HAVE) || echo -DLE_NO_NATS) \
		-Itests -Itests/system -o $@ $< $(LIB_INT) \
		$$($(NATS_HAVE) && echo -lnats) $(LDLIBS)

# The in-memory file system the fuzz targets run on, tested against the
# kernel's answers.
$(BUILD)/tests/unit/test_memfs: tests/unit/test_memfs.c tests/memfs.c tests/memfs.h $(FEATURES) tests/harness.h tests/tool.h tests/logtest.h $(LIB_INT)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -o $@ $< tests/memfs.c $(LIB_INT) $(LDLIBS)

# Tests of tools/ code, linked with it.
$(BUILD)/tests/unit/test_progress: tests/unit/test_progress.c tools/progress.c tools/progress.h tests/harness.h tests/tool.h $(LIB_INT)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -Itools -o $@ $< tools/progress.c $(LIB_INT) $(LDLIBS)

# The dashboard's frames, built in process.
$(BUILD)/tests/system/test_frames: tests/system/test_frames.c tools/frame.c tools/livedir.c $(wildcard tools/*.h) tests/harness.h tests/tool.h $(LIB_INT)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -Itools -o $@ $< tools/frame.c tools/livedir.c $(LIB_INT) $(LDLIBS)

$(BUILD)/demo: examples/demo.c $(LIB_A)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(LIB_A) $(LDLIBS)

# A forwarder to a file on the public spool (docs/logengine.3, "Writing
# your own forwarder"): the public header alone (no -Isrc) and the public
# archive, so the build proves a third party can write it.
$(BUILD)/examples/ship_to_file: examples/ship_to_file.c include/logengine.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(PUBFLAGS) $(CFLAGS) -o $@ $< $(LIB_A) $(LDLIBS)
$(BUILD)/tests/system/test_ship_to_file: $(BUILD)/examples/ship_to_file

# The benchmark driver and its competitors (bench/bench.h).  spdlog and glog
# come from Debian packages (scripts/deps.sh bench); spdlog's flags are those
# of Debian's build (pkg-config --cflags spdlog): a shared library using the
# external fmt.
SPDLOG_FLAGS = -DSPDLOG_SHARED_LIB -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL
BENCH_CXXFLAGS = -std=c++17 $(OPT) -g -pthread -Wall -Wextra $(E_WERROR) \
                 -Iinclude -Ibench $(SPDLOG_FLAGS) $(SAN)
BENCH_LIBS = -lspdlog -lfmt -lglog -lm $(LDLIBS)
BENCH_OBJ := $(patsubst bench/%.c,$(BUILD)/obj/bench/%.o,$(wildcard bench/*.c)) \
             $(patsubst bench/%.cc,$(BUILD)/obj/bench/%.o,$(wildcard bench/*.cc))

# deps-bench installs spdlog and glog first (make check has done so).
BENCH_DEPS = $(if $(HAVE_BENCH),,deps-bench)
$(BUILD)/obj/bench/%.o: bench/%.c $(wildcard bench/*.h) include/logengine.h | $(BENCH_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Ibench -c -o $@ $<

$(BUILD)/obj/bench/%.o: bench/%.cc $(wildcard bench/*.h) include/logengine.h | $(BENCH_DEPS)
	@mkdir -p $(dir $@)
	$(CXX) $(BENCH_CXXFLAGS) $(CXXFLAGS) -c -o $@ $<

$(BUILD)/bench: $(BENCH_OBJ) $(LIB_A)
	$(CXX) $(SAN) -o $@ $(BENCH_OBJ) $(LIB_A) $(BENCH_LIBS)

# The scripts/deps.sh groups the suite's tests need: make check installs
# them first when run as root (waiting for another apt's lock; one line a
# group, apt's output in $(BUILD)/deps.log); otherwise a test whose tool is
# missing says "skipped" with the reason (and CI, LE_FAIL_ON_SKIP=1,
# fails).  A test that needs a new tool adds its group here.
CHECK_DEPS = bench fuzz packaging json nats observe syslog archive journal \
             pipeline
export DEPS_LOG ?= $(abspath $(BUILD))/deps.log

# The suite runs in a make of its own, started after deps.sh, so that it
# sees what deps.sh installed: the benchmark driver is built when spdlog
# and glog are there (HAVE_BENCH), its smoke test skipped when not.
check:
	@sh scripts/deps.sh --soft $(CHECK_DEPS)
	@$(MAKE) --no-print-directory check-run \
		HAVE_BENCH=$$(sh scripts/deps.sh --missing bench >/dev/null && echo 1)

CHECK_SYS   = $(filter-out lib,$(SUITE))
CHECK_TESTS = $(if $(CHECK_SYS),$(TEST_BIN) $(SYS_SCRIPTS),$(LIB_TEST_BIN))
# Tests that measure time or load another test would disturb: run one at
# a time after the others.
CHECK_ALONE = $(filter $(addprefix %/,$(ALONE_NAMES)),$(CHECK_TESTS))
ALONE_NAMES = test_serve_abuse.py

check-run: all $(filter $(BUILD)/%,$(CHECK_TESTS)) $(if $(CHECK_SYS),$(SYS_HELPERS)) \
           $(if $(and $(CHECK_SYS),$(HAVE_BENCH)),$(BUILD)/bench)
	@mkdir -p $(BUILD)/tmp
	@BUILD=$(BUILD) LE_CLI=$(BUILD)/logengine LE_CC='$(CC) $(SAN)' \
		sh tests/run.sh $(filter-out $(CHECK_ALONE),$(CHECK_TESTS)) \
		--alone $(CHECK_ALONE)

# The fault tests for longer: hundreds of kill -9 cycles, minutes of fuzz.
check-long: check
	LE_KILL_CYCLES=300 LE_CLI=$(BUILD)/logengine $(BUILD)/tests/fault/test_kill9
	LE_KILL_CYCLES=100 LE_CLI=$(BUILD)/logengine $(BUILD)/tests/fault/test_backtrace_death
	LE_LONG=1 LE_CLI=$(BUILD)/logengine BUILD=$(BUILD) $(BUILD)/tests/system/test_forward _of_three_
	LE_LONG=1 LE_CLI=$(BUILD)/logengine BUILD=$(BUILD) $(BUILD)/tests/system/test_forward _1gb_
	$(MAKE) fuzz-long FUZZ_SECONDS=600

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address -fno-omit-frame-pointer" check
ubsan:
	$(MAKE) BUILD=build-ubsan OPT=-O1 SAN="-fsanitize=undefined -fno-sanitize-recover=all" check
tsan:
	TSAN_OPTIONS="$$TSAN_OPTIONS suppressions=$(CURDIR)/tests/tsan.supp" \
	$(MAKE) BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" check
asan-lib ubsan-lib tsan-lib:
	$(MAKE) $(@:-lib=) SUITE=lib

# Everything make check's tests use, strictly (as non-root: exit 1 when a
# package is missing).
deps:
	sh scripts/deps.sh core $(CHECK_DEPS)

deps-bench:
	sh scripts/deps.sh bench

demo: all $(BUILD)/demo
	$(BUILD)/demo $(BUILD)/demo-logs
	$(BUILD)/logengine verify $(BUILD)/demo-logs
	$(BUILD)/logengine stats $(BUILD)/demo-logs

BENCH_FLAGS ?= --quick
bench: deps-bench all $(BUILD)/bench
	$(BUILD)/bench $(BENCH_FLAGS)

# Small measurement programs behind figures in docs/BENCHMARKS.md.
PERF_TOOLS := $(BUILD)/submit-latency $(BUILD)/trickle-cost $(BUILD)/writer-cost \
              $(BUILD)/durable-cost $(BUILD)/write-limit \
              $(BUILD)/journal-gen $(BUILD)/level-cost $(BUILD)/archive-cost \
              $(BUILD)/burst-floor $(BUILD)/every-cost $(BUILD)/producer-wakes \
              $(BUILD)/csum-cost
.PHONY: perf-tools bench-journal
# cat of deferred records against the frame scan (docs/BENCHMARKS.md)
PERF_TOOLS += $(BUILD)/cat-bench
perf-tools: $(PERF_TOOLS) $(BUILD)/uring-cost $(BUILD)/open-cycle

# An engine's life on memfs against real files (the fuzz targets' floor).
$(BUILD)/open-cycle: perf/open-cycle.c tests/memfs.c tests/memfs.h $(LIB_INT)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -o $@ $< tests/memfs.c $(LIB_INT) $(LDLIBS)

# io_uring against pwrite for the writer's pattern (liburing when there).
URING    := $(shell test -f /usr/include/liburing.h && echo 1)
$(BUILD)/uring-cost: perf/uring-cost.c
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(if $(URING),-DLE_HAVE_URING) -o $@ $< \
		$(if $(URING),-luring) -pthread

# cat --since near the end of a big log, cat -o json against jq
# (perf/journal-bench.py; JOURNAL_FLAGS=--size 1G for a smaller log).
JOURNAL_FLAGS ?=
bench-journal: all $(BUILD)/journal-gen
	sh scripts/deps.sh journal
	BUILD=$(BUILD) python3 perf/journal-bench.py $(JOURNAL_FLAGS)

$(PERF_TOOLS): $(BUILD)/%: perf/%.c perf/perf_engine.h $(LIB_INT)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(LIB_INT) $(LDLIBS)

# ---- install ----
#
# PREFIX and each directory below may be set on the command line; DESTDIR
# stages the whole tree under another root (a package build), and every
# installed file finds the others from where it is: logengine.pc through
# pkg-config's sysroot or prefix, the CMake package from its own place.
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/logengine
BASHCOMPDIR  ?= $(PREFIX)/share/bash-completion/completions
INSTALL      ?= install

# The man pages, each installed in the section its name ends with.  A new
# page is added here, and nowhere else.
MAN_PAGES = docs/logengine.1 docs/logengine.3 $(BUILD)/man/logengine-format.5

# logengine-format(5) is docs/FORMAT.md and then the sections of
# docs/INTERFACES.md (its title and introduction left out), turned into a
# man page, so the page and the documents never differ.
$(BUILD)/man/logengine-format.5: docs/FORMAT.md docs/INTERFACES.md scripts/md2man.awk include/logengine.h
	@mkdir -p $(dir $@)
	{ cat docs/FORMAT.md; sed '1,/^## /{/^## /!d;}' docs/INTERFACES.md; } | \
	awk -v name=logengine-format -v section=5 -v version=$(VERSION) \
	    -v source="docs/FORMAT.md and docs/INTERFACES.md" \
	    -f scripts/md2man.awk >$@

# The templates of packaging/, filled in.  Paths relative to the prefix
# (pkg-config) or to the CMake package's directory, so the tree can move.
SIZEOF_VOID_P = $(shell echo __SIZEOF_POINTER__ | $(CC) -E -P - 2>/dev/null | tail -n 1)
rel = $(shell realpath -m --relative-to='$(1)' '$(2)')
SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' \
	-e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|g' \
	-e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|g' \
	-e 's|@CMAKE_TO_LIBDIR@|$(call rel,$(CMAKEDIR),$(LIBDIR))|g' \
	-e 's|@CMAKE_TO_INCLUDEDIR@|$(call rel,$(CMAKEDIR),$(INCLUDEDIR))|g' \
	-e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|g' \
	-e 's|@SOMAJOR@|$(SOMAJOR)|g' -e 's|@SONAME@|$(SONAME)|g' \
	-e 's|@SOFILE@|$(SOFILE)|g' -e 's|@SIZEOF_VOID_P@|$(SIZEOF_VOID_P)|g' \
	-e 's|@LIBS_PRIVATE@|$(LDLIBS)|g' \
	-e 's|@CMAKE_LIBS@|Threads::Threads$(if $(ZSTD),;zstd)|g'
PKG_FILES = $(BUILD)/pkg/logengine.pc $(BUILD)/pkg/logengineConfig.cmake \
            $(BUILD)/pkg/logengineConfigVersion.cmake

# Filled in again at every install: PREFIX and the directories may differ
# from the last one.
.PHONY: pkg-files install uninstall
pkg-files:
	@mkdir -p $(BUILD)/pkg
	@for f in $(notdir $(PKG_FILES)); do \
		$(SUBST) packaging/$$f.in >$(BUILD)/pkg/$$f || exit 1; done

# Every file install puts, as uninstall removes them.
man_path = $(MANDIR)/man$(subst .,,$(suffix $(1)))/$(notdir $(1))
MAN_FILES = $(foreach m,$(MAN_PAGES),$(call man_path,$(m)))
# `man le_open` opens logengine(3): one .so link page for each function
# and function-like macro of the header, read from the header itself so
# that a new function gets its link without an edit here (read only by
# install and uninstall; LP is a '(' that $(shell) would take for a call).
LP := (
MAN_LINKS = $(shell { sed -n 's/^LE_API.*[ *]\(le_[a-z0-9_]*\)[$(LP)].*/\1/p' \
                 include/logengine.h; sed -n \
                 's/^.define \(le_[a-z0-9_]*\)[$(LP)].*/\1/p' \
                 include/logengine.h; } | sort -u)
MAN_LINK_FILES = $(foreach f,$(MAN_LINKS),$(MANDIR)/man3/$(f).3)
INSTALLED = $(BINDIR)/logengine $(INCLUDEDIR)/logengine.h \
            $(LIBDIR)/liblogengine.a $(LIBDIR)/$(SOFILE) $(LIBDIR)/$(SONAME) \
            $(LIBDIR)/liblogengine.so $(PKGCONFIGDIR)/logengine.pc \
            $(CMAKEDIR)/logengineConfig.cmake \
            $(CMAKEDIR)/logengineConfigVersion.cmake $(MAN_FILES) \
            $(MAN_LINK_FILES) $(BASHCOMPDIR)/logengine

install: all pkg-files $(MAN_PAGES)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR)
	$(INSTALL) -m 755 $(BUILD)/logengine $(DESTDIR)$(BINDIR)/logengine
	$(INSTALL) -m 644 include/logengine.h $(DESTDIR)$(INCLUDEDIR)/logengine.h
	$(INSTALL) -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/liblogengine.a
	$(INSTALL) -m 755 $(BUILD)/$(SOFILE) $(DESTDIR)$(LIBDIR)/$(SOFILE)
	ln -sf $(SOFILE) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liblogengine.so
	$(INSTALL) -m 644 $(BUILD)/pkg/logengine.pc $(DESTDIR)$(PKGCONFIGDIR)/
	$(INSTALL) -m 644 $(BUILD)/pkg/logengineConfig.cmake \
		$(BUILD)/pkg/logengineConfigVersion.cmake $(DESTDIR)$(CMAKEDIR)/
	$(foreach m,$(MAN_PAGES),$(INSTALL) -D -m 644 $(m) \
		$(DESTDIR)$(call man_path,$(m)) &&) true
	@for f in $(MAN_LINKS); do \
		echo '.so man3/logengine.3' >$(DESTDIR)$(MANDIR)/man3/$$f.3 && \
		chmod 644 $(DESTDIR)$(MANDIR)/man3/$$f.3 || exit 1; done
	$(INSTALL) -D -m 644 tools/completion/logengine.bash \
		$(DESTDIR)$(BASHCOMPDIR)/logengine
	@# A real install (no DESTDIR) by root: the loader's cache learns the
	@# new library, so programs linked to it start.
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && \
	    command -v ldconfig >/dev/null 2>&1; then ldconfig; fi

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null

# Shipping to NATS JetStream, measured (perf/forward-bench.c; needs
# nats-server and libnats: deps nats).  FORWARD_FLAGS=--quick for a short run.
FORWARD_FLAGS ?=
$(BUILD)/forward-bench: perf/forward-bench.c perf/ship_bench.h tests/system/natsrv.h tests/tool.h $(LIB_INT)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests/system -o $@ $< $(LIB_INT) -lnats $(LDLIBS)

.PHONY: bench-forward deps-nats
deps-nats:
	sh scripts/deps.sh nats

bench-forward: deps-nats
	$(MAKE) all $(BUILD)/forward-bench
	LE_CLI=$(BUILD)/logengine $(BUILD)/forward-bench $(FORWARD_FLAGS)

# Many forwarders into one cluster and one collector, every record checked
# (perf/many-hosts.c; docs/BENCHMARKS.md, "Many hosts").  HOSTS_FLAGS=
# "--hosts 8 --records 2000 --runs 1" for a short run, --shards N, --live
# for the collector running alongside the forwarders.
HOSTS_FLAGS ?=
$(BUILD)/many-hosts: perf/many-hosts.c perf/ship_bench.h tests/system/natsrv.h tests/tool.h $(LIB_INT)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests/system -o $@ $< $(LIB_INT) -lnats $(LDLIBS)

.PHONY: bench-hosts
bench-hosts: deps-nats
	$(MAKE) all $(BUILD)/many-hosts
	LE_CLI=$(BUILD)/logengine $(BUILD)/many-hosts $(HOSTS_FLAGS)

# Fuzz targets (libFuzzer): rules in tests/fuzz/fuzz.mk.
-include tests/fuzz/fuzz.mk
# The process-log pipeline benchmark and its fixtures (perf/pipeline/).
-include perf/pipeline/pipeline.mk

clean:
	rm -rf build build-asan build-ubsan build-tsan

