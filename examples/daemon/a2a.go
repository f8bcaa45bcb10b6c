package main

// Wiring of the a2a module. OWNER: the a2a engineer replaces this file
// (see /work/notes/COORD.md, "daemon wiring pattern"): public card routes,
// private task routes.

// A2ASection is the a2a part of Config (inline).
type A2ASection struct{}

func a2aModule() module { return module{name: "a2a"} }
