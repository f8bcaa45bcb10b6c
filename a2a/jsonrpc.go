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

	a2a03 "github.com/a2aproject/a2a-go/a2a"
)

// JSON-RPC method names of A2A 0.3.
const (
	methodMessageSend      = "message/send"
	methodMessageStream    = "message/stream"
	methodTasksGet         = "tasks/get"
	methodTasksCancel      = "tasks/cancel"
	methodTasksResubscribe = "tasks/resubscribe"
	methodPushConfigGet    = "tasks/pushNotificationConfig/get"
	methodPushConfigSet    = "tasks/pushNotificationConfig/set"
	methodPushConfigList   = "tasks/pushNotificationConfig/list"
	methodPushConfigDelete = "tasks/pushNotificationConfig/delete"
	methodExtendedCard     = "agent/getAuthenticatedExtendedCard"
)

// JSON-RPC and A2A error codes.
const (
	codeParseError             = -32700
	codeInvalidRequest         = -32600
	codeMethodNotFound         = -32601
	codeInvalidParams          = -32602
	codeInternalError          = -32603
	codeServerError            = -32000
	codeTaskNotFound           = -32001
	codeTaskNotCancelable      = -32002
	codePushNotSupported       = -32003
	codeUnsupportedOperation   = -32004
	codeUnsupportedContentType = -32005
	codeInvalidAgentResponse   = -32006
	codeExtendedCardNotConfig  = -32007
	codeExtensionRequired      = -32008 // A2A 1.0
	codeVersionNotSupported    = -32009 // A2A 1.0
)

// Limits that keep every SSE data line under the 64 KiB a default
// bufio.Scanner (a2a-go's client) accepts: JSON escaping can grow text up to
// six times, so chunks of 8 KiB stay under 48 KiB plus the envelope.
const (
	maxChunk     = 8 << 10
	maxErrorText = 8 << 10
)

// rpcError is a JSON-RPC error. Detail, when set, travels as
// error.data.error: a2a-go's client folds it into the error it returns.
type rpcError struct {
	Code    int
	Message string
	Detail  string
}

func (e *rpcError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%d %s: %s", e.Code, e.Message, e.Detail)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Message)
}

// rpcErr builds an error whose message is the standard one for code.
func rpcErr(code int, format string, args ...any) *rpcError {
	e := &rpcError{Code: code, Message: codeMessage(code)}
	if format != "" {
		e.Detail = cut(fmt.Sprintf(format, args...), maxErrorText)
	}
	return e
}

// codeMessage is the message a2a-go uses for each code, so that its
// client's errors.Is checks work on our errors.
func codeMessage(code int) string {
	switch code {
	case codeParseError:
		return a2a03.ErrParseError.Error()
	case codeInvalidRequest:
		return a2a03.ErrInvalidRequest.Error()
	case codeMethodNotFound:
		return a2a03.ErrMethodNotFound.Error()
	case codeInvalidParams:
		return a2a03.ErrInvalidParams.Error()
	case codeServerError:
		return a2a03.ErrServerError.Error()
	case codeTaskNotFound:
		return a2a03.ErrTaskNotFound.Error()
	case codeTaskNotCancelable:
		return a2a03.ErrTaskNotCancelable.Error()
	case codePushNotSupported:
		return a2a03.ErrPushNotificationNotSupported.Error()
	case codeUnsupportedOperation:
		return a2a03.ErrUnsupportedOperation.Error()
	case codeUnsupportedContentType:
		return a2a03.ErrUnsupportedContentType.Error()
	case codeInvalidAgentResponse:
		return a2a03.ErrInvalidAgentResponse.Error()
	case codeExtendedCardNotConfig:
		return a2a03.ErrAuthenticatedExtendedCardNotConfigured.Error()
	}
	return a2a03.ErrInternalError.Error()
}

