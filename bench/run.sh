#!/usr/bin/env bash
# Runs the given benchmark pattern N times (default 5) as separate runs, so
# that every system in a comparison is measured under the same machine load,
# then prints medians and same-group speed ratios (>1 means faster than the
# other). Example: bench/run.sh Fanout ./bench/ 7
set -euo pipefail
cd "$(dirname "$0")/.."
pattern=${1:?benchmark pattern}; pkg=${2:-./bench/}; n=${3:-5}
out=$(mktemp)
for _ in $(seq "$n"); do
	go test -run '^$' -bench "$pattern" -benchtime "${BENCHTIME:-1s}" -count 1 "$pkg" | grep '^Benchmark' | tee -a "$out"
done
go run bench/ratios.go <"$out"
rm -f "$out"
