#!/usr/bin/env bash
# Measures what a first build costs a new user: for each package given, N
# cold builds (default 2), each with an empty GOCACHE and the module cache as
# it is (fill it first: go mod download). Prints, per run, the wall time, the
# CPU time (user + system, all processes: what the build costs whatever the
# load of a shared machine), the peak memory of the largest process the
# build ran (the compiler or the linker: /usr/bin/time's "Maximum resident
# set size" covers the children it waited for) and the binary's size, then
# the medians. The load average is printed with each run: on a busy machine
# the wall time says more about the neighbours than about the build.
#
#   bench/buildcost.sh ./examples/daemon ./bench/hosts/openai
#   N=3 bench/buildcost.sh ./examples/daemon
#
# With FIRST_ANSWER=1 it also times a cold `go run ./examples/daemon` until
# the default echo agent has answered one POST /api/agents/assistant/execute.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

for pkg in "$@"; do
	: >"$tmp/secs"; : >"$tmp/cpu"; : >"$tmp/rss"; : >"$tmp/size"
	for i in $(seq "$n"); do
		cache=$(mktemp -d)
		/usr/bin/time -v -o "$tmp/time" env GOCACHE="$cache" go build -o "$tmp/bin" "$pkg"
		wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tmp/time")
		secs=$(echo "$wall" | awk -F: '{s=0; for (i=1;i<=NF;i++) s=s*60+$i; printf "%.1f", s}')
		cpu=$(awk -F': ' '/User time|System time/ {s+=$2} END {printf "%.1f", s}' "$tmp/time")
		rss=$(awk -F': ' '/Maximum resident set size/ {printf "%d", $2/1024}' "$tmp/time")
		size=$(stat -c %s "$tmp/bin" | awk '{printf "%.1f", $1/1048576}')
		echo "$pkg run $i: ${secs}s wall, ${cpu}s CPU, peak ${rss} MiB, binary ${size} MiB (load $(cut -d' ' -f1-3 /proc/loadavg))"
		echo "$secs" >>"$tmp/secs"; echo "$cpu" >>"$tmp/cpu"; echo "$rss" >>"$tmp/rss"; echo "$size" >>"$tmp/size"
		rm -rf "$cache"
	done
	echo "$pkg median: $(median <"$tmp/secs")s wall, $(median <"$tmp/cpu")s CPU, peak $(median <"$tmp/rss") MiB, binary $(median <"$tmp/size") MiB"
done

if [ "${FIRST_ANSWER:-}" = 1 ]; then
	: >"$tmp/first"
	for i in $(seq "$n"); do
		cache=$(mktemp -d)
		# A port free now (a random one collided with another process's).
		port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		start=$(date +%s.%N)
		(GOCACHE="$cache" AXOCOATL_DATA_DIR="$tmp/data" AXOCOATL_CONFIG= exec go run ./examples/daemon --addr "127.0.0.1:$port" >"$tmp/run.log" 2>&1) &
		pid=$!
		until curl -sf -X POST -d '{"input":"hi"}' "http://127.0.0.1:$port/api/agents/assistant/execute" >/dev/null 2>&1; do
			kill -0 "$pid" 2>/dev/null || { echo "go run exited:"; cat "$tmp/run.log"; exit 1; }
			sleep 0.2
		done
		secs=$(echo "$(date +%s.%N) - $start" | bc | awk '{printf "%.1f", $1}')
		echo "go run ./examples/daemon run $i: first answer after ${secs}s (load $(cut -d' ' -f1-3 /proc/loadavg))"
		echo "$secs" >>"$tmp/first"
		pkill -P "$pid" 2>/dev/null || true # the daemon go run started
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		rm -rf "$cache"
	done
	echo "go run ./examples/daemon median: first answer after $(median <"$tmp/first")s"
fi
