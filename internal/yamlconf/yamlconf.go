// Package yamlconf loads a YAML config file into plain Go structs with errors
// a person can act on: every error names the file, the line and the key.
//
// Load order: parse the text into a node tree (syntax errors; a bare ${VAR}
// inside a flow collection, which YAML rejects, is read as if quoted: see
// quoteFlowVars), check keys against the target struct (unknown keys inside
// a known section are errors, unknown top-level sections are warnings,
// duplicate keys are errors), expand
// ${VAR} / ${VAR:-default} in scalar values (never in the raw text; $${ is a
// literal ${), then decode into the structs. Callers attribute their own
// validation errors to a key with Doc.Errorf, which finds the key's line.
package yamlconf

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
)

// Error is one problem in a config file.
type Error struct {
	File string
	Line int    // 1-based; 0 when the key is not in the file
	Key  string // dotted path, e.g. agents[1].id; "" for the whole file
	Msg  string
	// Source names where the value came from when not from the file (an
	// environment variable, a flag); the message then blames it instead of
	// File and Line.
	Source string
}

func (e *Error) Error() string {
	if e.Source != "" {
		return e.Source + ": " + e.Msg
	}
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Lookup reads a variable for ${VAR} expansion; ok is false when unset.
type Lookup func(name string) (value string, ok bool)

// Doc is a parsed config file.
type Doc struct {
	File string
	root *yaml.Node // the top-level mapping; nil for an empty file
	// expanded marks scalars whose value came from a variable, so that
	// messages never quote them (they may be secrets).
	expanded map[*yaml.Node]bool
	// failed are the keys Decode reported errors at.
	failed []string
}

// Parse reads YAML text. file names the source in messages.
func Parse(file string, data []byte) (*Doc, error) {
	d := &Doc{File: file, expanded: map[*yaml.Node]bool{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		quoted, changed := quoteFlowVars(data)
		if !changed {
			return nil, d.syntaxError(err)
		}
		doc = yaml.Node{}
		if yaml.Unmarshal(quoted, &doc) != nil {
			return nil, d.syntaxError(err) // the first error is the one to fix
		}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return d, nil // empty file: every section takes its defaults
	}
	root := doc.Content[0]
	if doc.Kind == yaml.DocumentNode && root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return d, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: file, Line: root.Line, Msg: "the config must be a mapping of sections (server:, agents:, …)"}
	}
	d.root = root
	return d, nil
}

var lineRE = regexp.MustCompile(`^yaml: line (\d+): `)

func (d *Doc) syntaxError(err error) error {
	var le *yaml.LoadError
	if errors.As(err, &le) && le.Mark.Line > 0 {
		return &Error{File: d.File, Line: le.Mark.Line, Msg: "invalid YAML: " + plainYAML(le.Message)}
	}
	msg := err.Error()
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: d.File, Line: line, Msg: "invalid YAML: " + plainYAML(msg[len(m[0]):])}
	}
	return &Error{File: d.File, Msg: "invalid YAML: " + plainYAML(strings.TrimPrefix(msg, "yaml: "))}
}

// yamlWords say in plain words what the parser's messages mean, for the
// mistakes people make in config files.
var yamlWords = []struct{ parser, plain string }{
	{"did not find expected '-' indicator", "a list item must start with '-' at the same indentation as the items above it"},
	{"did not find expected key", "this line's indentation does not line up with the keys above it"},
	{"mapping values are not allowed in this context", "a ':' here makes a key where none can be: indent it under a key, or quote a value that contains ': '"},
	{"found character that cannot start any token", "a character that cannot start a value (a tab? indent with spaces only; quote values starting with @ or `)"},
	{"could not find expected ':'", "a key without its ':' (or a quote opened above and never closed)"},
	{"did not find expected ',' or ']'", "a [list] is not closed with ']' (or its items lack commas)"},
	{"did not find expected ',' or '}'", "a {map} is not closed with '}' (or its entries lack commas)"},
	{"found unexpected end of stream", "the file ends inside a quote or a bracket opened above"},
	{"block sequence entries are not allowed in this context", "a '- item' where a value was expected: put the list on the lines below the key"},
}

