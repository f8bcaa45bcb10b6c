package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
)

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestExpand(t *testing.T) {
	lookup := env(map[string]string{"A": "alpha", "EMPTY": ""})
	for _, tc := range []struct {
		in, want string
		used     bool
		err      string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha", used: true},
		{in: "x-${A}-y", want: "x-alpha-y", used: true},
		{in: "${EMPTY}", want: "", used: true},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${UNSET:-d e}", want: "d e"},
		{in: "${UNSET:-}", want: ""},
		{in: "$${A}", want: "${A}"},
		{in: "$${A} ${A}", want: "${A} alpha", used: true},
		{in: "cost $5", want: "cost $5"},
		{in: "${UNSET}", err: "variable UNSET is not set"},
		{in: "${A", err: "unterminated"},
		{in: "${1A}", err: "invalid variable name"},
	} {
		got, used, err := Expand(tc.in, lookup)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Expand(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || used != tc.used {
			t.Errorf("Expand(%q) = %q, %v, %v; want %q, %v", tc.in, got, used, err, tc.want, tc.used)
		}
	}
}

type item struct {
	ID      string        `yaml:"id"`
	Timeout time.Duration `yaml:"timeout"`
	Port    int           `yaml:"port"`
}

func (i item) Validate() error {
	if i.ID == "bad" {
		return errors.New("id must not be bad")
	}
	return nil
}

type Section struct {
	Servers items `yaml:"servers"`
}

// items checks what spans items; each item checks itself.
type items []item

func (l items) Validate() error {
	seen := map[string]bool{}
	for _, i := range l {
		if seen[i.ID] {
			return errors.New("duplicate id " + i.ID)
		}
		seen[i.ID] = true
	}
	return nil
}

type config struct {
	Name    string            `yaml:"name"`
	Items   []item            `yaml:"items"`
	Headers map[string]string `yaml:"headers"`
	Section `yaml:",inline"`
}

func load(t *testing.T, text string, vars map[string]string) (*Doc, *config, []string, error) {
	t.Helper()
	d, err := Parse("c.yaml", []byte(text))
	if err != nil {
		return nil, nil, nil, err
	}
	var c config
	w, err := d.Decode(&c, env(vars))
	return d, &c, w, err
}

func TestDecode(t *testing.T) {
	d, c, warnings, err := load(t, `
name: n-${A}
items:
  - id: one
    timeout: ${T:-30s}
    port: ${PORT}
headers: { X-Key: "${A}" }
servers:
  - id: s
other_section: {anything: "${UNSET_BUT_IGNORED}"}
`, map[string]string{"A": "a", "PORT": "8080"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "n-a" || c.Items[0].Timeout != 30*time.Second || c.Items[0].Port != 8080 || c.Headers["X-Key"] != "a" || c.Servers[0].ID != "s" {
		t.Errorf("decoded %+v", c)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `c.yaml:10: unknown section "other_section"`) {
		t.Errorf("warnings = %q", warnings)
	}
	if got := d.Line("items[0].port"); got != 6 {
		t.Errorf("Line(items[0].port) = %d, want 6", got)
	}
	if got := d.Line("servers[0]"); got != 9 {
		t.Errorf("Line(servers[0]) = %d, want 9", got)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{"syntax", "name: [a\nitems: 1\n", "c.yaml:2: invalid YAML"},
		{"unknown key", "items:\n  - id: a\n    prot: 1\n", "c.yaml:3: items[0].prot: unknown key (known: id, timeout, port)"},
		{"duplicate key", "name: a\nname: b\n", "c.yaml:2: name: duplicate key"},
		{"unset", "items:\n  - id: ${NOPE}\n", "c.yaml:2: items[0].id: variable NOPE is not set"},
		{"type", "items:\n  - timeout: 12x\n", "c.yaml:2: items[0].timeout: expected a duration (like 30s or 5m), got a string `12x`"},
		{"not a mapping", "- a\n", "c.yaml:1: the config must be a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := load(t, tc.text, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestExpandedValuesNeverQuoted(t *testing.T) {
	_, _, _, err := load(t, "items:\n  - timeout: ${SECRET}\n", map[string]string{"SECRET": "sk-very-secret"})
	if err == nil || strings.Contains(err.Error(), "sk-very-secret") {
		t.Fatalf("err = %v; want an error without the value", err)
	}
}

func TestValidateTree(t *testing.T) {
	d, c, _, err := load(t, "items:\n  - id: ok\nservers:\n  - id: fine\n  - id: bad\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := d.ValidateTree("", reflect.ValueOf(c).Elem())
	if len(errs) != 1 || errs[0].Error() != "c.yaml:5: servers[1]: id must not be bad" {
		t.Fatalf("errs = %v", errs)
	}
	d, c, _, err = load(t, "servers:\n  - id: x\n  - id: x\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	errs = d.ValidateTree("", reflect.ValueOf(c).Elem())
	if len(errs) != 1 || errs[0].Error() != "c.yaml:1: servers: duplicate id x" {
		t.Fatalf("errs = %v", errs)
	}
}

func TestEmptyFile(t *testing.T) {
	_, c, _, err := load(t, "# nothing\n", nil)
	if err != nil || c.Name != "" {
		t.Fatalf("c = %+v, err = %v", c, err)
	}
}

// FuzzLoad: any text gives a config or an *Error naming the file; never a
// panic. Run: go test -fuzz FuzzLoad ./internal/yamlconf/
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		"name: x\nitems:\n  - id: a\n    timeout: 1s\n",
		"items: [{id: ${A:-b}, port: ${P}}]\n",
		"servers:\n  - id: bad\n",
		"a: &x {b: 1}\nc: *x\n",
		"name: $${A}\n",
		"- 1\n",
		"{",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		d, err := Parse("f.yaml", []byte(text))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Fatalf("parse error %T %v", err, err)
			}
			return
		}
		var c config
		_, err = d.Decode(&c, env(map[string]string{"A": "a", "P": "1"}))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Fatalf("decode error %T %v", err, err)
			}
			return
		}
		d.ValidateTree("", reflect.ValueOf(&c).Elem())
	})
}

