package a2awire

import (
	"encoding/json"
	"errors"
	"testing"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
)

// Every code's 1.0 error travels both ways: a JSON-RPC error object read
// back (Err1) is the code's kind, and the ErrorInfo reason a REST error
// carries (AppendErrorInfo) names the same kind again (KindOfReason1), so
// that server and client agree on every code A2A 1.0 names. A code A2A
// does not name is an internal error.
func TestCodesRoundTrip(t *testing.T) {
	for code, kind := range kinds1 {
		e := &Error{Code: code, Message: CodeText03(code), Detail: "why"}
		var obj struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
				Domain string `json:"domain"`
			} `json:"data"`
		}
		if err := json.Unmarshal(e.AppendJSON1(nil), &obj); err != nil {
			t.Fatalf("%d: AppendJSON1 is not JSON: %v", code, err)
		}
		if obj.Code != code || obj.Message != kind.Error()+": why" || len(obj.Data) != 1 ||
			obj.Data[0].Type != ErrorInfoType || obj.Data[0].Domain != a2a1.ProtocolDomain {
			t.Errorf("%d: 1.0 error object %+v", code, obj)
		}
		back, ok := KindOfReason1(obj.Data[0].Reason)
		if !ok || back != kind {
			t.Errorf("%d: reason %q names %v, want %v", code, obj.Data[0].Reason, back, kind)
		}
		if err := (&Error{Code: obj.Code, Message: obj.Message}).Err1(); !errors.Is(err, kind) || err.Error() != obj.Message {
			t.Errorf("%d: Err1 = %v, want %v with the message", code, err, kind)
		}
	}
	if err := (&Error{Code: -1}).Err1(); !errors.Is(err, a2a1.ErrInternalError) || Reason1(-1) != "INTERNAL_ERROR" {
		t.Errorf("an unknown code: %v, reason %q", err, Reason1(-1))
	}
	var obj map[string]any
	if err := json.Unmarshal((&Error{Code: CodeTaskNotFound, Message: "m", Detail: "d"}).AppendJSON03(nil), &obj); err != nil ||
		obj["message"] != "m" || obj["data"].(map[string]any)["error"] != "d" {
		t.Errorf("0.3 error object %v, %v", obj, err)
	}
}
