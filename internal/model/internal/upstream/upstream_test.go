package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// An error answer's message comes from either provider's envelope (or is
// the status text); the upstream's request id is kept for the logs.
func TestReadAPIError(t *testing.T) {
	for _, c := range []struct{ body, id, msg, text string }{
		{`{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}`, "req_011", "Slow down", "Too Many Requests: Slow down (request id req_011)"},
		{`{"error":{"message":"Rate limit reached","type":"requests"}}`, "", "Rate limit reached", "Too Many Requests: Rate limit reached"},
		{`{"error":"busy"}`, "", "busy", "Too Many Requests: busy"},
		{`<html>429</html>`, "", "Too Many Requests", "Too Many Requests: Too Many Requests"},
	} {
		h := http.Header{}
		if c.id != "" {
			h.Set("request-id", c.id)
		}
		err := ReadAPIError(&http.Response{StatusCode: 429, Header: h, Body: io.NopCloser(strings.NewReader(c.body))})
		st, msg, _, ok := StatusOf(err)
		if !ok || st != 429 || msg != c.msg || err.Error() != c.text {
			t.Errorf("%s: %d %q %v, %q", c.body, st, msg, ok, err)
		}
	}
}

// A document nested deeper than encoding/json allows is refused, as
// json.Unmarshal refuses it, rather than recursing until the stack
// overflows; at the limit it is read.
func TestJSONScannerDepth(t *testing.T) {
	nested := func(n int) []byte {
		return []byte(`{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	var d JSONScanner
	d.Reset(nested(9999)) // the object is one level more
	if !d.Object(func([]byte) bool { return d.Skip() }) || !d.End() {
		t.Fatal("a document 10000 levels deep was refused")
	}
	for _, n := range []int{10000, 1 << 20} {
		d.Reset(nested(n))
		if d.Object(func([]byte) bool { return d.Skip() }) {
			t.Fatalf("a document %d levels deep was read", n+1)
		}
	}
}