func plainYAML(msg string) string {
	for _, w := range yamlWords {
		if strings.Contains(msg, w.parser) {
			return w.plain + " (parser: " + msg + ")"
		}
	}
	return msg
}

// Decode checks keys, expands variables and decodes into dst, a pointer to
// a struct. Warnings (unknown top-level sections) come back even when err
// is nil. All errors found are joined; each is an *Error.
func (d *Doc) Decode(dst any, lookup Lookup) (warnings []string, err error) {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("yamlconf: Decode needs a pointer to a struct, got %T", dst)
	}
	if d.root == nil {
		return nil, nil
	}
	c := &checker{doc: d, paths: map[[2]int]string{}, types: map[[2]int]reflect.Type{}, ignored: map[*yaml.Node]bool{}, done: map[*yaml.Node]bool{}, aliasChecked: map[aliasCheck]bool{}}
	c.checkKeys(d.root, rv.Elem().Type(), "", true)
	// A duplicate key, reported, is dropped: the decoder would stop at it
	// and leave the rest of the file undecoded.
	for _, dp := range c.dups {
		if i := slices.Index(dp.mapping.Content, dp.key); i >= 0 && i+1 < len(dp.mapping.Content) {
			dp.mapping.Content = slices.Delete(dp.mapping.Content, i, i+2)
		}
	}
	c.expand(d.root, "", lookup)
	// The decoder runs even after key errors, so that one run reports every
	// error of the file: the values already reported were replaced by null
	// (blank), so it does not report them again.
	errs := c.errs
	if err := d.root.Decode(dst); err != nil {
		for _, e := range c.decodeErrors(err) {
			if !slices.ContainsFunc(errs, func(x error) bool { fe, ok := x.(*Error); return ok && sameSpot(fe, e) }) {
				errs = append(errs, e)
			}
		}
	}
	for _, e := range errs {
		if fe, ok := e.(*Error); ok {
			d.failed = append(d.failed, fe.Key)
		}
	}
	return c.warnings, errors.Join(errs...)
}

// sameSpot reports whether two errors are about one key on one line.
func sameSpot(a, b *Error) bool {
	return a.Key == b.Key && a.Line == b.Line
}

// Failed reports whether Decode found an error at key, at a key that holds
// it, or at one of its own keys: a check of the decoded value there would
// only repeat it (a value that did not decode is zero: "id is required"
// beside "agents[0].id: expected a string").
func (d *Doc) Failed(key string) bool {
	for _, k := range d.failed {
		if key == k || k != "" && (strings.HasPrefix(key, k+".") || strings.HasPrefix(key, k+"[")) || key == parentKey(k) {
			return true
		}
	}
	return false
}

// parentKey is the key holding key: "agents[0]" for "agents[0].id",
// "agents" for "agents[0]", "" at the top.
func parentKey(key string) string {
	if i := strings.LastIndexAny(key, ".["); i >= 0 {
		return key[:i]
	}
	return ""
}

type checker struct {
	doc      *Doc
	errs     []error
	warnings []string
	ignored  map[*yaml.Node]bool     // values of unknown top-level sections
	done     map[*yaml.Node]bool     // scalars already expanded (an anchor used twice)
	paths    map[[2]int]string       // node position → key path, for decode errors
	types    map[[2]int]reflect.Type // node position → the type it decodes into
	dups     []dup
	// aliasChecked records anchored values already checked as a type, and
	// (with a nil type) already expanded.
	aliasChecked map[aliasCheck]bool
}

// dup is a key written twice in a mapping (its second occurrence).
type dup struct{ mapping, key *yaml.Node }

type aliasCheck struct {
	node *yaml.Node
	typ  reflect.Type
}

// isMerge reports whether k is the YAML merge key (<<: *defaults).
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "!!merge" || k.Tag == "" || k.Style == 0)
}

// checkMerge checks the mappings a merge key brings in (an alias or a list
// of aliases) against the type of the mapping they merge into.
func (c *checker) checkMerge(v *yaml.Node, t reflect.Type, path string) {
	if v.Kind == yaml.SequenceNode {
		for _, item := range v.Content {
			c.checkKeys(item, t, path, false)
		}
		return
	}
	c.checkKeys(v, t, path, false)
}

