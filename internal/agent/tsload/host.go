package tsload

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// maxResponseBytes caps a fetch response body.
const maxResponseBytes = 32 << 20

// jsTimer is a setTimeout/setInterval timer. It counts as in flight for its
// call until it fires (timeouts) or is cleared.
type jsTimer struct {
	id        int64
	timer     *time.Timer
	fn        goja.Callable
	args      []goja.Value
	every     time.Duration // > 0 for intervals
	cancelled bool
}

// hostObject builds the object of Go functions the prelude closes over.
func (r *jsRuntime) hostObject() *goja.Object {
	o := r.vm.NewObject()
	set := func(name string, f func(goja.FunctionCall) goja.Value) {
		_ = o.Set(name, f)
	}
	set("callsite", r.hostCallsite)
	set("log", r.hostLog)
	set("setTimer", r.hostSetTimer)
	set("clearTimer", r.hostClearTimer)
	set("utf8Encode", func(c goja.FunctionCall) goja.Value {
		return r.vm.ToValue(r.vm.NewArrayBuffer([]byte(c.Argument(0).String())))
	})
	set("utf8Decode", r.hostUTF8Decode)
	set("parseJSON", func(c goja.FunctionCall) goja.Value {
		if v, ok := r.jsonValue(c.Argument(0).String()); ok {
			return v
		}
		return goja.Undefined() // the prelude falls back to JSON.parse
	})
	set("atob", r.hostAtob)
	set("btoa", r.hostBtoa)
	set("randomUUID", func(goja.FunctionCall) goja.Value { return r.vm.ToValue(randomUUID()) })
	set("randomFill", func(c goja.FunctionCall) goja.Value {
		b := r.bufferArg(c.Argument(0), c.Argument(1), c.Argument(2))
		_, _ = rand.Read(b)
		return goja.Undefined()
	})
	set("parseURL", r.hostParseURL)
	set("fetch", r.hostFetch)
	set("store", r.hostStore)
	set("aborted", func(goja.FunctionCall) goja.Value {
		return r.vm.ToValue(r.cur != nil && r.cur.ctx.Err() != nil)
	})
	return o
}

// hostCallsite returns {file, line, col} of the innermost frame in agent code.
func (r *jsRuntime) hostCallsite(goja.FunctionCall) goja.Value {
	for _, f := range r.vm.CaptureCallStack(0, nil) {
		p := f.Position()
		if userFrame(p.Filename) {
			o := r.vm.NewObject()
			_ = o.Set("file", p.Filename)
			_ = o.Set("line", p.Line)
			_ = o.Set("col", p.Column+1) // source-mapped columns come 0-based
			return o
		}
	}
	return goja.Null()
}

