# perf/pipeline/pipeline.mk -- the process-log pipeline benchmark and its
# fixtures, all in this directory: the gateway (a service logging one
# access-log line per request to its stdout), its mock backend, the
# throttled reader, and the harness that loads the gateway with wrk.
# Included by the main Makefile (-include), using its BUILD, CC, BASEFLAGS,
# LDLIBS.
#
#   make pipeline          build/gateway, build/mock-backend,
#                          build/throttle-reader (needs libmicrohttpd-dev:
#                          sh scripts/deps.sh pipeline, run by this target)
#   make pipeline-smoke    compare-log-pipeline.sh with short windows
#   make compare-log-pipeline   the full harness run (several minutes)
#   make tls-sweep         seed 004's sweep: HTTPS at 64/256/512
#                          connections, access log off / file / logengine
#                          (tls-sweep.sh, about 8 minutes)
#   make tls-sweep-smoke   the same with short windows, one trial
#
# Nothing here is a prerequisite of `all` or `check`: a machine without
# libmicrohttpd builds and tests everything else.  The capture tests
# (tests/system/test_capture.c) need only build/logengine;
# tests/system/test_gateway_tls.c builds build/gateway itself.

PIPE_DIR = perf/pipeline
MHD_CFLAGS = $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS = $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
PIPELINE_BIN = $(BUILD)/gateway $(BUILD)/mock-backend $(BUILD)/throttle-reader

.PHONY: pipeline pipeline-deps pipeline-smoke compare-log-pipeline \
        tls-sweep tls-sweep-smoke

pipeline-deps:
	sh scripts/deps.sh pipeline

pipeline: pipeline-deps all $(PIPELINE_BIN)

$(BUILD)/gateway: $(PIPE_DIR)/gateway.c $(LIB_A) include/logengine.h | pipeline-deps
	$(CC) $(BASEFLAGS) $(CFLAGS) $(MHD_CFLAGS) -o $@ $< $(LIB_A) $(MHD_LIBS) $(LDLIBS)

$(BUILD)/mock-backend: $(PIPE_DIR)/mock_backend.c
	@mkdir -p $(BUILD)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(LDLIBS)

$(BUILD)/throttle-reader: $(PIPE_DIR)/throttle-reader.c
	@mkdir -p $(BUILD)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(LDLIBS)

# Short windows make the gates a coin toss: the smoke run checks that the
# harness runs (exit 2 = it could not), not what it measures (exit 1).
pipeline-smoke: pipeline
	WARMUP_S=1 DURATION_S=2 TRIALS=1 BUILD=$(BUILD) \
		sh $(PIPE_DIR)/compare-log-pipeline.sh; test $$? -le 1

compare-log-pipeline: pipeline
	BUILD=$(BUILD) sh $(PIPE_DIR)/compare-log-pipeline.sh

# Seed 004: the goals' lines (under 1%, under 4 MiB) are in the output.
tls-sweep: pipeline
	BUILD=$(BUILD) sh $(PIPE_DIR)/tls-sweep.sh

tls-sweep-smoke: pipeline
	WARMUP_S=1 DURATION_S=2 COOL_S=1 TRIALS=1 BUILD=$(BUILD) \
		sh $(PIPE_DIR)/tls-sweep.sh
