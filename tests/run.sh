#!/bin/sh
# Run each test binary, show its output, and add up its closing
# "N passed, N failed" line into one line for the whole suite.
passed=0 failed=0
for t in "$@"; do
	echo "== $t"
	out=$("$t" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
	if [ -z "$line" ]; then
		echo "FAIL $t: no result line (exit $rc)"
		failed=$((failed + 1))
		continue
	fi
	p=$(echo "$line" | cut -d' ' -f1)
	f=$(echo "$line" | cut -d' ' -f3)
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && failed=$((failed + 1)) && echo "FAIL $t: exit $rc"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
