# logengine -- plain Makefile.  See README.md.
#
#   make            build/liblogengine.a, build/liblogengine.so, build/logengine
#   make check      build and run the whole test suite
#   make asan|ubsan|tsan   the suite under a sanitizer (own build dir)
#   make demo       the main job: log millions of records, read them back
#   make bench      the quick benchmark preset (BENCH_FLAGS=--scan or --full
#                   for every scan; see bench/bench.c)

CC       ?= cc
BUILD    ?= build
OPT      ?= -O2
SAN      ?=
CFLAGS   ?=
WARN      = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
BASEFLAGS = -std=c11 $(OPT) -g -fPIC -pthread $(WARN) -Iinclude -Isrc $(SAN)
LDLIBS    = -pthread

LIB_SRC  := $(wildcard src/*.c)
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/unit/*.c) $(wildcard tests/fault/*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))

.PHONY: all check check-long asan ubsan tsan demo bench clean deps
all: $(BUILD)/liblogengine.a $(BUILD)/liblogengine.so $(BUILD)/logengine

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) include/logengine.h
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/liblogengine.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/liblogengine.so: $(LIB_OBJ)
	$(CC) $(BASEFLAGS) $(CFLAGS) -shared -Wl,-soname,liblogengine.so.0 -o $@ $^ $(LDLIBS)

$(BUILD)/logengine: tools/logengine.c $(BUILD)/liblogengine.a
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/liblogengine.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/harness.h tests/logtest.h $(wildcard tests/unit/*.h) $(BUILD)/liblogengine.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -o $@ $< $(BUILD)/liblogengine.a $(LDLIBS)

$(BUILD)/demo: examples/demo.c $(BUILD)/liblogengine.a
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/liblogengine.a $(LDLIBS)

# The benchmark driver and its competitors (bench/bench.h).  spdlog and glog
# come from Debian packages (scripts/deps.sh bench); spdlog's flags are those
# of Debian's build (pkg-config --cflags spdlog): a shared library using the
# external fmt.
SPDLOG_FLAGS = -DSPDLOG_SHARED_LIB -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL
BENCH_CXXFLAGS = -std=c++17 $(OPT) -g -pthread -Wall -Wextra -Werror \
                 -Iinclude -Ibench $(SPDLOG_FLAGS) $(SAN)
BENCH_LIBS = -lspdlog -lfmt -lglog -lm -pthread
BENCH_OBJ := $(patsubst bench/%.c,$(BUILD)/obj/bench/%.o,$(wildcard bench/*.c)) \
             $(patsubst bench/%.cc,$(BUILD)/obj/bench/%.o,$(wildcard bench/*.cc))

$(BUILD)/obj/bench/%.o: bench/%.c $(wildcard bench/*.h) include/logengine.h | deps
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Ibench -c -o $@ $<

$(BUILD)/obj/bench/%.o: bench/%.cc $(wildcard bench/*.h) include/logengine.h | deps
	@mkdir -p $(dir $@)
	$(CXX) $(BENCH_CXXFLAGS) $(CXXFLAGS) -c -o $@ $<

$(BUILD)/bench: $(BENCH_OBJ) $(BUILD)/liblogengine.a
	$(CXX) $(SAN) -o $@ $(BENCH_OBJ) $(BUILD)/liblogengine.a $(BENCH_LIBS)

# deps first: the benchmark smoke test needs the peers' packages.
check: deps all $(TEST_BIN) $(BUILD)/bench
	@mkdir -p $(BUILD)/tmp
	@BUILD=$(BUILD) LE_CLI=$(BUILD)/logengine sh tests/run.sh $(TEST_BIN)

# The fault tests for longer: hundreds of kill -9 cycles, minutes of fuzz.
check-long: check
	LE_KILL_CYCLES=300 LE_CLI=$(BUILD)/logengine $(BUILD)/tests/fault/test_kill9
	$(MAKE) fuzz-long

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address -fno-omit-frame-pointer" check
ubsan:
	$(MAKE) BUILD=build-ubsan OPT=-O1 SAN="-fsanitize=undefined -fno-sanitize-recover=all" check
tsan:
	$(MAKE) BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" check

deps:
	sh scripts/deps.sh bench

demo: deps all $(BUILD)/demo
	$(BUILD)/demo $(BUILD)/demo-logs
	$(BUILD)/logengine verify $(BUILD)/demo-logs
	$(BUILD)/logengine stats $(BUILD)/demo-logs

BENCH_FLAGS ?= --quick
bench: deps all $(BUILD)/bench
	$(BUILD)/bench $(BENCH_FLAGS)

# Small measurement programs behind figures in docs/BENCHMARKS.md.
PERF_TOOLS := $(BUILD)/submit-latency $(BUILD)/trickle-cost $(BUILD)/writer-cost
.PHONY: perf-tools
perf-tools: $(PERF_TOOLS)

$(PERF_TOOLS): $(BUILD)/%: perf/%.c perf/engine.h $(BUILD)/liblogengine.a
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/liblogengine.a $(LDLIBS)

# Fuzz targets (libFuzzer): rules in tests/fuzz/fuzz.mk.
-include tests/fuzz/fuzz.mk
# The process-log pipeline: gateway example, mock backend, capture tests,
# perf/compare-log-pipeline.sh (examples/examples.mk).
-include examples/examples.mk

clean:
	rm -rf build build-asan build-ubsan build-tsan

