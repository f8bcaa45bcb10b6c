package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// Limits that keep every SSE data line under the 64 KiB a default
// bufio.Scanner (a2a-go's client) accepts: JSON escaping can grow text up to
// six times, so chunks of 8 KiB stay under 48 KiB plus the envelope.
const (
	maxChunk     = 8 << 10
	maxErrorText = 8 << 10
)

// rpcError is a JSON-RPC error. Detail, when set, travels as
// error.data.error in 0.3 (a2a-go's client folds it into the error it
// returns) and in the message in 1.0.
type rpcError = a2awire.Error

// rpcErr builds an error whose message is the standard (0.3) one for code,
// so that a2a-go's [errors.Is] checks work on it.
func rpcErr(code int, format string, args ...any) *rpcError {
	e := &rpcError{Code: code, Message: a2awire.CodeText03(code)}
	if format != "" {
		e.Detail = cut(fmt.Sprintf(format, args...), maxErrorText)
	}
	return e
}

// rpcRequest is a decoded JSON-RPC request envelope.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	ID      json.RawMessage `json:"id"`

	gen generation // from the A2A-Version header, not the body
}

var nullID = json.RawMessage("null")

// decodeRequest parses one JSON-RPC request. On failure it still returns the
// id to answer with (null when the id itself is unusable).
func decodeRequest(body []byte) (rpcRequest, *rpcError) {
	var req rpcRequest
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return rpcRequest{ID: nullID}, rpcErr(a2awire.CodeParseError, "body is not valid JSON")
		}
		return rpcRequest{ID: nullID}, rpcErr(a2awire.CodeInvalidRequest, "batch requests are not supported")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || len(trimmed) == 0 {
			return rpcRequest{ID: nullID}, rpcErr(a2awire.CodeParseError, "body is not valid JSON: %v", err)
		}
		// Valid JSON of the wrong shape (a method that is no string…): the
		// id, when it is usable, still tells the client which call failed.
		var idOnly struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &idOnly)
		id, ok := usableID(idOnly.ID)
		if !ok {
			id = nullID
		}
		return rpcRequest{ID: id}, rpcErr(a2awire.CodeInvalidRequest, "not a JSON-RPC request object: %v", err)
	}
	if len(req.ID) == 0 {
		req.ID = nullID
		return req, rpcErr(a2awire.CodeInvalidRequest, "id is required: A2A has no notifications")
	}
	id, ok := usableID(req.ID)
	if !ok {
		req.ID = nullID
		return req, rpcErr(a2awire.CodeInvalidRequest, "id must be a string or a number")
	}
	req.ID = id
	if req.JSONRPC != "2.0" {
		return req, rpcErr(a2awire.CodeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if req.Method == "" {
		return req, rpcErr(a2awire.CodeInvalidRequest, "method is required")
	}
	return req, nil
}

// usableID checks a request id (raw JSON, valid): a string, a number or
// null. A string with invalid UTF-8 is returned re-encoded, so that the id
// echoed is well-formed (invalid bytes become U+FFFD).
func usableID(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	switch c := raw[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9', bytes.Equal(raw, nullID):
	default:
		return nil, false
	}
	if raw[0] == '"' && !utf8.Valid(raw) {
		var s string
		_ = json.Unmarshal(raw, &s) // valid JSON, checked by the caller
		raw, _ = json.Marshal(s)
	}
	return raw, true
}

// decodeParams unmarshals params into v; params are required.
func decodeParams(raw json.RawMessage, v any) *rpcError {
	if len(raw) == 0 || bytes.Equal(raw, nullID) {
		return rpcErr(a2awire.CodeInvalidParams, "params are required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return rpcErr(a2awire.CodeInvalidParams, "%v", err)
	}
	return nil
}

// serveJSONRPC answers POST /a2a (agentID "") and POST /a2a/agents/{id}
// (agentID the {id}) in the generation the A2A-Version header names: none
// (or 0.3) is A2A 0.3, 1.0 is A2A 1.0, anything else -32009. Every answer is
// HTTP 200; failures are JSON-RPC errors, as A2A clients require. The
// Engine's guard has checked the caller.
func (h *Handler) serveJSONRPC(w http.ResponseWriter, r *http.Request, agentID string) {
	ctx := r.Context()
	g, verr := negotiate(r.Header.Get(HeaderVersion))
	body, err := h.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRPCError(w, nullID, rpcErr(a2awire.CodeInvalidRequest, "request body exceeds %d bytes", tooBig.Limit), g)
			return
		}
		writeRPCError(w, nullID, rpcErr(a2awire.CodeParseError, "reading body: %v", err), g)
		return
	}
	req, rerr := decodeRequest(body)
	req.gen = g
	if rerr == nil {
		rerr = verr
	}
	if rerr != nil {
		// answer: on a streaming method (a bad version, a bad envelope)
		// the error is an SSE event, which is all a stream reader reads.
		h.answer(w, req, nil, rerr)
		return
	}
	pathAgent := agentID
	if pathAgent != "" {
		if _, err := h.eng.AgentFor(ctx, pathAgent); err != nil {
			h.answer(w, req, nil, rpcErr(a2awire.CodeInvalidParams, "no agent %q at this endpoint", pathAgent))
			return
		}
	}
	if g == gen10 {
		h.serveV1(w, r, req, pathAgent)
		return
	}

	var result any
	switch req.Method {
	case a2awire.Method03Send:
		result, rerr = h.messageSend(r, req.Params, pathAgent)
	case a2awire.Method03Stream:
		h.messageStream(w, r, req, pathAgent)
		return
	case a2awire.Method03GetTask:
		result, rerr = h.tasksGet(ctx, req.Params, pathAgent)
	case a2awire.Method03ListTasks:
		result, rerr = h.tasksList(ctx, req.Params, pathAgent)
	case a2awire.Method03CancelTask:
		result, rerr = h.tasksCancel(ctx, req.Params, pathAgent)
	case a2awire.Method03Resubscribe:
		h.tasksResubscribe(w, r, req, pathAgent)
		return
	case a2awire.Method03PushConfigGet, a2awire.Method03PushConfigSet, a2awire.Method03PushConfigList, a2awire.Method03PushConfigDelete:
		result, rerr = h.servePush03(ctx, req.Method, req.Params, pathAgent)
	case a2awire.Method03ExtendedCard:
		rerr = rpcErr(a2awire.CodeExtendedCardNotConfig, "")
	default:
		if a2awire.IsMethod1(req.Method) {
			rerr = rpcErr(a2awire.CodeMethodNotFound, "%q is an A2A 1.0 method: send the header %s: 1.0 (without it this endpoint speaks A2A 0.3)", req.Method, HeaderVersion)
			break
		}
		rerr = rpcErr(a2awire.CodeMethodNotFound, "unknown method %q", req.Method)
	}
	h.answer(w, req, result, rerr)
}

