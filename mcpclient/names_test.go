package mcpclient

import (
	"errors"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

func TestQualifiedName(t *testing.T) {
	cases := map[[2]string]string{
		{"fs", "read_file"}:            "mcp__fs__read_file",
		{"fs", "get-sum"}:              "mcp__fs__get-sum",
		{"fs", "a.b/c d"}:              "mcp__fs__a_b_c_d",
		{"fs", "héllo"}:                "mcp__fs__h__llo",
		{"my-srv", "Tool_9-x"}:         "mcp__my-srv__Tool_9-x",
		{"s", strings.Repeat("x", 55)}: "mcp__s__" + strings.Repeat("x", 55), // 63
	}
	for in, want := range cases {
		if got := QualifiedName(in[0], in[1]); got != want {
			t.Errorf("QualifiedName(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
	long1 := QualifiedName("server", strings.Repeat("a", 80)+"1")
	long2 := QualifiedName("server", strings.Repeat("a", 80)+"2")
	if len(long1) != MaxToolNameLen || len(long2) != MaxToolNameLen || long1 == long2 {
		t.Fatalf("long names: %q %q", long1, long2)
	}
	if long1 != QualifiedName("server", strings.Repeat("a", 80)+"1") {
		t.Fatal("hash suffix is not stable")
	}
	if !strings.HasPrefix(long1, "mcp__server__aaaa") {
		t.Fatalf("cut name %q", long1)
	}
	exactly64 := "mcp__s__" + strings.Repeat("y", 56)
	if got := QualifiedName("s", strings.Repeat("y", 56)); got != exactly64 {
		t.Fatalf("64-char name changed: %q", got)
	}
}

func TestQualifyAllCollisions(t *testing.T) {
	got := qualifyAll("s", []string{"a.b", "a_b", "c"})
	if got["mcp__s__a_b"] != "a_b" || got["mcp__s__c"] != "c" || len(got) != 3 {
		t.Fatalf("%v", got)
	}
	for q, b := range got {
		if b == "a.b" && (len(q) > MaxToolNameLen || !strings.HasPrefix(q, "mcp__s__a_b_")) {
			t.Fatalf("collided name %q", q)
		}
	}
	// Order does not matter.
	again := qualifyAll("s", []string{"c", "a_b", "a.b"})
	for q, b := range got {
		if again[q] != b {
			t.Fatalf("order-dependent: %v vs %v", got, again)
		}
	}
}

func TestValidate(t *testing.T) {
	no := false
	ok := []ServerConfig{
		{Name: "fs", Command: "npx", Args: []string{"-y", "x"}, Env: map[string]secretT{"K": "v"}, InheritEnv: &no},
		{Name: "web", URL: "https://mcp.example.com/mcp", Headers: map[string]secretT{"Authorization": "Bearer x"}, Timeout: time.Second, Approval: "allow"},
	}
	for _, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	bad := map[string]ServerConfig{
		"name is required":              {Command: "x"},
		"must match":                    {Name: "Bad Name", Command: "x"},
		"not both":                      {Name: "a", Command: "x", URL: "http://h/"},
		"is required":                   {Name: "a"},
		"absolute http or https":        {Name: "a", URL: "ftp://h/x"},
		"env: applies to stdio":         {Name: "a", URL: "http://h/", Env: map[string]secretT{"K": "v"}},
		"headers: apply to HTTP":        {Name: "a", Command: "x", Headers: map[string]secretT{"K": "v"}},
		"invalid header name":           {Name: "a", URL: "http://h/", Headers: map[string]secretT{"Bad Header": "v"}},
		"control character":             {Name: "a", URL: "http://h/", Headers: map[string]secretT{"X": "v\r\nInjected: 1"}},
		"invalid variable name":         {Name: "a", Command: "x", Env: map[string]secretT{"A=B": "v"}},
		"timeout: must not be negative": {Name: "a", Command: "x", Timeout: -1},
		"approval: \"maybe\" must be":   {Name: "a", Command: "x", Approval: "maybe"},
		"inherit_env: applies to stdio": {Name: "a", URL: "http://h/", InheritEnv: &no},
	}
	for want, c := range bad {
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err %v, want %q", c, err, want)
		}
	}
	// A secret never shows in a validation error.
	err := ServerConfig{Name: "a", URL: "http://h/", Headers: map[string]secretT{"X": "topsecret\n"}}.Validate()
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("err %v", err)
	}
	if err := (Config{Servers: []ServerConfig{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}}).Validate(); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate: %v", err)
	}
	// The error names its field as a key, for a config loader to position.
	var ce *axocoatl.ConfigError
	err = Config{Servers: []ServerConfig{{Name: "a", Command: "x"}, {Name: "b", Command: "x", MaxListPages: -1}}}.Validate()
	if !errors.As(err, &ce) || ce.Key != "mcp_servers[1].max_list_pages" || ce.Msg != "must not be negative" {
		t.Fatalf("typed error: %#v", err)
	}
	if _, err := New(Config{Servers: []ServerConfig{{Name: "a"}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New: %v", err)
	}
	if got := redactURL("https://user:pw@h.example/mcp?token=abc#x"); got != "https://[redacted]@h.example/mcp?[redacted]" {
		t.Fatalf("redactURL: %q", got)
	}
}
