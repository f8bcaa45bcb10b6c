package mcpclient

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxToolNameLen is the longest qualified name: most model APIs reject
// longer tool names.
const MaxToolNameLen = 64

// hashLen is the hex length of the suffix that keeps cut names distinct.
const hashLen = 8

// QualifiedName is the Engine name of tool on server: mcp__<server>__<tool>,
// with characters outside [A-Za-z0-9_-] replaced by '_'. A name longer than
// 64 characters is cut and ends in '_' and 8 hex digits of a SHA-256 over
// the original server and tool names, so it is stable across restarts and
// distinct for tools that share a long prefix.
func QualifiedName(server, tool string) string {
	name := "mcp__" + sanitize(server) + "__" + sanitize(tool)
	if len(name) <= MaxToolNameLen {
		return name
	}
	return hashedName(name, server, tool)
}

// hashedName cuts name and appends the stable hash suffix. It is also used
// to separate two tools whose sanitized names collide.
func hashedName(name, server, tool string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:])[:hashLen]
	if keep := MaxToolNameLen - len(suffix); len(name) > keep {
		name = name[:keep]
	}
	return name + suffix
}

func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			b.WriteByte(c)
		} else {
			// Bytewise: a multi-byte rune becomes several '_', which keeps
			// the mapping simple and the length bounded by the input.
			b.WriteByte('_')
		}
	}
	return b.String()
}

// qualifyAll names a server's tool list. Two bare names that sanitize alike
// (a.b and a_b) would collide: the one that needed no sanitizing keeps the
// plain form and the others get the hash suffix, so the common case never
// changes name and the result does not depend on list order. Names cut for
// length already carry a hash of their bare name and cannot collide. It
// returns qualified → bare.
func qualifyAll(server string, bare []string) map[string]string {
	out := make(map[string]string, len(bare))
	for _, b := range bare {
		q := QualifiedName(server, b)
		if len(bare) > 1 && sanitize(b) != b {
			for _, other := range bare {
				if other != b && QualifiedName(server, other) == q {
					q = hashedName(q, server, b)
					break
				}
			}
		}
		out[q] = b
	}
	return out
}
