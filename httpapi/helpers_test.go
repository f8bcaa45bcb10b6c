package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveAPI starts an Engine with the echo agent "assistant" and the module
// built from cfg, served on a real listener at the root; cleanup stops
// both (the streams first, as a host does).
func serveAPI(tb testing.TB, cfg Config) (*httptest.Server, *Module, *axocoatl.Engine) {
	tb.Helper()
	e := axocoatl.New(axocoatl.Options{})
	m, err := New(cfg)
	if err == nil {
		err = e.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{})
	}
	if err == nil {
		err = e.Use(context.Background(), m)
	}
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(m)
	tb.Cleanup(func() {
		m.Shutdown(context.Background())
		srv.Close()
		_ = e.Close(context.Background())
	})
	return srv, m, e
}

// frame is any server frame.
type frame = testutil.Frame

func readFrame(t *testing.T, ctx context.Context, conn *websocket.Conn) frame {
	t.Helper()
	return testutil.ReadFrame(t, ctx, conn)
}

// dialStream opens GET /api/events of srv without keep-alive (no idle
// connection outlives the test).
func dialStream(t *testing.T, ctx context.Context, srv *httptest.Server) *websocket.Conn {
	t.Helper()
	u := "ws" + srv.URL[len("http"):] + "/api/events"
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}
