package approval

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// The compiled matcher agrees with path.Match on every pattern kind.
func TestCompiledRuleMatchesLikePathMatch(t *testing.T) {
	patterns := []string{"*a*b*", "a**b", "**", "*__*__*", "mcp__fs__read_file", "mcp__fs__*", "mcp__fs__read_*", "mcp__*__read", "*", "mcp__f?__x", "mcp__[a-f]s__*", `mcp__fs\*`, "", "a/*"}
	names := []string{"mcp__fs__read_file", "mcp__fs__", "mcp__fs__read_", "mcp__fs__write", "mcp__gs__read", "mcp__fs__read", "mcp__fx__x", "mcp__es__y", "mcp__fs*", "a/b", "a/b/c", "", "x"}
	for range 200 {
		b := make([]byte, rand.IntN(12))
		for i := range b {
			b[i] = "mcp_fsr*/x"[rand.IntN(10)]
		}
		names = append(names, string(b))
	}
	for _, p := range patterns {
		r := compile(Rule{Tool: p, Decision: Allow})
		for _, n := range names {
			want, _ := path.Match(p, n)
			if got := r.matchName(n, strings.Contains(n, "/")); got != want {
				t.Errorf("pattern %q, name %q: %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}

func TestHintsDefaults(t *testing.T) {
	if h := parseHints(nil); h.readOnly || !h.destructive || h.idempotent || !h.openWorld {
		t.Fatalf("no annotations: %+v", h)
	}
	if h := parseHints(json.RawMessage(`{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}`)); !h.readOnly || h.destructive || !h.idempotent || h.openWorld {
		t.Fatalf("all set: %+v", h)
	}
	f := false
	p := newPolicy(Config{Default: Prompt, Rules: []Rule{{Tool: "*", Destructive: &f, Decision: Allow}}})
	tool := axocoatl.Tool{Name: "x", Annotations: json.RawMessage(`{"destructiveHint":false}`)}
	if d, by, _ := p.decide(&tool); d != Allow || by != byRule {
		t.Fatalf("non-destructive tool: %s by %s", d, by)
	}
	tool.Annotations = nil
	if d, by, _ := p.decide(&tool); d != Prompt || by != byDefault {
		t.Fatalf("tool without annotations (destructive by default): %s by %s", d, by)
	}
}

// hundredRules are 100 rules of every kind; only the last matches
// mcp__files__echo.
func hundredRules(withCondition bool) []Rule {
	var rules []Rule
	yes := true
	for i := range 99 {
		var r Rule
		switch i % 4 {
		case 0:
			r = Rule{Tool: fmt.Sprintf("mcp__srv%d__read_*", i), Decision: Allow}
		case 1:
			r = Rule{Tool: fmt.Sprintf("mcp__srv%d__write_file", i), Decision: Deny}
		case 2:
			r = Rule{Tool: fmt.Sprintf("mcp__*__delete_%d", i), Decision: Deny}
		case 3:
			r = Rule{Tool: fmt.Sprintf("mcp__srv%d__*", i), ReadOnly: &yes, Decision: Allow}
		}
		rules = append(rules, r)
	}
	last := Rule{Tool: "mcp__files__*", Decision: Allow}
	if withCondition {
		last.ReadOnly = &yes
	}
	return append(rules, last)
}

// BenchmarkPolicy is the policy's cost for a call that needs no human:
// a remembered-decision lookup, then 100 rules of which only the last
// matches.
func BenchmarkPolicy(b *testing.B) {
	tool := axocoatl.Tool{Name: "mcp__files__echo", Server: "files", Annotations: json.RawMessage(`{"readOnlyHint":true}`)}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"100-rules-last-matches", Config{Rules: hundredRules(false)}},
		{"100-rules-last-matches-on-annotations", Config{Rules: hundredRules(true)}},
		{"100-rules-none-match", Config{Rules: hundredRules(false)[:99], Default: Allow}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m, err := New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			// Some remembered decisions for other tools, as a real store has.
			for i := range 50 {
				if err := m.store.put(Remembered{AgentID: "a", Tool: fmt.Sprintf("t%d", i), Decision: Allow}); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("cached", func(b *testing.B) {
				b.ReportAllocs()
				cpu := threadCPU(b)
				for b.Loop() {
					if d, _, _ := m.decide("a", &tool); d != Allow {
						b.Fatal(d)
					}
				}
				cpu.report(b)
			})
			b.Run("first-call", func(b *testing.B) {
				// The rules evaluated in full, as on a tool's first call.
				b.ReportAllocs()
				cpu := threadCPU(b)
				for b.Loop() {
					if d, _, _ := m.policy.evaluate(&tool); d != Allow {
						b.Fatal(d)
					}
				}
				cpu.report(b)
			})
		})
	}
}

// threadCPU measures the CPU time of the benchmark's own thread, which a
// loaded machine (other processes on the same cores) does not inflate the
// way it inflates wall time. report adds it as cpu-ns/op.
type cpuClock struct{ start time.Duration }

func threadCPU(b *testing.B) cpuClock {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	return cpuClock{start: threadTime()}
}

func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(threadTime()-c.start)/float64(b.N), "cpu-ns/op")
}

func threadTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
