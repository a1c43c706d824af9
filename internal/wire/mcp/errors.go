package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeSessionNotFound is the JSON-RPC code of a request on a session the
// server does not know (closed, expired, or another replica's), as the
// TypeScript SDK's servers send it.
const codeSessionNotFound = -32001

// rpcError is a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeRPCError answers a request with an HTTP status and a JSON-RPC error
// body (id null when the request's id is not known).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e := rpcError{JSONRPC: "2.0", ID: id}
	e.Error.Code, e.Error.Message = code, msg
	b, _ := json.Marshal(e)
	w.Header().Del("Content-Length")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("X-Content-Type-Options")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// needsSession reports whether a POST without a session id is a message
// other than initialize (which a session-based server answers with a 400),
// and its id. A body that is not JSON-RPC is left to the SDK.
func needsSession(r *http.Request) (json.RawMessage, bool) {
	if r.Body == nil {
		return nil, false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var msgs []msg
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &msgs) != nil {
			return nil, false
		}
	} else {
		var m msg
		if json.Unmarshal(trimmed, &m) != nil {
			return nil, false
		}
		msgs = []msg{m}
	}
	if len(msgs) == 0 {
		return nil, false
	}
	for _, m := range msgs {
		if m.Method == "initialize" {
			return nil, false
		}
	}
	if len(msgs) == 1 {
		return msgs[0].ID, true
	}
	return nil, true
}

// rpcErrors turns the SDK's plain-text HTTP errors (an unknown session, a
// malformed body, a wrong method) into JSON-RPC error bodies with the same
// status. Everything else passes through, streamed.
type rpcErrors struct {
	http.ResponseWriter
	status int
	held   *bytes.Buffer // the plain-text body of an error
}

func (w *rpcErrors) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	if status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.held = &bytes.Buffer{}
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *rpcErrors) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held != nil {
		return w.held.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes through (event streams).
func (w *rpcErrors) Flush() {
	if w.held != nil {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection.
func (w *rpcErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes a held error as a JSON-RPC error.
func (w *rpcErrors) finish() {
	if w.held == nil {
		return
	}
	msg := strings.TrimSpace(w.held.String())
	code := int64(jsonrpc.CodeInvalidRequest)
	switch {
	case w.status == http.StatusNotFound:
		code = codeSessionNotFound
	case strings.Contains(msg, "malformed") || strings.Contains(msg, "unmarshal"):
		code = jsonrpc.CodeParseError
	}
	writeRPCError(w.ResponseWriter, w.status, nil, code, msg)
}

// undeclared answers the methods of capabilities the server does not
// declare (resources, prompts) with "method not found", not an empty list.
func undeclared(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if kind, _, _ := strings.Cut(method, "/"); kind == "resources" || kind == "prompts" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: fmt.Sprintf("method %q not found: this server declares no %s capability (its agents are tools)", method, kind)}
		}
		return next(ctx, method, req)
	}
}

// infoCap is a log handler that records at most at info: the SDK's errors
// about what a client sent are not the server's errors.
type infoCap struct{ h slog.Handler }

func (c infoCap) Enabled(ctx context.Context, l slog.Level) bool {
	return c.h.Enabled(ctx, min(l, slog.LevelInfo))
}

func (c infoCap) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelInfo {
		r.Level = slog.LevelInfo
	}
	return c.h.Handle(ctx, r)
}

func (c infoCap) WithAttrs(as []slog.Attr) slog.Handler { return infoCap{c.h.WithAttrs(as)} }
func (c infoCap) WithGroup(g string) slog.Handler       { return infoCap{c.h.WithGroup(g)} }
