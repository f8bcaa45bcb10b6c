package a2aremote_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Stop leaves no connection open to a remote: idle keep-alive connections
// (two goroutines each in net/http) belong to the module and are closed
// with it, not left in a transport shared with the rest of the process
// until its idle timeout.
func TestStopClosesIdleConnections(t *testing.T) {
	p := newPeer(t, answer)
	mux := http.NewServeMux()
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(v1Executor{p})))
	serveCard1(mux, srv.URL, "Planner", true)
	s := newSetup(t, "hello", nil, remoteCfg(srv.URL))
	s.ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.eng.Execute(ctx, "caller", "go"); err != nil {
		t.Fatal(err)
	}
	if open.Load() == 0 {
		t.Fatal("no connection to the remote after a call: the test cannot tell")
	}
	if err := s.mod.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n > 0 {
		t.Fatalf("%d connections to the remote still open after Stop", n)
	}
}
