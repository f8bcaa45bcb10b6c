package a2aremote

import "github.com/axocoatl/axocoatl-go/lattice"

// The events the module publishes.
const (
	// EventAgentConnected / EventAgentDisconnected: a remote A2A agent's
	// card was read (its a2a__ tool now calls it) or could not be read.
	// Payload: agent, tool, url (redacted), generation ("1.0" or "0.3"),
	// error?. Telemetry.
	EventAgentConnected    = "A2AAgentConnected"
	EventAgentDisconnected = "A2AAgentDisconnected"
)

// Events implements [axocoatl.EventDeclarer]: the classes of the module's
// events.
func (m *Module) Events() map[string]lattice.Class {
	return map[string]lattice.Class{
		EventAgentConnected:    lattice.ClassTelemetry,
		EventAgentDisconnected: lattice.ClassTelemetry,
	}
}