// A variable's value is data: one that reads as YAML null ("null", "~")
// is that text, not an absent value (a token "null" must not silently
// become no token). Plain scalars are still typed by their final text, so
// ${PORT} fills an int.
func TestExpandedNullLookingValuesStayText(t *testing.T) {
	for _, v := range []string{"null", "~", "NULL", "Null"} {
		_, c, _, err := load(t, "name: ${A}\nheaders:\n  k: ${A}\nitems:\n  - id: ${A}\n    port: ${PORT}\n", map[string]string{"A": v, "PORT": "9"})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if c.Name != v || c.Headers["k"] != v || c.Items[0].ID != v || c.Items[0].Port != 9 {
			t.Errorf("A=%q decoded as name %q, header %q, id %q, port %d", v, c.Name, c.Headers["k"], c.Items[0].ID, c.Items[0].Port)
		}
	}
}

// Anchors and aliases are plain YAML and configs use them (an x- section
// of shared values, a << merge of defaults): a value reached through an
// alias is expanded and checked like any other, once. An anchor in an
// ignored top-level section was used unexpanded ("${A}" verbatim, say as
// an api key), and keys of aliased or merged mappings went unchecked.
func TestAliasesExpandedAndChecked(t *testing.T) {
	_, c, _, err := load(t, `
x-shared:
  name: &n "n-${A}"
  lit: &l "$${A} ${A}"
  item: &it
    id: base
    timeout: ${T}
name: *n
headers:
  h1: *l
  h2: *l
items:
  - *it
  - <<: *it
    id: merged
`, map[string]string{"A": "a", "T": "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "n-a" || c.Headers["h1"] != "${A} a" || c.Headers["h2"] != "${A} a" {
		t.Errorf("name %q, headers %q", c.Name, c.Headers)
	}
	if len(c.Items) != 2 || c.Items[0].ID != "base" || c.Items[0].Timeout != 5*time.Second || c.Items[1].ID != "merged" || c.Items[1].Timeout != 5*time.Second {
		t.Errorf("items %+v", c.Items)
	}

	// A typo inside an aliased or merged mapping is an unknown key, and an
	// unset variable there is an error, as anywhere else.
	_, _, _, err = load(t, "x-shared:\n  item: &it\n    id: base\n    tiemout: 5s\nitems:\n  - *it\n", nil)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:4: items[0].tiemout: unknown key") {
		t.Errorf("aliased typo: %v", err)
	}
	_, _, _, err = load(t, "x-shared:\n  item: &it\n    tiemout: 5s\nitems:\n  - <<: *it\n    id: x\n", nil)
	if err == nil || !strings.Contains(err.Error(), "tiemout: unknown key") {
		t.Errorf("merged typo: %v", err)
	}
	_, _, _, err = load(t, "x-shared:\n  k: &k ${UNSET_VAR}\nname: *k\n", nil)
	if err == nil || !strings.Contains(err.Error(), "UNSET_VAR is not set") {
		t.Errorf("aliased unset variable: %v", err)
	}
	// An anchor no known key uses is still not expanded.
	if _, _, _, err = load(t, "x-shared:\n  k: &k ${UNSET_VAR}\nname: n\n", nil); err != nil {
		t.Errorf("unused anchor: %v", err)
	}
}

