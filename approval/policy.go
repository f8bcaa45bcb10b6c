package approval

import (
	"encoding/json"
	"path"
	"strings"
	"sync"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// Where a decision came from, for the audit trail.
const (
	byRemembered = "remembered"
	byRule       = "rule"
	byTool       = "tool"
	byDefault    = "default"
)

// policy decides calls from the rules, the tool's own policy and the
// default; the Module checks remembered decisions before it.
type policy struct {
	def   string
	rules []compiledRule
	ann   annCache
}

func newPolicy(cfg Config) *policy {
	p := &policy{def: cfg.Default}
	for _, r := range cfg.Rules {
		p.rules = append(p.rules, compile(r))
	}
	return p
}

// decide returns the decision for a call of t and what made it.
func (p *policy) decide(t *axocoatl.Tool) (decision, by string, rule int) {
	for i := range p.rules {
		r := &p.rules[i]
		if !r.matchName(t.Name) {
			continue
		}
		if r.hasCond && !r.matchAnnotations(p.ann.get(t.Annotations)) {
			continue
		}
		return r.Decision, byRule, i
	}
	switch t.Approval {
	case Prompt, Allow, Deny:
		return t.Approval, byTool, -1
	}
	return p.def, byDefault, -1
}

// compiledRule matches names without path.Match in the common cases: an
// exact name, a prefix followed by one "*"; other globs are checked against
// their literal prefix first.
type compiledRule struct {
	Rule
	kind    uint8 // matchExact, matchPrefix, matchGlob
	literal string
	hasCond bool
}

const (
	matchExact = iota
	matchPrefix
	matchGlob
)

func compile(r Rule) compiledRule {
	c := compiledRule{Rule: r}
	c.hasCond = r.ReadOnly != nil || r.Destructive != nil || r.Idempotent != nil || r.OpenWorld != nil
	meta := strings.IndexAny(r.Tool, `*?[\`)
	switch {
	case meta < 0:
		c.kind, c.literal = matchExact, r.Tool
	case meta == len(r.Tool)-1 && r.Tool[meta] == '*':
		// "*" never matches "/" in path.Match; a qualified name has none,
		// but keep the semantics: the rest must contain no "/".
		c.kind, c.literal = matchPrefix, r.Tool[:meta]
	default:
		c.kind, c.literal = matchGlob, r.Tool[:meta]
	}
	return c
}

func (c *compiledRule) matchName(name string) bool {
	switch c.kind {
	case matchExact:
		return name == c.literal
	case matchPrefix:
		return strings.HasPrefix(name, c.literal) && !strings.Contains(name[len(c.literal):], "/")
	}
	if !strings.HasPrefix(name, c.literal) {
		return false
	}
	ok, _ := path.Match(c.Tool, name)
	return ok
}

func (c *compiledRule) matchAnnotations(a toolHints) bool {
	return (c.ReadOnly == nil || *c.ReadOnly == a.readOnly) &&
		(c.Destructive == nil || *c.Destructive == a.destructive) &&
		(c.Idempotent == nil || *c.Idempotent == a.idempotent) &&
		(c.OpenWorld == nil || *c.OpenWorld == a.openWorld)
}

// toolHints are a tool's MCP annotations with the spec's defaults applied.
type toolHints struct{ readOnly, destructive, idempotent, openWorld bool }

func parseHints(raw json.RawMessage) toolHints {
	var a struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
		Idempotent  *bool `json:"idempotentHint"`
		OpenWorld   *bool `json:"openWorldHint"`
	}
	h := toolHints{destructive: true, openWorld: true}
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil {
		return h
	}
	if a.ReadOnly != nil {
		h.readOnly = *a.ReadOnly
	}
	if a.Destructive != nil {
		h.destructive = *a.Destructive
	}
	if a.Idempotent != nil {
		h.idempotent = *a.Idempotent
	}
	if a.OpenWorld != nil {
		h.openWorld = *a.OpenWorld
	}
	return h
}

// annCache keeps parsed annotations by their JSON text, so that a rule with
// conditions does not decode JSON on every call. Bounded: it starts over
// when full.
type annCache struct {
	mu sync.RWMutex
	m  map[string]toolHints
}

const annCacheMax = 4096

func (c *annCache) get(raw json.RawMessage) toolHints {
	c.mu.RLock()
	h, ok := c.m[string(raw)]
	c.mu.RUnlock()
	if ok {
		return h
	}
	h = parseHints(raw)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= annCacheMax {
		c.m = map[string]toolHints{}
	}
	c.m[string(raw)] = h
	c.mu.Unlock()
	return h
}
