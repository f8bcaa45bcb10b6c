package main

// Wiring of the mcpclient module. OWNER: the mcpclient engineer replaces
// this file (see /work/notes/COORD.md, "daemon wiring pattern"): the
// section gets `MCPServers []mcpclient.ServerConfig `yaml:"mcp_servers"``
// and the module gets start (engine.Use) and doctor hooks.

// MCPClientSection is the mcpclient part of Config (inline).
type MCPClientSection struct{}

func mcpClientModule() module { return module{name: "mcpclient"} }