func (c *checker) errorf(n *yaml.Node, path, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.doc.File, Line: n.Line, Key: path, Msg: fmt.Sprintf(format, args...)})
}

// field is one YAML key of a struct, found through inline structs too.
type field struct {
	name string
	typ  reflect.Type
}

func structFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, structFields(ft)...)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, field{name: name, typ: f.Type})
	}
	return out
}

var (
	nodeType        = reflect.TypeFor[yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkKeys walks the node tree alongside the Go type it will decode into.
func (c *checker) checkKeys(n *yaml.Node, t reflect.Type, path string, top bool) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		// The anchored value is checked as if written here (it may sit in
		// an ignored section, or nowhere else under this type), once per
		// type: aliases of aliases must not multiply the work.
		key := aliasCheck{n.Alias, t}
		if !c.aliasChecked[key] {
			c.aliasChecked[key] = true
			c.checkKeys(n.Alias, t, path, top)
		}
		return
	}
	c.paths[[2]int{n.Line, n.Column}] = path
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	c.types[[2]int{n.Line, n.Column}] = t
	if t == nodeType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) {
		c.indexPaths(n, path)
		return
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := structFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if isMerge(k) {
				c.checkMerge(v, t, path)
				continue
			}
			kp := join(path, key)
			c.paths[[2]int{k.Line, k.Column}] = kp
			if seen[key] {
				c.errorf(k, kp, "duplicate key")
				c.dups = append(c.dups, dup{n, k})
				continue
			}
			seen[key] = true
			j := slices.IndexFunc(fields, func(f field) bool { return f.name == key })
			if j < 0 {
				guess := nearest(key, fields)
				switch {
				case top && guess != "":
					// A near miss of a known section (mcpServers, the
					// Claude Desktop spelling) would silently drop what it
					// holds: an error, not a warning.
					c.errorf(k, kp, "unknown section: did you mean `%s`?", guess)
				case top && len(sectionKeys(key, v, fields)) > 0:
					// A key dedented out of its section (addr: at the top)
					// would be dropped and its default used: an error. Only
					// a value of the key's own shape counts, so a section of
					// another program's config that happens to share a
					// key's name (a mapping where a string belongs) stays
					// a warning.
					c.errorf(k, kp, "not a section: did you mean %s? (a section's key is indented under it)", strings.Join(sectionKeys(key, v, fields), " or "))
					c.ignored[v] = true
				case top:
					c.warnings = append(c.warnings, fmt.Sprintf("%s:%d: unknown section %q ignored", c.doc.File, k.Line, key))
					c.ignored[v] = true // nor are its ${VAR}s expanded
				case guess != "":
					c.errorf(k, kp, "unknown key: did you mean `%s`? (known: %s)", guess, knownNames(fields))
				default:
					c.errorf(k, kp, "unknown key (known: %s)", knownNames(fields))
				}
				continue
			}
			if alt := otherShape(key, v, fields[j], fields); alt != "" {
				// mcp_server: holding a list (mcp_servers' entries).
				c.errorf(k, kp, "%s here, but %s takes %s: did you mean `%s`?", shapeOf(v), key, shapeOfType(fields[j].typ), join(path, alt))
				blank(v)
				continue
			}
			c.checkKeys(v, fields[j].typ, kp, false)
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMerge(k) {
				c.checkMerge(v, t, path)
				continue
			}
			kp := join(path, k.Value)
			c.paths[[2]int{k.Line, k.Column}] = kp
			if seen[k.Value] {
				c.errorf(k, kp, "duplicate key")
				c.dups = append(c.dups, dup{n, k})
				continue
			}
			seen[k.Value] = true
			c.checkKeys(v, t.Elem(), kp, false)
		}
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, v := range n.Content {
			c.checkKeys(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), false)
		}
	default:
		// A kind mismatch (a list where a string belongs) is reported by
		// the decoder, with this path.
		c.indexPaths(n, path)
	}
}

