package a2a

import (
	"strings"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// HeaderVersion is the request header an A2A 1.0 client names its protocol
// version in. Without it a request is A2A 0.3, as the 1.0 specification says.
const HeaderVersion = "A2A-Version"

// ProtocolVersion1 is the A2A 1.0 version the card advertises in
// supportedInterfaces and clients send in [HeaderVersion].
const ProtocolVersion1 = "1.0"

// SupportedVersions lists the A2A versions the standard endpoints speak,
// newest first.
var SupportedVersions = []string{ProtocolVersion1, "0.3"}

// generation is the A2A protocol generation a request is answered in.
type generation uint8

const (
	gen03 generation = iota // A2A 0.3: slash methods, kind discriminators
	gen10                   // A2A 1.0: ProtoJSON, PascalCase methods
)

// negotiate maps an A2A-Version header to a generation: none (or 0.3.x) is
// 0.3, 1.0 (or 1.0.x) is 1.0. Any other value is -32009, answered in the
// 1.0 shape, whose message names the supported versions because the 1.0
// SDKs drop error.data.
func negotiate(header string) (generation, *rpcError) {
	v := strings.TrimSpace(header)
	switch {
	case v == "" || v == "0.3" || strings.HasPrefix(v, "0.3."):
		return gen03, nil
	case v == "1.0" || v == "1" || strings.HasPrefix(v, "1.0."):
		return gen10, nil
	}
	return gen10, rpcErr(a2awire.CodeVersionNotSupported, "%s %q; supported versions: %s (no header means 0.3)",
		HeaderVersion, cut(v, 32), strings.Join(SupportedVersions, ", "))
}
