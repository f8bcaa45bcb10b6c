#!/usr/bin/env bash
# The daemon's binary against issue 23's bound. Builds ./examples/daemon as
# a new user does (`go build`, no flags: symbols and DWARF in), prints its
# bytes, MiB and the package count of `go list -deps`, and exits 1 when the
# binary is over LIMIT bytes (default 25165824, 24 MiB). With TOP=n it also
# prints the n modules (the standard library by package) whose symbols take
# most bytes (`go tool nm -size`: code and data; the line tables and DWARF
# of the binary grow with the code, about 2x more).
#
#   bench/binsize.sh
#   TOP=25 bench/binsize.sh
#   LIMIT=26500000 bench/binsize.sh     # a ratchet: today's size + headroom
#
# A script, not a go test: the size belongs to one toolchain, GOOS/GOARCH
# and cgo setting (a test would fail on another Go release for reasons of
# its own), and a build costs 10 s warm, 60 s or more cold.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${LIMIT:-25165824}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/daemon" ./examples/daemon
bytes=$(stat -c %s "$tmp/daemon")
pkgs=$(go list -deps ./examples/daemon | wc -l)
echo "./examples/daemon: $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.2f", b/1048576}') MiB), $pkgs packages, $(go version | cut -d' ' -f3-)"

if [ -n "${TOP:-}" ]; then
	go list -m -f '{{.Path}}' all >"$tmp/modules"
	go tool nm -size "$tmp/daemon" | awk -v top="$TOP" '
		NR == FNR { mods[++n] = $1; next }
		$3 ~ /^[TtRrDd]$/ && $2 < 10000000 {
			name = $0; sub(/^ *[0-9a-f]+ +[0-9]+ +[A-Za-z] +/, "", name)
			sub(/^(type:\.(eq|hash)\.|go:itab\.)/, "", name); sub(/^[*\[\]0-9]+/, "", name)
			gsub(/%2e/, ".", name)
			key = ""
			for (i = 1; i <= n; i++) {
				m = mods[i]
				if ((index(name, m ".") == 1 || index(name, m "/") == 1) && length(m) > length(key)) key = m
			}
			if (key == "") { # the standard library, by package
				p = name; sub(/\[.*$/, "", p); sub(/\.[^\/]*$/, "", p); sub(/\.\(.*$/, "", p); key = "std " p
			}
			size[key] += $2; total += $2
		}
		END {
			printf "symbols: %d bytes\n", total
			for (k in size) printf "%10d %s\n", size[k], k | "sort -rn | head -" top
		}' "$tmp/modules" -
fi

if [ "$bytes" -gt "$limit" ]; then
	echo "over the bound of $limit bytes by $((bytes - limit))"
	exit 1
fi
echo "within the bound of $limit bytes ($((limit - bytes)) to spare)"
