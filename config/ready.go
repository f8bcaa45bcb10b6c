package config

// MCPReadyChan is closed when every MCP server has finished its first
// connect attempt (as MCPReady reports); closed already when there are
// none. After Close it may never be closed: wait on it with a context.
func (rt *Runtime) MCPReadyChan() <-chan struct{} {
	if rt.mcpReady == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return rt.mcpReady
}
