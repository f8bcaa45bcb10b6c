package mcpclient

import (
	"syscall"
	"testing"
	"time"
)

// watchExits opens a pidfd for each live pid; wait then waits, within
// limit, until every one of those processes has ended, and reports those
// that have not.
func watchExits(t *testing.T, pids ...int) (wait func(limit time.Duration) (alive map[int]bool)) {
	t.Helper()
	const sysPidfdOpen = 434 // the same number on every Linux architecture
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(ep) })
	fds := map[int32]int{}
	for _, pid := range pids {
		fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
		if errno != 0 {
			t.Fatalf("pidfd_open(%d): %v", pid, errno)
		}
		t.Cleanup(func() { syscall.Close(int(fd)) })
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			t.Fatal(err)
		}
		fds[int32(fd)] = pid
	}
	return func(limit time.Duration) map[int]bool {
		alive := map[int]bool{}
		for _, pid := range fds {
			alive[pid] = true
		}
		deadline := time.Now().Add(limit)
		events := make([]syscall.EpollEvent, len(fds))
		for len(fds) > 0 && time.Now().Before(deadline) {
			n, err := syscall.EpollWait(ep, events, int(time.Until(deadline)/time.Millisecond)+1)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range events[:n] {
				delete(alive, fds[ev.Fd]) // a pidfd turns readable when its process ends
				_ = syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
				delete(fds, ev.Fd)
			}
		}
		return alive
	}
}
