# tests/fuzz/fuzz.mk -- libFuzzer targets, one per decoder; included by the
# main Makefile.  The library is gcc-built; fuzzers need clang (libFuzzer),
# so src/*/*.c are compiled again here, instrumented (ASan + UBSan), into
# $(BUILD)/fuzz/obj.  Clang comes from `sh scripts/deps.sh fuzz`.
#
#   fuzz_frame       le__frame_decode (every field set), le__seg_hdr_decode
#   fuzz_checkpoint  le__ckpt_decode, le__ckpt_pick
#   fuzz_segment     segment files read with le_reader_* in all four modes
#   fuzz_recover     the same files and a CHECKPOINT recovered by le_open
#   fuzz_fmt         le__vfmt (le_logf's formatter) against glibc's snprintf
#   fuzz_queue       a dead process's QUEUE file recovered by le_open
#                    (the file targets' files are in memfs: fuzz.h)
#   fuzz_defer       deferred records: descriptors and argument blocks
#   fuzz_sites       a dead process's SITES table kept at le_open
#   fuzz_index       a sealed segment's time index (.idx)
#   fuzz_zst         an archived segment (.seg.zst): header, content (with
#                    libzstd only)
#   fuzz_collect     what a collector decodes of a peer's message, ORIGIN
#   fuzz_fwd         a forwarder's cursor file FORWARD and its key
#   fuzz_stats       the live counters page STATS, as le_live reads it
#   fuzz_cursor      a reader's cursor string, handed back to seek
#
#   make fuzz          build $(BUILD)/fuzz/fuzz_* and run each briefly on its
#                      seed corpus (FUZZ_RUNS runs, at most FUZZ_SMOKE_SECONDS);
#                      fails on any crash, leak or broken invariant
#   make fuzz-long     each target for its goal, one after another: 10 M
#                      executions of a decoder (FUZZ_LONG_RUNS), 1 M of a
#                      target that opens an engine (FUZZ_ENGINE_RUNS: queue,
#                      recover); FUZZ_LONG_RUNS_queue=N sets one.
#                      Hours: recover and queue open an engine (about
#                      1 ms of CPU an input, most of it the engine's own
#                      open and close under ASan: its writer thread,
#                      mappings and allocations; the files are in memfs).
#                      FUZZ_SECONDS caps each (0: no cap), FUZZ_SECONDS_queue=N
#                      one of them; each prints its executions at the end
#   make fuzz-corpus   regenerate the seed corpus tests/fuzz/corpus/
#   FUZZ_TARGETS="segment recover"   only those
#   FUZZ_SRC=DIR       fuzz the library sources in DIR (a fix, before it lands)
#
# What a fuzzer finds goes to $(BUILD)/fuzz/work/TARGET (its growing
# corpus) and $(BUILD)/fuzz/crash/TARGET-*.  To see why an input fails:
#   FUZZ_TRACE=1 build/fuzz/fuzz_segment build/fuzz/crash/segment-crash-...
# (prints every record and problem each read saw); to shrink it first:
#   build/fuzz/fuzz_recover -minimize_crash=1 -max_total_time=60 FILE
# The seed corpus is only read; `make check` runs each target a little
# (tests/unit/test_fuzz_smoke.c).

FUZZ_CC       ?= clang
# The library sources to fuzz (another tree: try a fix before it lands).
FUZZ_SRC      ?= src
FUZZ_TARGETS  := frame checkpoint segment recover fmt queue defer sites \
                 index $(if $(ZSTD),zst) collect fwd stats cursor
FUZZ_OUT       = $(BUILD)/fuzz
FUZZ_SAN      ?= -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS   ?= -std=c11 -O1 -g -fno-omit-frame-pointer -pthread -Wall -Wextra
FUZZ_RUNS     ?= 20000
FUZZ_SMOKE_SECONDS ?= 15
FUZZ_SECONDS  ?= 0
FUZZ_LONG_RUNS ?= 10000000
FUZZ_ENGINE_RUNS ?= 1000000
FUZZ_LONG_RUNS_queue   ?= $(FUZZ_ENGINE_RUNS)
FUZZ_LONG_RUNS_recover ?= $(FUZZ_ENGINE_RUNS)
FUZZ_ARGS     ?=
# Inputs larger than these bring nothing new and only slow a run down.
FUZZ_MAXLEN_frame      ?= 4096
FUZZ_MAXLEN_segment    ?= 8192
FUZZ_MAXLEN_checkpoint ?= 1200
FUZZ_MAXLEN_recover    ?= 8192
FUZZ_MAXLEN_fmt        ?= 1024
FUZZ_MAXLEN_queue      ?= 8261
FUZZ_MAXLEN_defer      ?= 2048
FUZZ_MAXLEN_sites      ?= 8400
FUZZ_MAXLEN_index      ?= 4096
FUZZ_MAXLEN_zst        ?= 4096
FUZZ_MAXLEN_collect    ?= 4096
FUZZ_MAXLEN_fwd        ?= 1024
FUZZ_MAXLEN_stats      ?= 4097
FUZZ_MAXLEN_cursor     ?= 1024
# fuzz_segment writes files on every run: a RAM file system when there is one.
FUZZ_TMPDIR   ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo $${TMPDIR:-/tmp})

