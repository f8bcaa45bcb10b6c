//go:build !linux

package httpguard

import "net"

// unsent cannot be known here: idle connections are left to IdleTimeout.
func unsent(net.Conn) int { return -1 }
