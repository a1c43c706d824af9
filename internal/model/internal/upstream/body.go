package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// EncodeBody encodes a request body: body (a struct encoding to a JSON
// object, text unescaped), then the already encoded tools (from a
// ToolCache) as its "tools" field, then extra's fields
// (modelSettings.providerOptions for the provider) set on it, replacing
// fields it has.
func EncodeBody(body any, tools [][]byte, extra json.RawMessage) ([]byte, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	// The object ends with "}\n"; the tools go before the brace.
	buf.Truncate(buf.Len() - 2)
	if len(tools) > 0 {
		buf.WriteString(`,"tools":[`)
		for i, t := range tools {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(t)
		}
		buf.WriteByte(']')
	}
	buf.WriteByte('}')
	out := bytes.Clone(buf.Bytes())
	if len(extra) > 0 {
		return mergeBody(out, extra)
	}
	return out, nil
}

// Endpoint resolves path against base (def when base is empty) the way the
// official SDKs do: the base path gets a trailing slash, so
// "https://gw/v1" and "chat/completions" give "https://gw/v1/chat/completions".
func Endpoint(base, def, path string) (string, error) {
	if base == "" {
		base = def
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("base URL must be http or https")
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	return u.ResolveReference(&url.URL{Path: path}).String(), nil
}
