package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The JSON-RPC methods of A2A 1.0.
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodListTasks            = "ListTasks"
	MethodCancelTask           = "CancelTask"
	MethodSubscribeToTask      = "SubscribeToTask"
	MethodCreatePushConfig     = "CreateTaskPushNotificationConfig"
	MethodGetPushConfig        = "GetTaskPushNotificationConfig"
	MethodListPushConfigs      = "ListTaskPushNotificationConfigs"
	MethodDeletePushConfig     = "DeleteTaskPushNotificationConfig"
	MethodGetExtendedAgentCard = "GetExtendedAgentCard"
)

// The JSON-RPC error codes: JSON-RPC 2.0's own, then A2A's (−32001…−32009).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603

	CodeTaskNotFound                   = -32001
	CodeTaskNotCancelable              = -32002
	CodePushNotificationNotSupported   = -32003
	CodeUnsupportedOperation           = -32004
	CodeContentTypeNotSupported        = -32005
	CodeInvalidAgentResponse           = -32006
	CodeExtendedAgentCardNotConfigured = -32007
	CodeExtensionSupportRequired       = -32008
	CodeVersionNotSupported            = -32009
)

// reasons are the google.rpc.ErrorInfo reasons of the A2A codes.
var reasons = map[int]string{
	CodeTaskNotFound: "TASK_NOT_FOUND", CodeTaskNotCancelable: "TASK_NOT_CANCELABLE",
	CodePushNotificationNotSupported: "PUSH_NOTIFICATION_NOT_SUPPORTED", CodeUnsupportedOperation: "UNSUPPORTED_OPERATION",
	CodeContentTypeNotSupported: "CONTENT_TYPE_NOT_SUPPORTED", CodeInvalidAgentResponse: "INVALID_AGENT_RESPONSE",
	CodeExtendedAgentCardNotConfigured: "EXTENDED_AGENT_CARD_NOT_CONFIGURED", CodeExtensionSupportRequired: "EXTENSION_SUPPORT_REQUIRED",
	CodeVersionNotSupported: "VERSION_NOT_SUPPORTED",
}

// Error is an A2A (or JSON-RPC) error: a code, its public message, and
// optional detail objects (each with an "@type").
type Error struct {
	Code    int
	Message string
	// Reason, when set, is the machine-readable reason of a Stackbone
	// error (its apierror code), sent as a google.rpc.ErrorInfo.
	Reason string
	// Metadata goes with the ErrorInfo (e.g. the task id).
	Metadata map[string]string
	// Details are further detail objects.
	Details []any
	// HTTPStatus, when set, is the HTTP status of the error on the
	// HTTP+JSON binding (else the code's, as the spec maps it).
	HTTPStatus int
}

func (e *Error) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

// Errorf is an error of code with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// TaskNotFound is the error of a task id the caller cannot see.
func TaskNotFound(id string) *Error {
	return &Error{Code: CodeTaskNotFound, Message: fmt.Sprintf("Task %q was not found.", id), Metadata: map[string]string{"taskId": id}}
}

// RPCError is the JSON-RPC error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []any  `json:"data,omitempty"`
}

// Object is e as a JSON-RPC error object, its reason as a
// google.rpc.ErrorInfo detail.
func (e *Error) Object() *RPCError {
	o := &RPCError{Code: e.Code, Message: e.Message}
	o.Data = e.details()
	return o
}

// details are e's detail objects: its ErrorInfo (domain a2a-protocol.org
// for A2A's reasons, stackbone for Stackbone's error codes), then Details.
func (e *Error) details() []any {
	var out []any
	reason, domain := e.Reason, "stackbone"
	if r, ok := reasons[e.Code]; ok && reason == "" {
		reason, domain = r, "a2a-protocol.org"
	}
	if reason != "" {
		info := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": domain}
		if len(e.Metadata) > 0 {
			info["metadata"] = e.Metadata
		}
		out = append(out, info)
	}
	return append(out, e.Details...)
}

// Status is the HTTP status of e on the HTTP+JSON binding (the spec's
// mapping of each code).
func (e *Error) Status() int {
	if e.HTTPStatus != 0 {
		return e.HTTPStatus
	}
	switch e.Code {
	case CodeTaskNotFound, CodeMethodNotFound:
		return 404
	case CodeInvalidAgentResponse, CodeInternal:
		return 500
	}
	return 400
}

// grpcStatus names HTTP statuses as google.rpc.Status does.
var grpcStatus = map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}

// StatusBody is e as the HTTP+JSON binding's error body: a
// google.rpc.Status under "error".
func (e *Error) StatusBody() map[string]any {
	st := e.Status()
	name := grpcStatus[st]
	if name == "" {
		name = "UNKNOWN"
	}
	if e.Code == CodeTaskNotCancelable || e.Code == CodeUnsupportedOperation || e.Code == CodePushNotificationNotSupported ||
		e.Code == CodeVersionNotSupported || e.Code == CodeExtendedAgentCardNotConfigured || e.Code == CodeExtensionSupportRequired {
		name = "FAILED_PRECONDITION"
	}
	body := map[string]any{"code": st, "status": name, "message": e.Message}
	if d := e.details(); len(d) > 0 {
		body["details"] = d
	}
	return map[string]any{"error": body}
}

// Request is a JSON-RPC 2.0 request.
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC 2.0 response: Result or Error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// Result is the response to request id with result.
func Result(id json.RawMessage, result any) Response {
	return Response{JSONRPC: "2.0", ID: orNull(id), Result: result}
}

// ErrorResponse is the response to request id with e.
func ErrorResponse(id json.RawMessage, e *Error) Response {
	return Response{JSONRPC: "2.0", ID: orNull(id), Error: e.Object()}
}

func orNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// ParseRequest decodes a JSON-RPC request: a body that is not JSON is
// −32700, one that is not a request object (a batch, no method, a bad id
// or version) −32600. The id is returned whenever it could be read.
func ParseRequest(body []byte) (Request, *Error) {
	var req Request
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) {
		return req, Errorf(CodeParseError, "Invalid JSON payload.")
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return req, Errorf(CodeInvalidRequest, "The request must be one JSON-RPC request object (batches are not served).")
	}
	if err := json.Unmarshal(trimmed, &req); err != nil {
		return Request{}, Errorf(CodeInvalidRequest, "Request payload validation error: %v.", err)
	}
	if len(req.ID) > 0 {
		switch req.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
		default:
			req.ID = nil
			return req, Errorf(CodeInvalidRequest, "A JSON-RPC id is a string, a number or null.")
		}
	}
	if req.JSONRPC != "2.0" {
		return req, Errorf(CodeInvalidRequest, `The request's "jsonrpc" must be "2.0".`)
	}
	if req.Method == "" {
		return req, Errorf(CodeInvalidRequest, "The request names no method.")
	}
	return req, nil
}

// DecodeParams decodes a request's params into v (absent params decode as
// an empty object); invalid params are −32602.
func DecodeParams(params json.RawMessage, v any) *Error {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	if err := json.Unmarshal(params, v); err != nil {
		return Errorf(CodeInvalidParams, "Invalid parameters: %v.", err)
	}
	return nil
}