# Archives are read as the library is built: with libzstd when it is there
# (fuzz_zst needs it).
FUZZ_ZSTD      = $(if $(ZSTD),-DLE_HAVE_ZSTD)
FUZZ_LIB_OBJ   = $(patsubst $(FUZZ_SRC)/%.c,$(FUZZ_OUT)/obj/%.o,$(wildcard $(FUZZ_SRC)/*/*.c))
FUZZ_BINS      = $(FUZZ_TARGETS:%=$(FUZZ_OUT)/fuzz_%)

.PHONY: fuzz fuzz-build fuzz-long fuzz-corpus
# Objects reached through two pattern rules; keep them between builds.
.PRECIOUS: $(FUZZ_OUT)/obj/%.o

fuzz-build: $(FUZZ_BINS)

$(FUZZ_OUT)/obj/%.o: $(FUZZ_SRC)/%.c $(wildcard $(FUZZ_SRC)/*/*.h) include/logengine.h \
                    $(FEATURES) tests/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(FUZZ_ZSTD) -Iinclude -I$(FUZZ_SRC) -c -o $@ $<

$(FUZZ_OUT)/fuzz_recover: tests/fuzz/fuzz_segment.c
$(FUZZ_BINS): tests/fuzz/fuzz.h tests/memfs.h
$(FUZZ_OUT)/fuzz_fmt: tests/unit/fmt_gen.h
# Every target links memfs (fuzz.h): the file targets' files live there.
# Sanitized, but without coverage: its branches are the test's, not
# something for the fuzzer to explore.
$(FUZZ_OUT)/memfs.o: tests/memfs.c tests/memfs.h $(FUZZ_SRC)/base/os.h tests/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -Iinclude -I$(FUZZ_SRC) -c -o $@ $<
$(FUZZ_OUT)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OUT)/memfs.o $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer $(FUZZ_ZSTD) -Iinclude -I$(FUZZ_SRC) -Itests -o $@ $< $(FUZZ_OUT)/memfs.o $(FUZZ_LIB_OBJ) -pthread $(LDLIBS)

# $(call fuzz_run,TARGET,LIMITS): one fuzzer on its own corpus and the seeds.
fuzz_run = mkdir -p $(FUZZ_OUT)/work/$(1) $(FUZZ_OUT)/crash && \
	TMPDIR=$(FUZZ_TMPDIR) $(FUZZ_OUT)/fuzz_$(1) $(2) \
	    -max_len=$(FUZZ_MAXLEN_$(1)) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_OUT)/crash/$(1)- $(FUZZ_ARGS) \
	    $(FUZZ_OUT)/work/$(1) tests/fuzz/corpus/$(1)

# Every target runs even when one fails, so one report shows them all.
fuzz: $(FUZZ_BINS)
	@st=0; $(foreach t,$(FUZZ_TARGETS),echo "== fuzz_$(t)"; \
	    if $(call fuzz_run,$(t),-runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_SMOKE_SECONDS)) \
	        2>$(FUZZ_OUT)/fuzz_$(t).log; \
	    then grep -E '^stat::number_of_executed_units' $(FUZZ_OUT)/fuzz_$(t).log; \
	    else grep -v '^    #' $(FUZZ_OUT)/fuzz_$(t).log | tail -n 30; st=1; fi;) \
	[ $$st -eq 0 ] && echo "fuzz: all targets ran clean" || \
	    { echo "fuzz: FAILED (inputs in $(FUZZ_OUT)/crash/)"; exit 1; }

fuzz-long: $(FUZZ_BINS)
	@st=0; $(foreach t,$(FUZZ_TARGETS),echo "== fuzz_$(t): $(or $(FUZZ_LONG_RUNS_$(t)),$(FUZZ_LONG_RUNS)) runs"; \
	    if $(call fuzz_run,$(t),-runs=$(or $(FUZZ_LONG_RUNS_$(t)),$(FUZZ_LONG_RUNS)) -max_total_time=$(or $(FUZZ_SECONDS_$(t)),$(FUZZ_SECONDS))) \
	        2>$(FUZZ_OUT)/fuzz_$(t)-long.log; \
	    then grep -E '^stat::' $(FUZZ_OUT)/fuzz_$(t)-long.log; \
	    else grep -v '^    #' $(FUZZ_OUT)/fuzz_$(t)-long.log | tail -n 30; st=1; fi;) \
	[ $$st -eq 0 ] && echo "fuzz-long: all targets ran clean" || \
	    { echo "fuzz-long: FAILED (inputs in $(FUZZ_OUT)/crash/)"; exit 1; }

$(FUZZ_OUT)/mkcorpus: tests/fuzz/mkcorpus.c $(LIB_INT)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(LIB_INT) $(LDLIBS)

fuzz-corpus: $(FUZZ_OUT)/mkcorpus
	rm -rf tests/fuzz/corpus
	$(FUZZ_OUT)/mkcorpus tests/fuzz/corpus
