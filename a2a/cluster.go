package a2a

import axocoatl "github.com/axocoatl/axocoatl-go"

// skillTags tags an agent's skill on a card; an agent another daemon of
// the cluster runs is also tagged "node:<name>" (where it runs).
func skillTags(a axocoatl.AgentInfo) []string {
	if a.Node == "" {
		return []string{"agent", a.ID}
	}
	return []string{"agent", a.ID, "node:" + a.Node}
}
