package mcpclient

import "github.com/axocoatl/axocoatl-go/internal/textsafe"

// cleanDescription removes from a tool description what a model reads but
// a human reviewing the tool does not see (see [textsafe.Clean]).
func cleanDescription(s string) string { return textsafe.Clean(s) }
