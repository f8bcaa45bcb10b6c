package a2aremote

import "github.com/axocoatl/axocoatl-go/lattice"

// EventAgentConnected: a remote A2A agent's card was read; its a2a__ tool
// now calls it. Payload: agent, tool, url (redacted), generation ("1.0" or
// "0.3"). Telemetry.
const EventAgentConnected = "A2AAgentConnected"

// EventAgentDisconnected: a remote A2A agent's card could not be read.
// Payload: agent, tool, url (redacted), error. Telemetry.
const EventAgentDisconnected = "A2AAgentDisconnected"

// Events implements [axocoatl.EventDeclarer]: both events only describe
// the module's state, so they are telemetry.
func (m *Module) Events() map[string]lattice.Class {
	return map[string]lattice.Class{EventAgentConnected: lattice.ClassTelemetry, EventAgentDisconnected: lattice.ClassTelemetry}
}
