package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// APIError is an error answer of an upstream: a non-2xx status with its
// error envelope, or (Status 0) an error event inside a 200 stream.
type APIError struct {
	Status  int
	Message string
	Header  http.Header
	// RequestID is the upstream's id of the request (its request-id or
	// x-request-id header), for the logs: a provider's support asks for it.
	RequestID string
}

func (e *APIError) Error() string {
	msg := e.Message
	if e.Status != 0 {
		msg = http.StatusText(e.Status) + ": " + msg
	}
	if e.RequestID != "" {
		msg += " (request id " + e.RequestID + ")"
	}
	return msg
}

// StatusOf recognises an *APIError for MapError.
func StatusOf(err error) (int, string, http.Header, bool) {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status, ae.Message, ae.Header, true
	}
	return 0, "", nil, false
}

// ReadAPIError reads a non-2xx answer: the message of its error envelope
// ({"error": {"message": …}} as OpenAI and Anthropic send it, or
// {"error": "…"}), else the status text.
func ReadAPIError(resp *http.Response) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	msg := ""
	if json.Unmarshal(data, &env) == nil {
		msg = ErrorMessage(env.Error)
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{Status: resp.StatusCode, Message: msg, Header: resp.Header, RequestID: RequestID(resp.Header)}
}

// RequestID is the upstream's id of a request, from its answer's headers
// (Anthropic's request-id, OpenAI's x-request-id); "" when there is none.
func RequestID(h http.Header) string {
	if id := h.Get("Request-Id"); id != "" {
		return id
	}
	return h.Get("X-Request-Id")
}

// ErrorMessage returns the message of an "error" value: an object's
// "message" or a bare string; "" when there is none.
func ErrorMessage(raw json.RawMessage) string {
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Message
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// StreamError is the failure an error event inside a 200 stream reports,
// from its "error" value and the upstream's request id.
func StreamError(raw json.RawMessage, requestID string) error {
	msg := ErrorMessage(raw)
	if msg == "" && string(raw) != "null" {
		msg = string(raw)
	}
	return &APIError{Message: "received error while streaming: " + msg, RequestID: requestID}
}

// mergeBody sets extra's fields (a JSON object: modelSettings.providerOptions
// for this provider) on an encoded request body, replacing fields it already
// has.
func mergeBody(body, extra []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(extra, &fields); err != nil {
		return nil, fmt.Errorf("provider options: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	for k, v := range fields {
		m[k] = v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
