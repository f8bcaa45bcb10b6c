package mcpserver

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// MetaNode is the _meta key of an agent tool whose agent runs on another
// daemon of the cluster: that daemon's node name ([axocoatl.AgentInfo.Node]).
// Calls of the tool are answered the same wherever the agent runs.
const MetaNode = "axocoatl/node"

// nodeMeta says where a remote agent runs; nil for this daemon's own.
func nodeMeta(a axocoatl.AgentInfo) mcp.Meta {
	if a.Node == "" {
		return nil
	}
	return mcp.Meta{MetaNode: a.Node}
}
