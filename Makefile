# logengine -- plain Makefile.  See README.md.
#
#   make            build/liblogengine.a, build/liblogengine.so, build/logengine
#   make check      build and run the whole test suite
#   make asan|ubsan|tsan   the suite under a sanitizer (own build dir)
#   make demo       the main job: log millions of records, read them back
#   make bench      the quick benchmark preset

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

.PHONY: all check asan ubsan tsan demo bench clean deps
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

$(BUILD)/tests/%: tests/%.c tests/harness.h $(wildcard tests/unit/*.h) $(BUILD)/liblogengine.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(CFLAGS) -Itests -o $@ $< $(BUILD)/liblogengine.a $(LDLIBS)

$(BUILD)/demo: examples/demo.c $(BUILD)/liblogengine.a
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/liblogengine.a $(LDLIBS)

$(BUILD)/bench_le: bench/bench.c $(BUILD)/liblogengine.a
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/liblogengine.a $(LDLIBS)

check: all $(TEST_BIN)
	@mkdir -p $(BUILD)/tmp
	@BUILD=$(BUILD) LE_CLI=$(BUILD)/logengine sh tests/run.sh $(TEST_BIN)

asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address -fno-omit-frame-pointer" check
ubsan:
	$(MAKE) BUILD=build-ubsan OPT=-O1 SAN="-fsanitize=undefined -fno-sanitize-recover=all" check
tsan:
	$(MAKE) BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" check

deps:
	sh scripts/deps.sh core

demo: deps all $(BUILD)/demo
	$(BUILD)/demo $(BUILD)/demo-logs
	$(BUILD)/logengine verify $(BUILD)/demo-logs
	$(BUILD)/logengine stats $(BUILD)/demo-logs

bench: all $(BUILD)/bench_le
	@mkdir -p perf/results/bench
	$(BUILD)/bench_le -j perf/results/bench/logengine.json

# Fuzz targets (libFuzzer): rules in tests/fuzz/fuzz.mk.
-include tests/fuzz/fuzz.mk

clean:
	rm -rf build build-asan build-ubsan build-tsan

