package mcpclient

import "github.com/axocoatl/axocoatl-go/lattice"

// The events the module publishes.
const (
	// EventServerConnected: a server's session is up and its tools are
	// registered. Payload: server, tools. Telemetry.
	EventServerConnected = "McpServerConnected"
	// EventServerDisconnected: a server's session ended or could not
	// start; its tools fail until it is back. Payload: server, tools,
	// error. Telemetry.
	EventServerDisconnected = "McpServerDisconnected"
	// EventToolChanged: an MCP server changed a tool's definition (its
	// description or input schema, so its fingerprint) on list_changed or
	// a reconnect. Payload: server, tool, old_fingerprint,
	// new_fingerprint, changed ("description", "schema"). Coordination:
	// a decision remembered for the old definition no longer applies.
	EventToolChanged = "McpToolChanged"
)

// Events implements [axocoatl.EventDeclarer]: the classes of the module's
// events.
func (m *Module) Events() map[string]lattice.Class {
	return map[string]lattice.Class{
		EventServerConnected:    lattice.ClassTelemetry,
		EventServerDisconnected: lattice.ClassTelemetry,
		EventToolChanged:        lattice.ClassCoordination,
	}
}
