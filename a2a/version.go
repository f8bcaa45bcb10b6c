package a2a

import (
	"strings"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
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
	return gen10, rpcErr(codeVersionNotSupported, "%s %q; supported versions: %s (no header means 0.3)",
		HeaderVersion, cut(v, 32), strings.Join(SupportedVersions, ", "))
}

// v1Message is the error's 1.0 message: the standard text with the detail.
func (e *rpcError) v1Message() string {
	m := codeMessageV1(e.Code)
	if e.Detail != "" {
		m += ": " + e.Detail
	}
	return m
}

// codeMessageV1 is the message a2a-go/v2 uses for each code.
func codeMessageV1(code int) string {
	if err, ok := v1CodeErrors[code]; ok {
		return err.Error()
	}
	return a2a1.ErrInternalError.Error()
}

var v1CodeErrors = map[int]error{
	codeParseError:             a2a1.ErrParseError,
	codeInvalidRequest:         a2a1.ErrInvalidRequest,
	codeMethodNotFound:         a2a1.ErrMethodNotFound,
	codeInvalidParams:          a2a1.ErrInvalidParams,
	codeInternalError:          a2a1.ErrInternalError,
	codeServerError:            a2a1.ErrServerError,
	codeTaskNotFound:           a2a1.ErrTaskNotFound,
	codeTaskNotCancelable:      a2a1.ErrTaskNotCancelable,
	codePushNotSupported:       a2a1.ErrPushNotificationNotSupported,
	codeUnsupportedOperation:   a2a1.ErrUnsupportedOperation,
	codeUnsupportedContentType: a2a1.ErrUnsupportedContentType,
	codeInvalidAgentResponse:   a2a1.ErrInvalidAgentResponse,
	codeExtendedCardNotConfig:  a2a1.ErrExtendedCardNotConfigured,
	codeExtensionRequired:      a2a1.ErrExtensionSupportRequired,
	codeVersionNotSupported:    a2a1.ErrVersionNotSupported,
}

// reasonOf is the 1.0 ErrorInfo reason of a code: the REST binding's
// clients (a2a-go/v2, @a2a-js/sdk) type errors by it.
func reasonOf(code int) string {
	if err, ok := v1CodeErrors[code]; ok {
		return a2a1.ErrorReason(err)
	}
	return "INTERNAL_ERROR"
}

// errorInfoType and errorDomain make the google.rpc.ErrorInfo detail that
// carries the reason.
const (
	errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"
	errorDomain   = a2a1.ProtocolDomain
)

func appendErrorInfo(b []byte, reason string) []byte {
	b = append(b, `{"@type":"`+errorInfoType+`","reason":`...)
	b = appendString(b, reason)
	return append(b, `,"domain":"`+errorDomain+`"}`...)
}

// The JSON-RPC method names of A2A 1.0.
const (
	methodV1MessageSend     = "SendMessage"
	methodV1MessageStream   = "SendStreamingMessage"
	methodV1GetTask         = "GetTask"
	methodV1ListTasks       = "ListTasks"
	methodV1CancelTask      = "CancelTask"
	methodV1Subscribe       = "SubscribeToTask"
	methodV1PushGet         = "GetTaskPushNotificationConfig"
	methodV1PushCreate      = "CreateTaskPushNotificationConfig"
	methodV1PushList        = "ListTaskPushNotificationConfigs"
	methodV1PushDelete      = "DeleteTaskPushNotificationConfig"
	methodV1GetExtendedCard = "GetExtendedAgentCard"
)

func isV1Method(m string) bool {
	switch m {
	case methodV1MessageSend, methodV1MessageStream, methodV1GetTask, methodV1ListTasks, methodV1CancelTask,
		methodV1Subscribe, methodV1PushGet, methodV1PushCreate, methodV1PushList, methodV1PushDelete, methodV1GetExtendedCard:
		return true
	}
	return false
}

func isV03Method(m string) bool {
	switch m {
	case methodMessageSend, methodMessageStream, methodTasksGet, methodTasksCancel, methodTasksResubscribe,
		methodPushConfigGet, methodPushConfigSet, methodPushConfigList, methodPushConfigDelete, methodExtendedCard:
		return true
	}
	return false
}

// taskStates pairs each task state's 0.3 and 1.0 names, for both
// directions of the mapping.
var taskStates = [...]struct {
	v03 a2a03.TaskState
	v10 a2a1.TaskState
}{
	{a2a03.TaskStateSubmitted, a2a1.TaskStateSubmitted},
	{a2a03.TaskStateWorking, a2a1.TaskStateWorking},
	{a2a03.TaskStateCompleted, a2a1.TaskStateCompleted},
	{a2a03.TaskStateCanceled, a2a1.TaskStateCanceled},
	{a2a03.TaskStateFailed, a2a1.TaskStateFailed},
	{a2a03.TaskStateRejected, a2a1.TaskStateRejected},
	{a2a03.TaskStateInputRequired, a2a1.TaskStateInputRequired},
	{a2a03.TaskStateAuthRequired, a2a1.TaskStateAuthRequired},
}

// stateV1 maps a task state to its 1.0 name.
func stateV1(s a2a03.TaskState) a2a1.TaskState {
	for _, p := range taskStates {
		if p.v03 == s {
			return p.v10
		}
	}
	return a2a1.TaskStateUnspecified
}