// appendJSON appends e as a JSON-RPC error object of generation g. In 0.3
// the detail travels as error.data.error (a2a-go v0.3's client folds it into
// its error); in 1.0 error.data is a list of google.rpc details, and both
// 1.0 SDKs drop it, so the detail goes into the message and data carries
// only the ErrorInfo with the 1.0 reason.
func (e *rpcError) appendJSON(b []byte, g generation) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	if g == gen10 {
		b = appendString(b, e.v1Message())
		b = append(b, `,"data":[`...)
		b = appendErrorInfo(b, reasonOf(e.Code))
		b = append(b, ']')
		return append(b, '}')
	}
	b = appendString(b, e.Message)
	if e.Detail != "" {
		b = append(b, `,"data":{"error":`...)
		b = appendString(b, e.Detail)
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
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
			return rpcRequest{ID: nullID}, rpcErr(codeParseError, "body is not valid JSON")
		}
		return rpcRequest{ID: nullID}, rpcErr(codeInvalidRequest, "batch requests are not supported")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || len(trimmed) == 0 {
			return rpcRequest{ID: nullID}, rpcErr(codeParseError, "body is not valid JSON: %v", err)
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
		return rpcRequest{ID: id}, rpcErr(codeInvalidRequest, "not a JSON-RPC request object: %v", err)
	}
	if len(req.ID) == 0 {
		req.ID = nullID
		return req, rpcErr(codeInvalidRequest, "id is required: A2A has no notifications")
	}
	id, ok := usableID(req.ID)
	if !ok {
		req.ID = nullID
		return req, rpcErr(codeInvalidRequest, "id must be a string or a number")
	}
	req.ID = id
	if req.JSONRPC != "2.0" {
		return req, rpcErr(codeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	if req.Method == "" {
		return req, rpcErr(codeInvalidRequest, "method is required")
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
		return rpcErr(codeInvalidParams, "params are required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return rpcErr(codeInvalidParams, "%v", err)
	}
	return nil
}

// serveJSONRPC answers POST /a2a (agentID "") and POST /a2a/agents/{id}
// (agentID the {id}) in the generation the A2A-Version header names: none
// (or 0.3) is A2A 0.3, 1.0 is A2A 1.0, anything else -32009. Every answer is
// HTTP 200; failures are JSON-RPC errors, as A2A clients require. The
// Engine's guard has checked the caller.
func (h *Handler) serveJSONRPC(w http.ResponseWriter, r *http.Request, agentID string) {
	g, verr := negotiate(r.Header.Get(HeaderVersion))
	body, err := h.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRPCError(w, nullID, rpcErr(codeInvalidRequest, "request body exceeds %d bytes", tooBig.Limit), g)
			return
		}
		writeRPCError(w, nullID, rpcErr(codeParseError, "reading body: %v", err), g)
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
		if _, err := h.eng.Agent(pathAgent); err != nil {
			h.answer(w, req, nil, rpcErr(codeInvalidParams, "no agent %q at this endpoint", pathAgent))
			return
		}
	}
	if g == gen10 {
		h.serveV1(w, r, req, pathAgent)
		return
	}

	var result any
	switch req.Method {
	case methodMessageSend:
		result, rerr = h.messageSend(req.Params, pathAgent)
	case methodMessageStream:
		h.messageStream(w, r, req, pathAgent)
		return
	case methodTasksGet:
		result, rerr = h.tasksGet(req.Params, pathAgent)
	case methodTasksCancel:
		result, rerr = h.tasksCancel(req.Params, pathAgent)
	case methodTasksResubscribe:
		h.tasksResubscribe(w, r, req, pathAgent)
		return
	case methodPushConfigGet, methodPushConfigSet, methodPushConfigList, methodPushConfigDelete:
		rerr = rpcErr(codePushNotSupported, "")
	case methodExtendedCard:
		rerr = rpcErr(codeExtendedCardNotConfig, "")
	default:
		if isV1Method(req.Method) {
			rerr = rpcErr(codeMethodNotFound, "%q is an A2A 1.0 method: send the header %s: 1.0 (without it this endpoint speaks A2A 0.3)", req.Method, HeaderVersion)
			break
		}
		rerr = rpcErr(codeMethodNotFound, "unknown method %q", req.Method)
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
		writeRPCError(w, req.ID, rpcErr(codeInternalError, "encoding the result failed"), req.gen)
		return
	}
	writeJSON(w, b)
}

func isStreamMethod(m string) bool {
	switch m {
	case methodMessageStream, methodTasksResubscribe, methodV1MessageStream, methodV1Subscribe:
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
		b = rerr.appendJSON(b, g)
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
