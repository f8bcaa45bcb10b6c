#!/usr/bin/env bash
# Runs the test suite N times (default 3) while LOOPS busy loops (default 2)
# compete for the CPU, as on a loaded CI machine, and reports each run's
# result and duration; the loops are killed however the script ends.
# Extra arguments go to go test (default, as .ci/run: -race -timeout 30m -count=1 ./...).
# Example: bench/loadtest.sh 3
#          LOOPS=4 bench/loadtest.sh 5 -race -count=1 -run TestHundred ./mcpclient/
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
shift || true
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-race -timeout 30m -count=1 ./...) # as .ci/run
loops=${LOOPS:-2}

pids=()
stop_loops() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}
trap stop_loops EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$loops"); do
	( while :; do :; done ) &
	pids+=($!)
done

log=$(mktemp -d)
passed=0
echo "loadtest: $n runs of go test ${args[*]} beside $loops busy loops ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
for i in $(seq "$n"); do
	start=$(date +%s)
	if go test "${args[@]}" >"$log/run$i.txt" 2>&1; then
		result=pass
		passed=$((passed + 1))
	else
		result=FAIL
	fi
	echo "run $i: $result in $(( $(date +%s) - start )) s (load $(cut -d' ' -f1-3 /proc/loadavg)); output $log/run$i.txt"
	if [ "$result" = FAIL ]; then
		grep -E '^(--- FAIL|FAIL|panic:)' "$log/run$i.txt" | head -20
	fi
done
echo "loadtest: $passed of $n runs passed"
[ "$passed" -eq "$n" ]
