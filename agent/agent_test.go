package agent

import (
	"testing"
	"time"
)

func TestSpecValidateAndDefaults(t *testing.T) {
	for _, bad := range []Spec{
		{},
		{ID: "Has Caps"},
		{ID: "dots.not.allowed"},
		{ID: "ok", MaxIterations: -1},
		{ID: "ok", Timeout: -time.Second},
		{ID: "ok", Tools: []string{"["}},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	s := Spec{ID: "a-b_c1"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	d := s.WithDefaults()
	if d.Name != "a-b_c1" || d.Provider != "" || d.MaxIterations != DefaultMaxIterations || d.Timeout != DefaultTimeout {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestAllowsTool(t *testing.T) {
	all := Spec{ID: "a"}
	none := Spec{ID: "a", Tools: []string{}}
	fs := Spec{ID: "a", Tools: []string{"mcp__fs__*", "exact_tool"}}
	cases := []struct {
		s    Spec
		tool string
		want bool
	}{
		{all, "mcp__x__y", true},
		{none, "mcp__x__y", false},
		{fs, "mcp__fs__read_file", true},
		{fs, "exact_tool", true},
		{fs, "mcp__fsx__read", false},
		{fs, "mcp__search__q", false},
	}
	for _, c := range cases {
		if got := c.s.AllowsTool(c.tool); got != c.want {
			t.Errorf("tools %v: AllowsTool(%q) = %v", c.s.Tools, c.tool, got)
		}
	}
}
