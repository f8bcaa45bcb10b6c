package a2awire

import a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

// The JSON-RPC method names of A2A 0.3.
const (
	Method03Send        = "message/send"
	Method03Stream      = "message/stream"
	Method03GetTask     = "tasks/get"
	Method03CancelTask  = "tasks/cancel"
	Method03Resubscribe = "tasks/resubscribe"
	// Method03ListTasks is no method of the A2A 0.3.0 specification but
	// one a2a-go v0.3 (since 0.3.5) serves and its client calls, with
	// snake_case params.
	Method03ListTasks        = "tasks/list"
	Method03PushConfigGet    = "tasks/pushNotificationConfig/get"
	Method03PushConfigSet    = "tasks/pushNotificationConfig/set"
	Method03PushConfigList   = "tasks/pushNotificationConfig/list"
	Method03PushConfigDelete = "tasks/pushNotificationConfig/delete"
	Method03ExtendedCard     = "agent/getAuthenticatedExtendedCard"
)

// The JSON-RPC method names of A2A 1.0.
const (
	Method1Send         = "SendMessage"
	Method1Stream       = "SendStreamingMessage"
	Method1GetTask      = "GetTask"
	Method1ListTasks    = "ListTasks"
	Method1CancelTask   = "CancelTask"
	Method1Subscribe    = "SubscribeToTask"
	Method1PushGet      = "GetTaskPushNotificationConfig"
	Method1PushCreate   = "CreateTaskPushNotificationConfig"
	Method1PushList     = "ListTaskPushNotificationConfigs"
	Method1PushDelete   = "DeleteTaskPushNotificationConfig"
	Method1ExtendedCard = "GetExtendedAgentCard"
)

// IsMethod03 reports whether m is an A2A 0.3 method.
func IsMethod03(m string) bool {
	switch m {
	case Method03Send, Method03Stream, Method03GetTask, Method03CancelTask, Method03Resubscribe, Method03ListTasks,
		Method03PushConfigGet, Method03PushConfigSet, Method03PushConfigList, Method03PushConfigDelete, Method03ExtendedCard:
		return true
	}
	return false
}

// IsMethod1 reports whether m is an A2A 1.0 method.
func IsMethod1(m string) bool {
	switch m {
	case Method1Send, Method1Stream, Method1GetTask, Method1ListTasks, Method1CancelTask,
		Method1Subscribe, Method1PushGet, Method1PushCreate, Method1PushList, Method1PushDelete, Method1ExtendedCard:
		return true
	}
	return false
}

// Version03 is the protocol version of A2A 0.3 interfaces (a2av0.Version).
const Version03 a2a1.ProtocolVersion = "0.3"
