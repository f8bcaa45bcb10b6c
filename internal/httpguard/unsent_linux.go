package httpguard

import (
	"net"
	"syscall"
	"unsafe"
)

// unsent is how many bytes written to conn its peer has not yet
// acknowledged (SIOCOUTQ), or -1 when that cannot be known.
func unsent(conn net.Conn) int {
	if t, ok := conn.(interface{ NetConn() net.Conn }); ok { // TLS
		conn = t.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = rc.Control(func(fd uintptr) {
		var v int32
		// SIOCOUTQ is TIOCOUTQ on Linux.
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&v))); errno == 0 {
			n = int(v)
		}
	})
	return n
}
