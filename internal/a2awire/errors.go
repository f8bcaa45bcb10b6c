// Package a2awire is the A2A wire both sides of the module speak: the
// JSON-RPC error codes of A2A 0.3 and 1.0 and their error values, the
// JSON-RPC error object, the method names of both generations, the
// conversions between the 0.3 types (github.com/a2aproject/a2a-go/a2a,
// imported as a2a03) and the 1.0 ones (github.com/a2aproject/a2a-go/v2/a2a,
// imported as a2a1), agent-card parsing and SSE framing. The server (a2a)
// and the client (a2aremote) use it; it is no part of the API.
package a2awire

import (
	"encoding/json"
	"fmt"
	"strconv"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
)

// The JSON-RPC and A2A error codes. 0.3 has those down to -32007; 1.0 adds
// -32008, -32009 and the two of authentication (which only its REST and
// gRPC bindings map to statuses, but a2a-go/v2's JSON-RPC reads too).
const (
	CodeParseError             = -32700
	CodeInvalidRequest         = -32600
	CodeMethodNotFound         = -32601
	CodeInvalidParams          = -32602
	CodeInternalError          = -32603
	CodeServerError            = -32000
	CodeTaskNotFound           = -32001
	CodeTaskNotCancelable      = -32002
	CodePushNotSupported       = -32003
	CodeUnsupportedOperation   = -32004
	CodeUnsupportedContentType = -32005
	CodeInvalidAgentResponse   = -32006
	CodeExtendedCardNotConfig  = -32007
	CodeExtensionRequired      = -32008 // A2A 1.0
	CodeVersionNotSupported    = -32009 // A2A 1.0
	CodeUnauthenticated        = -31401 // A2A 1.0
	CodeUnauthorized           = -31403 // A2A 1.0
)

// kinds1 are the A2A 1.0 errors of the codes, as a2a-go/v2's
// internal/jsonrpc maps them (and a2aclient with it).
var kinds1 = map[int]error{
	CodeParseError:             a2a1.ErrParseError,
	CodeInvalidRequest:         a2a1.ErrInvalidRequest,
	CodeMethodNotFound:         a2a1.ErrMethodNotFound,
	CodeInvalidParams:          a2a1.ErrInvalidParams,
	CodeInternalError:          a2a1.ErrInternalError,
	CodeServerError:            a2a1.ErrServerError,
	CodeTaskNotFound:           a2a1.ErrTaskNotFound,
	CodeTaskNotCancelable:      a2a1.ErrTaskNotCancelable,
	CodePushNotSupported:       a2a1.ErrPushNotificationNotSupported,
	CodeUnsupportedOperation:   a2a1.ErrUnsupportedOperation,
	CodeUnsupportedContentType: a2a1.ErrUnsupportedContentType,
	CodeInvalidAgentResponse:   a2a1.ErrInvalidAgentResponse,
	CodeExtendedCardNotConfig:  a2a1.ErrExtendedCardNotConfigured,
	CodeExtensionRequired:      a2a1.ErrExtensionSupportRequired,
	CodeVersionNotSupported:    a2a1.ErrVersionNotSupported,
	CodeUnauthenticated:        a2a1.ErrUnauthenticated,
	CodeUnauthorized:           a2a1.ErrUnauthorized,
}

// Kind1 is the A2A 1.0 error of code, a2a1.ErrInternalError for a code
// A2A does not name.
func Kind1(code int) error {
	if k, ok := kinds1[code]; ok {
		return k
	}
	return a2a1.ErrInternalError
}

// Reason1 is the google.rpc.ErrorInfo reason of code in A2A 1.0: the REST
// binding's clients (a2a-go/v2, @a2a-js/sdk) type errors by it.
func Reason1(code int) string {
	if k, ok := kinds1[code]; ok {
		return a2a1.ErrorReason(k)
	}
	return "INTERNAL_ERROR"
}

// KindOfReason1 is the A2A 1.0 error an ErrorInfo reason names, false for
// a reason A2A does not name.
func KindOfReason1(reason string) (error, bool) {
	for _, k := range kinds1 {
		if a2a1.ErrorReason(k) == reason {
			return k, true
		}
	}
	return nil, false
}

