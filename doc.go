// Package axocoatl is the spine of an agent runtime that speaks open
// protocols: a host constructs an [Engine], registers agents on it, attaches
// the protocol modules it wants and mounts their handlers ([http.Handler]) on its
// own mux. Everything that happens is an event on the Engine's lattice.
//
// # The house
//
// An [Engine] holds four things: agents (an [agent.Spec] with its
// [agent.Model], added with [Engine.AddAgent], or another daemon's agent
// added with [Engine.AddRemoteAgent]), tools ([Tool], registered with
// [Engine.RegisterTool]), the interceptor chain around tool calls
// ([Engine.Intercept]) and the lattice, its event bus ([Engine.Bus], a
// [lattice.Bus]). Every protocol is an optional [Module], started by
// [Engine.Use] and stopped by [Engine.Close]. A module plays one or more of
// four roles:
//
//   - A door lets work in. The HTTP API, A2A (package a2a), MCP over stdio
//     and HTTP (package mcpserver), another daemon of the cluster (package
//     cluster) and a plain Go call all end in [Engine.ExecuteRequest] (or
//     its shorthand [Engine.Execute]), which runs the agent loop
//     ([agent.Run]) and publishes AgentActivated, then TaskCompleted or
//     AgentFailed. A door names itself in [Request.Source].
//   - A gate sits on tool calls: an [Interceptor] registered with
//     [Engine.Intercept] may pause a call (package approval waits for a
//     human), change it or refuse it. Every call the loop makes goes
//     through [Engine.CallTool], and so through every gate.
//   - A tool source registers tools: package mcpclient registers each MCP
//     server's tools as mcp__<server>__<tool>, package a2aremote each remote
//     A2A agent as a2a__<name>. An agent's allow-list ([agent.Spec].Tools)
//     chooses among them by glob.
//   - An observer subscribes to the lattice with a [lattice.Filter]: signed
//     webhooks (package egress), the event stream, metrics.
//
// Modules never import each other. They meet through the Engine (tools,
// interceptors, [ToolCall] metadata, [UserPrompter] for questions to the
// caller) and through events. Dependencies point one way: lattice ← agent ←
// axocoatl ← the modules ← config ← the example binaries.
//
// # HTTP
//
// A module that serves HTTP is an [http.Handler] that answers 503 until
// it is started and works under any path prefix the host mounts it at.
// Every door is guarded by the Engine's one guard, configured by
// [HTTPOptions] (Host names, API token, browser Origins, body and write
// bounds) and applied with [Engine.GuardHTTP] or [Engine.CheckHTTP], so the
// same rules hold on every door.
//
// # Bounds
//
// Everything a client or a peer can make the process spend has a bound:
// tasks in flight ([Options].MaxRuns, beyond which a door gets [ErrBusy]),
// a run's model rounds, tool calls and time ([agent.Spec]), and each
// module's own bytes, items and time limits in its Config. Reaching one
// gives a clear error, event or log line, never unbounded growth.
//
// Package config reads the daemon's YAML file into an Engine with its
// modules, for hosts that want the daemon's behaviour without the daemon.
package axocoatl