// Following aliases must not multiply work: a "billion laughs" document
// is refused (by the decoder) quickly, not walked exponentially.
func TestAliasBombIsCheap(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-bomb:\n  l0: &l0 [\"${A}\", \"${A}\", \"${A}\", \"${A}\", \"${A}\", \"${A}\", \"${A}\", \"${A}\", \"${A}\"]\n")
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("headers: *l12\nitems: *l12\n")
	start := time.Now()
	load(t, b.String(), map[string]string{"A": "a"})
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %s", took)
	}
}

// A bare ${VAR} inside a flow map or sequence is not YAML, but it is how the
// contract writes `env: { API_KEY: ${FS_KEY} }`: it loads as if quoted,
// without touching quoted strings, comments, block scalars or line numbers.
func TestBareVariablesInFlowCollections(t *testing.T) {
	vars := map[string]string{"A": "alpha", "B": "beta", "N": "name"}
	const text = `
headers: { X-Key: ${A}, X-Other: ${B:-b} }   # { C: ${A} } in a comment
name: "a quoted { ${N} } string,
  continued { ${N} }"
items:
  - id: |
      text { ${N} } kept
    port: 1
`
	// Line numbers stay: an error after the rewritten line names its own.
	_, _, _, err := load(t, text+"  - id: two\n    port: ${PORT}\n", vars)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:10: items[1].port") {
		t.Fatalf("err = %v, want the unset PORT on line 10", err)
	}
	d, c, _, err := load(t, text, vars)
	if err != nil {
		t.Fatal(err)
	}
	if c.Headers["X-Key"] != "alpha" || c.Headers["X-Other"] != "beta" {
		t.Errorf("headers = %v", c.Headers)
	}
	if c.Name != "a quoted { name } string, continued { name }" || c.Items[0].ID != "text { name } kept\n" {
		t.Errorf("name %q, id %q: quoted strings and block scalars must not be rewritten", c.Name, c.Items[0].ID)
	}
	if got := d.Line("items[0].port"); got != 8 {
		t.Errorf("Line(items[0].port) = %d, want 8", got)
	}

	// Escaped ($${) and embedded variables, as in the contract's
	// `headers: { Authorization: Bearer ${SEARCH_TOKEN} }`.
	_, _, _, err = load(t, "headers: { K: $${A}, L: Bearer ${A}, M: [x] }\n", vars)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:1: headers.M") {
		t.Fatalf("err = %v, want the list-for-a-string error at headers.M", err)
	}
	_, c, _, err = load(t, "headers: { K: $${A}, L: Bearer ${A} }\n", vars)
	if err != nil || c.Headers["K"] != "${A}" || c.Headers["L"] != "Bearer alpha" {
		t.Fatalf("headers = %v, err %v", c.Headers, err)
	}
}

