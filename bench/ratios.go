//go:build ignore

// ratios reads `go test -bench` output on stdin and prints, per benchmark,
// the median ns/op over all runs and its ratio to the others of its group
// (the part before the last '/'). Usage: see bench/README.md.
package main

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

func main() {
	samples := map[string][]float64{}
	var order []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		name := f[0][:strings.LastIndexByte(f[0], '-')] // drop -GOMAXPROCS
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		if _, ok := samples[name]; !ok {
			order = append(order, name)
		}
		samples[name] = append(samples[name], v)
	}
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	for _, name := range order {
		m := median(samples[name])
		fmt.Printf("%-50s median %10.1f ns/op (n=%d)", name, m, len(samples[name]))
		for _, other := range order {
			if other != name && path.Dir(other) == path.Dir(name) {
				fmt.Printf("  %.2fx vs %s", median(samples[other])/m, path.Base(other))
			}
		}
		fmt.Println()
	}
}