// CodeText03 is the message a2a-go (0.3) uses for code, so that its
// client's errors.Is checks work on errors with it.
func CodeText03(code int) string {
	switch code {
	case CodeParseError:
		return a2a03.ErrParseError.Error()
	case CodeInvalidRequest:
		return a2a03.ErrInvalidRequest.Error()
	case CodeMethodNotFound:
		return a2a03.ErrMethodNotFound.Error()
	case CodeInvalidParams:
		return a2a03.ErrInvalidParams.Error()
	case CodeServerError:
		return a2a03.ErrServerError.Error()
	case CodeTaskNotFound:
		return a2a03.ErrTaskNotFound.Error()
	case CodeTaskNotCancelable:
		return a2a03.ErrTaskNotCancelable.Error()
	case CodePushNotSupported:
		return a2a03.ErrPushNotificationNotSupported.Error()
	case CodeUnsupportedOperation:
		return a2a03.ErrUnsupportedOperation.Error()
	case CodeUnsupportedContentType:
		return a2a03.ErrUnsupportedContentType.Error()
	case CodeInvalidAgentResponse:
		return a2a03.ErrInvalidAgentResponse.Error()
	case CodeExtendedCardNotConfig:
		return a2a03.ErrAuthenticatedExtendedCardNotConfigured.Error()
	}
	return a2a03.ErrInternalError.Error()
}

// CodeText1 is the message a2a-go/v2 uses for code.
func CodeText1(code int) string { return Kind1(code).Error() }

// Error is a JSON-RPC error object. Code and Message are its fields on the
// wire; Detail is what a server adds to the standard message, sent where
// each generation's clients read it (AppendJSON03, AppendJSON1).
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Detail  string `json:"-"`
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%d %s: %s", e.Code, e.Message, e.Detail)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Message)
}

// Err1 is e as a2aclient returns it: an *a2a1.Error of the A2A error its
// code names (a2a1.ErrInternalError for another code), checkable with
// errors.Is (a2a1.ErrTaskNotFound, a2a1.ErrVersionNotSupported, …), whose
// text is the message (else the kind's). Its data (error details) is not
// read: a2aclient fails the whole answer when it is not the list A2A 1.0
// says, and nothing here reads it.
func (e *Error) Err1() error {
	kind := Kind1(e.Code)
	msg := e.Message
	if msg == "" {
		msg = kind.Error()
	}
	return a2a1.NewError(kind, msg)
}

// Text1 is e's 1.0 message: the standard text of its code with the
// detail (the 1.0 SDKs drop error.data, where 0.3 carries the detail).
func (e *Error) Text1() string {
	m := CodeText1(e.Code)
	if e.Detail != "" {
		m += ": " + e.Detail
	}
	return m
}

// AppendJSON03 appends e as an A2A 0.3 JSON-RPC error object: the detail
// travels as error.data.error (a2a-go v0.3's client folds it into its
// error).
func (e *Error) AppendJSON03(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = AppendString(b, e.Message)
	if e.Detail != "" {
		b = append(b, `,"data":{"error":`...)
		b = AppendString(b, e.Detail)
		b = append(b, '}')
	}
	return append(b, '}')
}

// AppendJSON1 appends e as an A2A 1.0 JSON-RPC error object: error.data
// is a list of google.rpc details, which both 1.0 SDKs drop, so the detail
// goes into the message and data carries only the ErrorInfo with the 1.0
// reason.
func (e *Error) AppendJSON1(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = AppendString(b, e.Text1())
	b = append(b, `,"data":[`...)
	b = AppendErrorInfo(b, e.Code)
	return append(b, ']', '}')
}

// ErrorInfoType is the @type of a google.rpc.ErrorInfo detail, the one
// that carries an A2A 1.0 error's reason (in domain a2a1.ProtocolDomain).
const ErrorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// AppendErrorInfo appends the ErrorInfo detail of code.
func AppendErrorInfo(b []byte, code int) []byte {
	b = append(b, `{"@type":"`+ErrorInfoType+`","reason":`...)
	b = AppendString(b, Reason1(code))
	return append(b, `,"domain":"`+a2a1.ProtocolDomain+`"}`...)
}

// AppendString appends s as a JSON string.
func AppendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
