package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// codePageOverBound marks the error answer that pageBound puts in place of
// a tools/list page over max_tools; its Data is the page's tool count.
const codePageOverBound = -32097

// pageBound refuses a stdio server's tools/list page of more than
// maxTools tools before the SDK decodes it: decoded, 100,000 tools cost
// some 300 MiB of heap for the moment it takes to count them, where their
// bytes (at most the 16 MiB message bound) are counted here without
// decoding. listTools turns the error answer into max_tools's
// ErrOverBound, as for a listing that passes the bound over several pages.
type pageBound struct {
	maxTools int
	lists    map[jsonrpc.ID]bool // tools/list requests awaiting their answer
}

// sent notes msg if it is a tools/list request. The SDK writes from many
// goroutines, reads from one: the caller serialises.
func (p *pageBound) sent(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.ID.IsValid() {
		p.lists[req.ID] = true
	}
}

// received returns msg, or in place of an over-bound tools/list page an
// error answer to the same request.
func (p *pageBound) received(msg jsonrpc.Message) jsonrpc.Message {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !p.lists[resp.ID] {
		return msg
	}
	delete(p.lists, resp.ID)
	if resp.Error != nil {
		return msg
	}
	if n := countTools(resp.Result); n > p.maxTools {
		return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{
			Code: codePageOverBound, Message: "tools/list page over max_tools",
			Data: json.RawMessage(strconv.Itoa(n)),
		}}
	}
	return msg
}

// pageOverBound reports the tool count of a page pageBound refused.
func pageOverBound(err error) (n int, ok bool) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != codePageOverBound {
		return 0, false
	}
	n, convErr := strconv.Atoi(string(we.Data))
	return n, convErr == nil
}

// countTools counts the elements of a tools/list result's "tools" array
// without decoding them (one reused buffer for the largest element); 0 when
// the result has no such array (the SDK then reports what is wrong). Of a
// "tools" written twice the last counts, as the decoder takes it: a first
// one of one tool must not let the real page through uncounted.
func countTools(result json.RawMessage) int {
	dec := json.NewDecoder(bytes.NewReader(result))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	var skip json.RawMessage // RawMessage's UnmarshalJSON reuses its buffer
	n := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0
		}
		if key != "tools" {
			if dec.Decode(&skip) != nil {
				return 0
			}
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return 0
		}
		n = 0
		for dec.More() {
			if dec.Decode(&skip) != nil {
				return 0
			}
			n++
		}
		if _, err := dec.Token(); err != nil { // the array's ']'
			return 0
		}
	}
	return n
}

// Read and Write pass messages through pageBound.
func (c *cmdConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	c.pagesMu.Lock()
	defer c.pagesMu.Unlock()
	return c.pages.received(msg), nil
}

func (c *cmdConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.pagesMu.Lock()
	c.pages.sent(msg)
	c.pagesMu.Unlock()
	return c.Connection.Write(ctx, msg)
}
