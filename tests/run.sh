#!/bin/sh
# Run each test binary, show its output, and add up its closing
# "N passed, N failed[, N skipped]" line into one line for the whole suite:
# "N passed, N failed, N skipped".  A test is skipped only when a tool it
# needs is not installed; LE_FAIL_ON_SKIP=1 (CI) makes any skip a failure.
passed=0 failed=0 skipped=0
for t in "$@"; do
	echo "== $t"
	out=$("$t" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	line=$(printf '%s\n' "$out" |
		grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' |
		tail -n 1)
	if [ -z "$line" ]; then
		echo "FAIL $t: no result line (exit $rc)"
		failed=$((failed + 1))
		continue
	fi
	p=$(echo "$line" | cut -d' ' -f1)
	f=$(echo "$line" | cut -d' ' -f3)
	s=$(echo "$line" | cut -d' ' -f5)
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + ${s:-0}))
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && failed=$((failed + 1)) && echo "FAIL $t: exit $rc"
done
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$skipped" -ne 0 ] && [ "${LE_FAIL_ON_SKIP:-0}" = 1 ]; then
	echo "FAIL: $skipped test(s) skipped (LE_FAIL_ON_SKIP=1): install what they need with scripts/deps.sh as root"
	exit 1
fi
[ "$failed" -eq 0 ]
