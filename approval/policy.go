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
// default; the Module checks remembered decisions before it. What the rules
// decide depends only on a tool's name and annotations, so it is cached by
// name: a call of a tool seen before costs one map lookup, however many
// rules there are.
type policy struct {
	def   string
	rules []compiledRule
	ann   annCache

	mu    sync.RWMutex
	cache map[string]cachedDecision
}

type cachedDecision struct {
	annotations string // the tool's annotations it was decided with
	approval    string // the tool's Approval it was decided with
	decision    string
	by          string
	rule        int
}

// policyCacheMax bounds the cache; it starts over when full.
const policyCacheMax = 8192

func newPolicy(cfg Config) *policy {
	p := &policy{def: cfg.Default, cache: map[string]cachedDecision{}}
	for _, r := range cfg.Rules {
		p.rules = append(p.rules, compile(r))
	}
	return p
}

// decide returns the decision for a call of t and what made it.
func (p *policy) decide(t *axocoatl.Tool) (decision, by string, rule int) {
	p.mu.RLock()
	c, ok := p.cache[t.Name]
	p.mu.RUnlock()
	if ok && c.approval == t.Approval && c.annotations == string(t.Annotations) {
		return c.decision, c.by, c.rule
	}
	decision, by, rule = p.evaluate(t)
	p.mu.Lock()
	if len(p.cache) >= policyCacheMax {
		clear(p.cache)
	}
	p.cache[t.Name] = cachedDecision{string(t.Annotations), t.Approval, decision, by, rule}
	p.mu.Unlock()
	return decision, by, rule
}

// evaluate applies the rules, the tool's policy and the default.
func (p *policy) evaluate(t *axocoatl.Tool) (decision, by string, rule int) {
	slash := strings.Contains(t.Name, "/")
	for i := range p.rules {
		r := &p.rules[i]
		if !r.matchName(t.Name, slash) {
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
// exact name, and globs whose only metacharacter is "*" (matched by their
// literal chunks). Other globs (?, [...], \) are checked against their
// literal prefix first, then with path.Match.
type compiledRule struct {
	Rule
	kind    uint8    // matchExact, matchStars, matchGlob
	literal string   // matchExact: the name; matchGlob: the literal prefix
	chunks  []string // matchStars: the pattern split at each "*"
	hasCond bool
}

const (
	matchExact = iota
	matchStars
	matchGlob
)

func compile(r Rule) compiledRule {
	c := compiledRule{Rule: r}
	c.hasCond = r.ReadOnly != nil || r.Destructive != nil || r.Idempotent != nil || r.OpenWorld != nil
	switch meta := strings.IndexAny(r.Tool, `*?[\`); {
	case meta < 0:
		c.kind, c.literal = matchExact, r.Tool
	case !strings.ContainsAny(r.Tool, `?[\`):
		c.kind, c.chunks = matchStars, strings.Split(r.Tool, "*")
	default:
		c.kind, c.literal = matchGlob, r.Tool[:meta]
	}
	return c
}

// matchName reports whether name matches; slash says name contains "/".
func (c *compiledRule) matchName(name string, slash bool) bool {
	switch c.kind {
	case matchExact:
		return name == c.literal
	case matchStars:
		if !slash {
			return matchChunks(c.chunks, name)
		}
	default:
		if !strings.HasPrefix(name, c.literal) {
			return false
		}
	}
	ok, _ := path.Match(c.Tool, name)
	return ok
}

// matchChunks matches name (which has no "/") against a glob split at its
// stars: the first chunk is a prefix, the last a suffix, the others must
// appear in order between them (leftmost first is always right for globs
// with "*" only).
func matchChunks(chunks []string, name string) bool {
	first, last := chunks[0], chunks[len(chunks)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	rest := name[len(first) : len(name)-len(last)]
	for _, mid := range chunks[1 : len(chunks)-1] {
		i := strings.Index(rest, mid)
		if i < 0 {
			return false
		}
		rest = rest[i+len(mid):]
	}
	return true
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