func (r *jsRuntime) hostLog(c goja.FunctionCall) goja.Value {
	level := slog.LevelInfo
	switch c.Argument(0).String() {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	attrs := []slog.Attr{slog.String("source", "console"), slog.String("file", r.sh.rel)}
	if r.sh.name != "" {
		attrs = append(attrs, slog.String("agent", r.sh.name))
	}
	ctx := context.Background()
	if r.cur != nil {
		attrs = append(attrs, slog.String("tool", r.cur.label))
		ctx = r.cur.ctx
	}
	r.sh.log.LogAttrs(ctx, level, c.Argument(1).String(), attrs...)
	return goja.Undefined()
}

func (r *jsRuntime) hostSetTimer(c goja.FunctionCall) goja.Value {
	r.nextID++
	id := r.nextID
	cs := r.cur
	if cs == nil {
		// No call is running (module evaluation): there is no event loop to
		// fire the timer on.
		r.sh.log.Debug("timer set outside a tool call never fires", "file", r.sh.rel)
		return r.vm.ToValue(id)
	}
	fn, _ := goja.AssertFunction(c.Argument(0))
	ms := c.Argument(1).ToFloat()
	if math.IsNaN(ms) || ms < 0 {
		ms = 0
	}
	d := time.Duration(math.Min(ms, float64(math.MaxInt32)) * float64(time.Millisecond))
	var args []goja.Value
	if a, ok := c.Argument(2).(*goja.Object); ok {
		n := int(a.Get("length").ToInteger())
		for i := range n {
			args = append(args, a.Get(fmt.Sprint(i)))
		}
	}
	cs.pending()
	t := &jsTimer{id: id, fn: fn, args: args}
	if c.Argument(3).ToBoolean() {
		t.every = max(d, time.Millisecond)
	}
	cs.timers[id] = t
	cs.inflight++
	t.timer = time.AfterFunc(d, func() {
		select {
		case cs.jobs <- func() error { return r.fireTimer(cs, t) }:
		case <-cs.done:
		}
	})
	return r.vm.ToValue(id)
}

// fireTimer runs on the VM goroutine, from the await loop.
func (r *jsRuntime) fireTimer(cs *callState, t *jsTimer) error {
	if t.cancelled {
		return nil
	}
	if t.every == 0 {
		t.cancelled = true
		delete(cs.timers, t.id)
		cs.inflight--
	}
	_, err := t.fn(goja.Undefined(), t.args...)
	if err != nil {
		if _, ok := err.(*goja.Exception); !ok {
			return err // uncatchable: interrupt, stack overflow
		}
		te := r.thrown(err.(*goja.Exception).Value())
		r.sh.log.Error("uncaught error in timer callback", "agent", r.sh.name, "tool", cs.label,
			"error", te.Error(), "stack", te.Stack)
	}
	if t.every > 0 && !t.cancelled {
		t.timer.Reset(t.every)
	}
	return nil
}

func (r *jsRuntime) hostClearTimer(c goja.FunctionCall) goja.Value {
	cs := r.cur
	if cs == nil {
		return goja.Undefined()
	}
	id := c.Argument(0).ToInteger()
	if t, ok := cs.timers[id]; ok && !t.cancelled {
		t.cancelled = true
		t.timer.Stop()
		delete(cs.timers, id)
		cs.inflight--
	}
	return goja.Undefined()
}

// bufferArg returns the bytes of ArrayBuffer buf in [off, off+n); n < 0
// means to the end.
func (r *jsRuntime) bufferArg(buf, off, n goja.Value) []byte {
	ab, ok := buf.Export().(goja.ArrayBuffer)
	if !ok {
		panic(r.vm.NewTypeError("expected an ArrayBuffer"))
	}
	b := ab.Bytes()
	o := int(off.ToInteger())
	l := int(n.ToInteger())
	if o < 0 || o > len(b) {
		panic(r.vm.NewTypeError("offset out of range"))
	}
	if l < 0 || o+l > len(b) {
		l = len(b) - o
	}
	return b[o : o+l]
}

func (r *jsRuntime) hostUTF8Decode(c goja.FunctionCall) goja.Value {
	b := r.bufferArg(c.Argument(0), c.Argument(1), c.Argument(2))
	fatal, ignoreBOM := c.Argument(3).ToBoolean(), c.Argument(4).ToBoolean()
	if !ignoreBOM {
		b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	}
	if utf8.Valid(b) {
		return r.vm.ToValue(string(b))
	}
	if fatal {
		panic(r.vm.NewTypeError("The encoded data was not valid for encoding utf-8"))
	}
	var sb strings.Builder
	for len(b) > 0 {
		ru, n := utf8.DecodeRune(b)
		sb.WriteRune(ru) // RuneError for each invalid byte
		b = b[n:]
	}
	return r.vm.ToValue(sb.String())
}

func (r *jsRuntime) domError(name, msg string) *goja.Object {
	e := r.vm.NewGoError(fmt.Errorf("%s", msg))
	_ = e.Set("name", name)
	return e
}

func (r *jsRuntime) hostBtoa(c goja.FunctionCall) goja.Value {
	s := c.Argument(0).String()
	b := make([]byte, 0, len(s))
	for _, ru := range s {
		if ru > 0xff {
			panic(r.domError("InvalidCharacterError", "btoa: the string contains characters outside of the Latin1 range"))
		}
		b = append(b, byte(ru))
	}
	return r.vm.ToValue(base64.StdEncoding.EncodeToString(b))
}

func (r *jsRuntime) hostAtob(c goja.FunctionCall) goja.Value {
	s := strings.Map(func(ru rune) rune {
		switch ru {
		case ' ', '\t', '\n', '\f', '\r':
			return -1
		}
		return ru
	}, c.Argument(0).String())
	if len(s)%4 == 0 {
		s = strings.TrimRight(s, "=")
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		panic(r.domError("InvalidCharacterError", "atob: the string to be decoded is not correctly encoded"))
	}
	runes := make([]rune, len(b))
	for i, x := range b {
		runes[i] = rune(x)
	}
	return r.vm.ToValue(string(runes))
}

func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var specialSchemes = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21", "file": ""}

// hostParseURL parses an absolute URL (optionally against a base) into the
// components the JS URL class keeps.
func (r *jsRuntime) hostParseURL(c goja.FunctionCall) goja.Value {
	invalid := func() goja.Value {
		panic(r.vm.NewTypeError("Invalid URL: %s", c.Argument(0).String()))
	}
	in := strings.TrimSpace(c.Argument(0).String())
	u, err := url.Parse(in)
	if err != nil {
		return invalid()
	}
	if b := c.Argument(1); !goja.IsUndefined(b) {
		base, err := url.Parse(strings.TrimSpace(b.String()))
		if err != nil || !base.IsAbs() {
			return invalid()
		}
		u = base.ResolveReference(u)
	}
	if !u.IsAbs() {
		return invalid()
	}
	scheme := strings.ToLower(u.Scheme)
	defPort, special := specialSchemes[scheme]
	if special && scheme != "file" && u.Host == "" {
		return invalid()
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if port == defPort {
		port = ""
	}
	path := u.EscapedPath()
	if u.Opaque != "" {
		path = u.Opaque
	}
	if special && path == "" {
		path = "/"
	}
	search := ""
	if u.RawQuery != "" {
		search = "?" + u.RawQuery
	}
	hash := ""
	if u.Fragment != "" {
		hash = "#" + u.EscapedFragment()
	}
	var user, pass string
	if u.User != nil {
		user = url.PathEscape(u.User.Username())
		if p, ok := u.User.Password(); ok {
			pass = url.PathEscape(p)
		}
	}
	o := r.vm.NewObject()
	for k, v := range map[string]string{
		"protocol": scheme + ":", "username": user, "password": pass, "hostname": host,
		"port": port, "pathname": path, "search": search, "hash": hash,
	} {
		_ = o.Set(k, v)
	}
	return o
}

// hostFetch is __host.fetch(url, method, headers [[k,v]...], body?) -> Promise
// of {status, statusText, url, redirected, headers, body ArrayBuffer}. The
// request runs on its own goroutine under the call's context.
func (r *jsRuntime) hostFetch(c goja.FunctionCall) goja.Value {
	p, resolve, reject := r.vm.NewPromise()
	cs := r.cur
	if cs == nil {
		_ = reject(r.vm.NewTypeError("fetch is only available while a tool runs"))
		return r.vm.ToValue(p)
	}
	rawURL := c.Argument(0).String()
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		_ = reject(r.vm.NewTypeError("fetch: only absolute http(s) URLs are supported, got %q", rawURL))
		return r.vm.ToValue(p)
	}
	method := c.Argument(1).String()
	var pairs [][]string
	_ = r.vm.ExportTo(c.Argument(2), &pairs)
	var body []byte
	hasBody := false
	switch b := c.Argument(3).Export().(type) {
	case nil:
	case string:
		body, hasBody = []byte(b), true
	case goja.ArrayBuffer:
		body, hasBody = bytes.Clone(b.Bytes()), true
	default:
		body, hasBody = []byte(c.Argument(3).String()), true
	}
	req, err := http.NewRequestWithContext(cs.ctx, method, u.String(), nil)
	if err != nil {
		_ = reject(r.vm.NewTypeError("fetch: %v", err))
		return r.vm.ToValue(p)
	}
	if hasBody {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	for _, kv := range pairs {
		if len(kv) == 2 {
			req.Header.Add(kv[0], kv[1])
		}
	}
	client := r.sh.opts.HTTPClient
	cs.pending()
	cs.inflight++
	go func() {
		res, err := doFetch(client, req)
		job := func() error {
			cs.inflight--
			if err != nil {
				return reject(r.vm.NewTypeError("fetch failed: %v", err))
			}
			o := r.vm.NewObject()
			_ = o.Set("status", res.status)
			_ = o.Set("statusText", res.statusText)
			_ = o.Set("url", res.url)
			_ = o.Set("redirected", res.redirected)
			hs := make([]any, len(res.headers))
			for i, h := range res.headers {
				hs[i] = r.vm.NewArray(h[0], h[1])
			}
			_ = o.Set("headers", r.vm.NewArray(hs...))
			_ = o.Set("body", r.vm.NewArrayBuffer(res.body))
			return resolve(o)
		}
		select {
		case cs.jobs <- job:
		case <-cs.done:
		}
	}()
	return r.vm.ToValue(p)
}

type fetchResult struct {
	status     int
	statusText string
	url        string
	redirected bool
	headers    [][2]string
	body       []byte
}

func doFetch(client *http.Client, req *http.Request) (*fetchResult, error) {
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxResponseBytes {
		return nil, fmt.Errorf("response body larger than %d bytes", maxResponseBytes)
	}
	out := &fetchResult{
		status:     res.StatusCode,
		statusText: strings.TrimSpace(strings.TrimPrefix(res.Status, fmt.Sprint(res.StatusCode))),
		url:        res.Request.URL.String(),
		redirected: res.Request.URL.String() != req.URL.String(),
		body:       body,
	}
	keys := make([]string, 0, len(res.Header))
	for k := range res.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.headers = append(out.headers, [2]string{strings.ToLower(k), strings.Join(res.Header[k], ", ")})
	}
	return out, nil
}