// nearest is the field name a mistyped key most likely meant: the same
// letters ignoring case and separators (mcpServers, mcp-servers), or one
// within an edit distance of 2 (a third of the key for short ones); "" when
// none is close.
func nearest(key string, fields []field) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	best, bestDist := "", 3
	for _, f := range fields {
		if norm(f.name) == norm(key) {
			return f.name
		}
		limit := min(2, max(1, len(f.name)/3))
		if d := editDistance(norm(key), norm(f.name)); d <= limit && d < bestDist {
			best, bestDist = f.name, d
		}
	}
	return best
}

// sectionKeys are the keys (as `server.addr`, `agents[].timeout`) that a
// top-level key not naming a section names in a section of fields, where
// its value has the shape that key takes.
func sectionKeys(key string, v *yaml.Node, fields []field) []string {
	var out []string
	for _, f := range fields {
		t, name := deref(f.typ), f.name
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t, name = deref(t.Elem()), name+"[]"
		}
		if t.Kind() != reflect.Struct || t == nodeType {
			continue
		}
		for _, sf := range structFields(t) {
			if sf.name == key && fits(v, sf.typ) {
				out = append(out, "`"+name+"."+key+"`")
			}
		}
	}
	return out
}

// otherShape is the sibling of f that a value of the wrong shape for f was
// most likely meant for (mcp_server: with a list, for mcp_servers), or "".
func otherShape(key string, v *yaml.Node, f field, fields []field) string {
	if fits(v, f.typ) {
		return ""
	}
	var fitting []field
	for _, g := range fields {
		if g.name != f.name && fits(v, g.typ) {
			fitting = append(fitting, g)
		}
	}
	return nearest(key, fitting)
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fits reports whether a node of v's kind can decode into t: a list into a
// slice, a mapping into a struct or map, a scalar into anything else (null
// and types that decode themselves fit everything).
func fits(v *yaml.Node, t reflect.Type) bool {
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	t = deref(t)
	if t == nodeType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) {
		return true
	}
	switch v.Kind {
	case yaml.SequenceNode:
		return t.Kind() == reflect.Slice || t.Kind() == reflect.Array
	case yaml.MappingNode:
		return t.Kind() == reflect.Struct || t.Kind() == reflect.Map
	case yaml.ScalarNode:
		if v.Tag == "!!null" || v.Value == "" && v.Style == 0 {
			return true
		}
		switch t.Kind() {
		case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
			return false
		}
	}
	return true
}

// shapeOf names a node's kind as the config's words do.
func shapeOf(v *yaml.Node) string {
	switch v.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "a single value"
}

// shapeOfType names what a Go type takes, in the config's words (never the
// Go type's name).
func shapeOfType(t reflect.Type) string {
	switch deref(t).Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return "a single value"
}