// answer writes a result or an error. Streaming methods answer errors as a
// single SSE event, because SSE clients look for data lines only.
func (h *Handler) answer(w http.ResponseWriter, req rpcRequest, result any, rerr *rpcError) {
	if isStreamMethod(req.Method) {
		if rerr != nil {
			s := newSSE(w)
			s.send(req.ID, nil, rerr, req.gen, true)
			return
		}
	}
	if rerr != nil {
		writeRPCError(w, req.ID, rerr, req.gen)
		return
	}
	b, err := encodeResponse(req.ID, result, nil, req.gen)
	if err != nil {
		h.log.Error("a2a: encoding response", "method", req.Method, "error", err)
		writeRPCError(w, req.ID, rpcErr(a2awire.CodeInternalError, "encoding the result failed"), req.gen)
		return
	}
	writeJSON(w, b)
}

func isStreamMethod(m string) bool {
	switch m {
	case a2awire.Method03Stream, a2awire.Method03Resubscribe, a2awire.Method1Stream, a2awire.Method1Subscribe:
		return true
	}
	return false
}

// encodeResponse builds {"jsonrpc":"2.0","id":…,"result"|"error":…}, an
// error in the shape of generation g.
func encodeResponse(id json.RawMessage, result any, rerr *rpcError, g generation) ([]byte, error) {
	b := make([]byte, 0, 512)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	if rerr != nil {
		b = append(b, `,"error":`...)
		if g == gen10 {
			b = rerr.AppendJSON1(b)
		} else {
			b = rerr.AppendJSON03(b)
		}
	} else {
		res, err := json.Marshal(result)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"result":`...)
		b = append(b, res...)
	}
	return append(b, '}'), nil
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, rerr *rpcError, g generation) {
	b, _ := encodeResponse(id, nil, rerr, g) // errors always encode
	writeJSON(w, b)
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// cut shortens s to at most n bytes on a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