func TestQuoteFlowVars(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"env: { API_KEY: ${FS_KEY} }\n", `env: { API_KEY: "${FS_KEY}" }` + "\n"},
		{"args: [${A}, x, ${B:-b}]\n", `args: ["${A}", x, "${B:-b}"]` + "\n"},
		{"m: {a: {b: ${A}}}\n", `m: {a: {b: "${A}"}}` + "\n"},
		{"args: [\n  ${A},\n  ${B}\n]\n", "args: [\n  \"${A}\",\n  \"${B}\"\n]\n"},
		{"k: ${A}\n", ""},                // block context: valid YAML as it is
		{"k: { a: '${A}' }\n", ""},       // already quoted
		{"k: { a: 'it''s ${A}' }\n", ""}, // '' inside single quotes
		{"k: don't { a: ${A} }\n", ""},   // a plain scalar, not a flow map
		{"h: { Authorization: Bearer ${T} }\n", `h: { Authorization: "Bearer ${T}" }` + "\n"},
		{"h: { a: x\"${T} }\n", ""},          // would need escaping: left to the parser's error
		{"p: >-\n  { a: ${A} }\nk: 1\n", ""}, // folded block scalar
	} {
		out, changed := quoteFlowVars([]byte(tc.in))
		if got := string(out); (tc.want == "" && changed) || (tc.want != "" && got != tc.want) {
			t.Errorf("quoteFlowVars(%q) = %q (changed %v), want %q", tc.in, got, changed, tc.want)
		}
	}
}

// quoteFlowVars only inserts pairs of double quotes: never a panic, never a
// line more or less.
func FuzzQuoteFlowVars(f *testing.F) {
	for _, s := range []string{
		"env: { API_KEY: ${FS_KEY} }\n", "a: [${A}, '${B}', \"${C}\"]\n", "p: |\n  { ${A} }\nq: {x: ${B}}\n",
		"k: 'it''s' {\n", "m: {a: ${A\n", "x: \"\\\"${A}\" # { ${B} }\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, changed := quoteFlowVars(in)
		if !changed {
			if string(out) != string(in) {
				t.Fatalf("unchanged but different: %q", out)
			}
			return
		}
		if bytes.Count(out, []byte("\n")) != bytes.Count(in, []byte("\n")) {
			t.Fatalf("line count changed: %q → %q", in, out)
		}
		strip := func(b []byte) string { return string(bytes.ReplaceAll(b, []byte(`"`), nil)) }
		added := len(out) - len(in)
		if strip(out) != strip(in) || added <= 0 || added%2 != 0 {
			t.Fatalf("more than quote pairs changed: %q → %q", in, out)
		}
	})
}

// limits reports two problems at once: one with a nested key, one about
// the section whose text looks like "key: message".
type limits struct {
	Inner struct {
		Max int `yaml:"max"`
	} `yaml:"inner"`
}

func (l limits) Validate() error {
	if l.Inner.Max < 0 {
		return errors.Join(cfgerr.Errorf("inner.max", "is %d: under 0", l.Inner.Max), errors.New("name: text, not a key"))
	}
	return nil
}

// A Validate's typed errors are positioned by their Key, each of them, and
// their text is never read for a key: a plain error stays at the section.
func TestValidateTreeFieldErrors(t *testing.T) {
	d, err := Parse("c.yaml", []byte("limits:\n  inner:\n    max: -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Limits limits `yaml:"limits"`
	}
	if _, err := d.Decode(&c, env(nil)); err != nil {
		t.Fatal(err)
	}
	errs := d.ValidateTree("", reflect.ValueOf(&c).Elem())
	var got []string
	for _, e := range errs {
		var fe *Error
		if !errors.As(e, &fe) {
			t.Fatalf("%T %v", e, e)
		}
		got = append(got, fmt.Sprintf("%d|%s|%s", fe.Line, fe.Key, fe.Msg))
	}
	want := []string{"3|limits.inner.max|is -1: under 0", "1|limits|name: text, not a key"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("errors %q, want %q", got, want)
	}
}