// blank replaces a value already reported by null, so the decoder leaves
// its field zero instead of reporting it again.
func blank(n *yaml.Node) {
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// indexPaths records positions below n whose structure the types do not
// describe, so decode errors there still name the nearest key.
func (c *checker) indexPaths(n *yaml.Node, path string) {
	c.paths[[2]int{n.Line, n.Column}] = path
	for _, ch := range n.Content {
		if _, ok := c.paths[[2]int{ch.Line, ch.Column}]; !ok {
			c.indexPaths(ch, path)
		}
	}
}

func knownNames(fields []field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// expand replaces variables in every scalar value (keys are left alone).
func (c *checker) expand(n *yaml.Node, path string, lookup Lookup) {
	if c.ignored[n] {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.expand(n.Content[i+1], join(path, n.Content[i].Value), lookup)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			c.expand(v, fmt.Sprintf("%s[%d]", path, i), lookup)
		}
	case yaml.AliasNode:
		// The anchored value is config where it is used, even when it
		// sits in an ignored section; done keeps it expanded once.
		if key := (aliasCheck{node: n.Alias}); n.Alias != nil && !c.aliasChecked[key] {
			c.aliasChecked[key] = true // typ nil: "expanded"
			delete(c.ignored, n.Alias)
			c.expand(n.Alias, path, lookup)
		}
	case yaml.ScalarNode:
		if strings.HasSuffix(path, "_bytes") && !c.done[n] {
			defer byteSize(n) // after expansion: ${SIZE:-8MiB}
		}
		if c.done[n] || !strings.Contains(n.Value, "${") {
			return
		}
		c.done[n] = true
		out, usedVar, err := Expand(n.Value, lookup)
		if err != nil {
			c.errorf(n, path, "%v", err)
			blank(n)
			return
		}
		n.Value = out
		if usedVar {
			c.doc.expanded[n] = true
		}
		if n.Style == 0 || n.Style == yaml.TaggedStyle {
			// A plain scalar is typed by its final text, so ${PORT} can
			// fill an int and ${TIMEOUT:-30s} a duration. A value that
			// would read as null ("null", "~") is text, though: a token
			// "null" must not silently become no token.
			n.Tag = ""
			switch out {
			case "~", "null", "Null", "NULL":
				n.Tag = "!!str"
			}
		}
	}
}

// sizePattern is a byte count with a unit, as *_bytes keys take it.
var sizePattern = regexp.MustCompile(`^([0-9]+)\s*(B|KB|MB|GB|KiB|MiB|GiB)$`)

var sizeUnits = map[string]int64{"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

// byteSize turns "8MiB" or "512 KB" into a count of bytes, for keys named
// *_bytes; a plain number is left as is, anything else to the decoder's
// type error.
func byteSize(n *yaml.Node) {
	m := sizePattern.FindStringSubmatch(strings.TrimSpace(n.Value))
	if m == nil {
		return
	}
	v, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || v > math.MaxInt64/sizeUnits[m[2]] {
		return
	}
	n.Value = strconv.FormatInt(v*sizeUnits[m[2]], 10)
	n.Tag = "!!int"
	n.Style = 0
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ErrUnset is the error for a variable that is unset and has no default.
var ErrUnset = errors.New("is not set")

// Expand replaces ${VAR} and ${VAR:-default} in s; $${ stands for a literal
// ${. ${VAR:-default} takes the default when VAR is unset or empty; ${VAR}
// is an error when VAR is unset (an empty value is fine). usedVar reports
// whether any variable was substituted.
func Expand(s string, lookup Lookup) (out string, usedVar bool, err error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), usedVar, nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", false, fmt.Errorf("unterminated ${ (write $${ for a literal ${)")
		}
		expr := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !varName.MatchString(name) {
			return "", false, fmt.Errorf("invalid variable name %q in ${…}", name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			b.WriteString(def)
		case !ok:
			return "", false, fmt.Errorf("variable %s %w (use ${%s:-default} to give a default)", name, ErrUnset, name)
		default:
			usedVar = true
			b.WriteString(v)
		}
	}
}

var (
	quotedRE   = regexp.MustCompile("`[^`]*`")
	typeErrRE  = regexp.MustCompile("^cannot (?:construct|unmarshal) !!(\\w+) (`[^`]*` )?into (.+)$")
	kindByTag  = map[string]string{"str": "a string", "map": "a mapping", "seq": "a list", "int": "a number", "float": "a number", "bool": "a boolean", "null": "null"}
	goTypeName = map[string]string{"time.Duration": "a duration (like 30s or 5m)", "string": "a string", "secret.Secret": "a string", "bool": "true or false", "int": "a whole number", "int64": "a whole number", "float64": "a number"}
)

// secretTarget reports whether a decoder's target type holds secrets
// (secret.Secret, a map or list of them): a value found there is not
// quoted, even when written in the file rather than from a variable.
func secretTarget(goType string) bool { return strings.Contains(goType, "secret.Secret") }

// typeMessage rewrites the decoder's message in the config's terms. The
// value is quoted only when it was written in the file, never when it came
// from a variable (it may be a secret).
func typeMessage(msg string, hideValue bool, target reflect.Type) string {
	m := typeErrRE.FindStringSubmatch(msg)
	if m != nil && secretTarget(m[3]) {
		hideValue = true
	}
	if m == nil {
		if hideValue || secretTarget(msg) {
			return quotedRE.ReplaceAllString(msg, "(value hidden)")
		}
		return msg
	}
	got := kindByTag[m[1]]
	if got == "" {
		got = "!!" + m[1]
	}
	if m[2] != "" && !hideValue {
		got += " " + strings.TrimSpace(m[2])
	}
	return fmt.Sprintf("expected %s, got %s", wantOf(strings.TrimLeft(m[3], "*"), target), got)
}

var (
	intType   = regexp.MustCompile(`^u?int(8|16|32|64)?$`)
	floatType = regexp.MustCompile(`^float(32|64)$`)
)

// wantOf says what the decoder's target type (its name, and the type when
// the checker saw it) takes in the config's words: no message names a Go
// type (mcpserver.Config), which a person writing YAML has no use for.
func wantOf(goType string, target reflect.Type) string {
	switch want := goTypeName[goType]; {
	case want != "":
		return want
	case strings.HasPrefix(goType, "[]"), strings.HasPrefix(goType, "["):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	case intType.MatchString(goType):
		return "a whole number"
	case floatType.MatchString(goType):
		return "a number"
	}
	if target != nil {
		switch target.Kind() {
		case reflect.Struct, reflect.Map:
			return "a mapping"
		case reflect.String:
			return "a string"
		case reflect.Bool:
			return "true or false"
		}
	}
	if strings.HasPrefix(goType, "struct") || strings.Contains(goType, ".") {
		return "a mapping" // a section or an entry, most likely
	}
	return "a value of another kind"
}

func (c *checker) decodeErrors(err error) []*Error {
	var les *yaml.LoadErrors
	if !errors.As(err, &les) {
		var le *yaml.LoadError
		if errors.As(err, &le) {
			les = &yaml.LoadErrors{Errors: []*yaml.LoadError{le}}
		} else {
			return []*Error{{File: c.doc.File, Msg: err.Error()}}
		}
	}
	var errs []*Error
	for _, le := range les.Errors {
		path := c.paths[[2]int{le.Mark.Line, le.Mark.Column}]
		n := c.nodeAt(le.Mark.Line, le.Mark.Column)
		msg := typeMessage(le.Message, n == nil || c.doc.expanded[n], c.types[[2]int{le.Mark.Line, le.Mark.Column}])
		if strings.HasSuffix(path, "_bytes") {
			// A size the unit pattern did not take: say what sizes look like.
			msg = strings.Replace(msg, "expected a whole number", "expected a size in bytes (a number, or with a unit: 512KB, 8MiB; units B, KB, MB, GB, KiB, MiB, GiB)", 1)
		}
		errs = append(errs, &Error{File: c.doc.File, Line: le.Mark.Line, Key: path, Msg: msg})
	}
	return errs
}

func (c *checker) nodeAt(line, col int) *yaml.Node {
	var found *yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if found != nil {
			return
		}
		if n.Line == line && n.Column == col && n.Kind == yaml.ScalarNode {
			found = n
			return
		}
		for _, ch := range n.Content {
			walk(ch)
		}
	}
	walk(c.doc.root)
	return found
}

// Errorf returns an error about the key at path (e.g. "agents[1].id"),
// with the key's line when the file has it. A value below the key that
// came from a variable is never quoted (hideExpanded).
func (d *Doc) Errorf(path, format string, args ...any) *Error {
	return &Error{File: d.File, Line: d.Line(path), Key: path, Msg: d.hideExpanded(path, fmt.Sprintf(format, args...))}
}

// Line returns the line of the key at path (for list items, of the item),
// or, when the file does not have it, of its nearest ancestor that it has
// (0 for none).
func (d *Doc) Line(path string) int {
	line, _ := d.find(path)
	return line
}

// Has reports whether the file has the key at path.
func (d *Doc) Has(path string) bool {
	_, found := d.find(path)
	return found
}

func (d *Doc) find(path string) (line int, found bool) {
	_, line, found = d.node(path)
	return line, found
}

// node returns the value at path and the line of its key (of the item,
// in a list).
func (d *Doc) node(path string) (value *yaml.Node, line int, found bool) {
	if d == nil || d.root == nil || path == "" {
		return nil, 0, false
	}
	n := d.root
	for _, seg := range splitPath(path) {
		switch {
		case seg.index >= 0:
			if n.Kind != yaml.SequenceNode || seg.index >= len(n.Content) {
				return nil, line, false
			}
			n = n.Content[seg.index]
			line = n.Line
		default:
			if n.Kind != yaml.MappingNode {
				return nil, line, false
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.key {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
			if next == nil {
				return nil, line, false
			}
			n = next
		}
	}
	return n, line, true
}

type segment struct {
	key   string
	index int // -1 for a key
}

func splitPath(path string) []segment {
	var segs []segment
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			segs = append(segs, segment{key: key, index: -1})
		}
		for rest != "" {
			num, after, _ := strings.Cut(rest, "]")
			i, err := strconv.Atoi(num)
			if err != nil {
				break
			}
			segs = append(segs, segment{index: i})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return segs
}

// FieldErrors positions what a Validate of the value at path returned: each
// *cfgerr.Error in err (joined ones too) at its key below path, read from
// the error's Key and never from its text; another error at path.
func (d *Doc) FieldErrors(path string, err error) []error {
	var errs []error
	for _, e := range cfgerr.Split(err) {
		errs = append(errs, d.Errorf(cfgerr.Join(path, e.Key), "%s", e.Msg))
	}
	return errs
}

// hideExpanded replaces in msg, a message about the key at path (a
// module's Validate quotes what it refuses), every value below that key that came from a variable (it may be
// a secret: server.addr: ${API_TOKEN} by mistake must not print the
// token), quoted or not.
func (d *Doc) hideExpanded(path, msg string) string {
	n, _, found := d.node(path)
	if !found {
		return msg
	}
	seen := map[*yaml.Node]bool{} // an anchor is walked once, however often used
	var hide func(*yaml.Node)
	hide = func(n *yaml.Node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		hide(n.Alias)
		if n.Kind == yaml.ScalarNode && d.expanded[n] && n.Value != "" {
			msg = strings.ReplaceAll(msg, strconv.Quote(n.Value), "(value hidden)")
			msg = strings.ReplaceAll(msg, n.Value, "(value hidden)")
		}
		for _, c := range n.Content {
			hide(c)
		}
	}
	if len(d.expanded) > 0 {
		hide(n)
	}
	return msg
}

// Validator is a config section that checks itself.
type Validator interface{ Validate() error }

// ValidateTree calls Validate on v if it has one; otherwise it walks v's
// exported fields (inline ones too), slice items and map values and
// validates what it finds. A struct with Validate is trusted to cover its
// fields; a list or map with its own Validate (say, unique names) is
// still walked, whether that passes or not, so each item's error gets the
// item's line. Each error is attributed to its key's line.
func (d *Doc) ValidateTree(path string, v reflect.Value) []error {
	if !v.IsValid() {
		return nil
	}
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	var val Validator
	if v.CanInterface() {
		if x, ok := v.Interface().(Validator); ok {
			val = x
		} else if v.CanAddr() {
			if x, ok := v.Addr().Interface().(Validator); ok {
				val = x
			}
		}
	}
	var errs []error
	if val != nil {
		err := val.Validate()
		switch v.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			// Walked even when its own check failed: a duplicate name
			// must not hide what is wrong in the entries.
			if err != nil {
				errs = d.FieldErrors(path, err)
			}
		default:
			if err != nil {
				return d.FieldErrors(path, err)
			}
			return nil
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			errs = append(errs, d.ValidateTree(path, v.Elem())...)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if slices.Contains(strings.Split(opts, ","), "inline") {
				errs = append(errs, d.ValidateTree(path, v.Field(i))...)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			errs = append(errs, d.ValidateTree(join(path, name), v.Field(i))...)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			errs = append(errs, d.ValidateTree(fmt.Sprintf("%s[%d]", path, i), v.Index(i))...)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			errs = append(errs, d.ValidateTree(join(path, fmt.Sprint(iter.Key().Interface())), iter.Value())...)
		}
	}
	return errs
}
