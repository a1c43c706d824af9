package redact_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/redact"
)

const (
	openaiKey = "sk-proj-Q9xv3LrT8mWc2NfA7hJk"
	tenantKey = "acme-live-key-4f8a9c"
	jwt       = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
)

func TestStringReplacesKnownSecretsAndShapes(t *testing.T) {
	r := redact.New(openaiKey, tenantKey, "", "short", tenantKey)
	for in, want := range map[string]string{
		"Incorrect API key provided: " + openaiKey + ".":    "Incorrect API key provided: [REDACTED].",
		"key=" + tenantKey + " again " + tenantKey:          "key=[REDACTED] again [REDACTED]",
		"Authorization: Bearer " + jwt:                      "Authorization: Bearer [REDACTED]",
		"authorization: bearer\t" + jwt + ", next":          "authorization: bearer\t[REDACTED], next",
		`{"error":"bad key sk-ant-api03-AbCdEfGh12_34"}`:    `{"error":"bad key [REDACTED]"}`,
		"sk-other-unknown-key-123456":                       "[REDACTED]",
		"short is not a secret, nor is disk-usage-reporter": "short is not a secret, nor is disk-usage-reporter",
		"task-0123456789 ask-0123456789 sk-short":           "task-0123456789 ask-0123456789 sk-short",
		"bearers carry things; Bearer x":                    "bearers carry things; Bearer x",
		"nothing here":                                      "nothing here",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q)\n got %q\nwant %q", in, got, want)
		}
	}
	// A secret that contains another is replaced whole.
	long := redact.New("abcdefgh", "abcdefgh-ijklmnop")
	if got := long.String("x abcdefgh-ijklmnop y abcdefgh"); got != "x [REDACTED] y [REDACTED]" {
		t.Errorf("overlapping secrets: %q", got)
	}
}

type config struct {
	Name string
	Key  string
}

type valuer struct{ key string }

func (v valuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("key", v.key), slog.Int("n", 1))
}

// TestHandlerRedactsEverything logs secrets every way slog allows, through
// the text and the JSON handler, and finds none of them in the output.
func TestHandlerRedactsEverything(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			var base slog.Handler = slog.NewTextHandler(&buf, nil)
			if format == "json" {
				base = slog.NewJSONHandler(&buf, nil)
			}
			log := slog.New(redact.NewHandler(base, redact.New(openaiKey, tenantKey)))
			upstream := fmt.Errorf("model step: %w", errors.New("401 Incorrect API key provided: "+openaiKey))

			log.Error("upstream said "+openaiKey, "err", upstream, "n", 3)
			log.With("key", tenantKey).WithGroup("req").Info("with attrs",
				slog.Group("headers", slog.String("authorization", "Bearer "+jwt), slog.Group("deeper", "x-api-key", tenantKey)),
				slog.Any("cfg", config{Name: "prod", Key: openaiKey}),
				slog.Any("body", json.RawMessage(`{"apiKey":"`+tenantKey+`"}`)),
				slog.Any("raw", []byte("token "+openaiKey)),
				slog.Any("valuer", valuer{key: tenantKey}),
				slog.Duration("took", time.Second))
			log.Info("clean", "thread", "t-1", "err", errors.New("no secret"))

			out := buf.String()
			for _, secret := range []string{openaiKey, tenantKey, jwt} {
				if strings.Contains(out, secret) {
					t.Fatalf("%s leaked:\n%s", secret, out)
				}
			}
			for _, want := range []string{"upstream said [REDACTED]", "Incorrect API key provided: [REDACTED]", "Bearer [REDACTED]",
				"no secret", "t-1", "prod", "took"} {
				if !strings.Contains(out, want) {
					t.Fatalf("missing %q in:\n%s", want, out)
				}
			}
			if n := strings.Count(out, redact.Placeholder); n != 9 {
				t.Fatalf("%d placeholders, want 9:\n%s", n, out)
			}
			if format == "json" {
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					if !json.Valid([]byte(line)) {
						t.Fatalf("not JSON: %s", line)
					}
				}
				if !strings.Contains(out, `"body":{"apiKey":"[REDACTED]"}`) || !strings.Contains(out, `"req":{"headers":{"authorization"`) {
					t.Fatalf("structure lost:\n%s", out)
				}
			}
		})
	}
}

func TestHandlerPassesCleanRecordsThrough(t *testing.T) {
	h := redact.NewHandler(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}), redact.New(openaiKey))
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelError) {
		t.Fatal("Enabled must follow the wrapped handler")
	}
}

func benchLogger(b *testing.B) *slog.Logger {
	keys := []string{openaiKey, "sk-ant-api03-0123456789abcdef", tenantKey, "globex-key-0123456789", "initech-key-0123456789"}
	return slog.New(redact.NewHandler(slog.NewJSONHandler(io.Discard, nil), redact.New(keys...)))
}

// BenchmarkClean is the hot path: a typical request log line with nothing
// to redact. Compare with BenchmarkBaseline (no redaction).
func BenchmarkClean(b *testing.B) {
	log := benchLogger(b)
	b.ReportAllocs()
	for b.Loop() {
		log.Info("request", "request_id", "req_3fqmmf3b7qkz48hh0t0v", "method", "POST", "path", "/v1/chat/completions",
			"status", 200, "tenant", "acme", "took", time.Millisecond)
	}
}

func BenchmarkBaseline(b *testing.B) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	b.ReportAllocs()
	for b.Loop() {
		log.Info("request", "request_id", "req_3fqmmf3b7qkz48hh0t0v", "method", "POST", "path", "/v1/chat/completions",
			"status", 200, "tenant", "acme", "took", time.Millisecond)
	}
}

// BenchmarkError logs an upstream error that echoes a key.
func BenchmarkError(b *testing.B) {
	log := benchLogger(b)
	err := fmt.Errorf("model step: %w", errors.New("401 Incorrect API key provided: "+openaiKey))
	b.ReportAllocs()
	for b.Loop() {
		log.Error("run failed", "agent", "assistant", "thread", "t-1", "run", "run_1", "err", err)
	}
}

// BenchmarkHandleOverhead is the redaction alone: a typical clean record
// handed to a handler that does nothing.
func BenchmarkHandleOverhead(b *testing.B) {
	h := redact.NewHandler(slog.DiscardHandler, redact.New(openaiKey, "sk-ant-api03-0123456789abcdef", tenantKey, "globex-key-0123456789"))
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	rec.AddAttrs(slog.String("request_id", "req_3fqmmf3b7qkz48hh0t0v"), slog.String("method", "POST"),
		slog.String("path", "/v1/chat/completions"), slog.Int("status", 200), slog.String("tenant", "acme"),
		slog.Duration("took", time.Millisecond))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Handle(ctx, rec)
	}
}

// TestSecretsAreMaskedInEveryEncoding: a secret with a quote, a backslash, a
// tab and a newline, and a PEM key, are masked as they are, JSON-escaped
// once (Go, JSON.stringify, ASCII-only) and twice (a JSON tool result
// quoted inside a request body), and base64-encoded; a secret added later
// (Add) is masked too.
func TestSecretsAreMaskedInEveryEncoding(t *testing.T) {
	const odd = "abcd\"ef\\gh\tij\nkl<é>1234"
	const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----\n"
	r := redact.New(odd)
	r.Add(pem)
	for _, secret := range []string{odd, pem} {
		once, _ := json.Marshal(map[string]string{"q": secret})
		twice, _ := json.Marshal(map[string]string{"content": string(once)})
		var noHTML bytes.Buffer
		enc := json.NewEncoder(&noHTML)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]string{"q": secret})
		forms := map[string]string{
			"raw":          "token " + secret + " end",
			"json once":    string(once),
			"json no html": noHTML.String(),
			"json twice":   string(twice),
			"log line":     fmt.Sprintf("msg=%q", string(once)),
			"base64":       "Basic " + base64.StdEncoding.EncodeToString([]byte(secret)),
			"base64 url":   base64.RawURLEncoding.EncodeToString([]byte(secret)),
			"ascii json":   strings.ReplaceAll(noHTML.String(), "é", `\u00e9`),
		}
		for name, text := range forms {
			got := r.String(text)
			if !strings.Contains(got, redact.Placeholder) {
				t.Errorf("%s: not masked: %q", name, got)
			}
			for _, piece := range []string{"abcd", "1234", "MIIEvQIBADANBgkq", "BKcwggSjAgEAAoIB"} {
				if strings.Contains(got, piece) {
					t.Errorf("%s: %q left in %q", name, piece, got)
				}
			}
		}
	}
	// The JSON around a masked secret stays JSON.
	once, _ := json.Marshal(map[string]string{"q": odd})
	var back map[string]string
	if err := json.Unmarshal([]byte(r.String(string(once))), &back); err != nil || back["q"] != redact.Placeholder {
		t.Fatalf("redacted JSON: %v %v", back, err)
	}
}

// TestSecretPartsAreMasked: a secret that comes back reshaped is masked: a
// PEM key logged one trimmed line at a time, a value with a trailing
// newline that comes back trimmed, and the private_key string of a
// service-account JSON stored whole as the secret.
func TestSecretPartsAreMasked(t *testing.T) {
	const pem = "-----BEGIN PRIVATE KEY-----\r\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n  BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----\n"
	const trailing = "tok-4Hn8Qz2Lw7Vb\n"
	sa, _ := json.Marshal(map[string]any{"type": "service_account", "private_key_id": "kid-93jf83hf02",
		"private_key": "-----BEGIN PRIVATE KEY-----\nSApk2Xo9QwErTyUiOp4MnBvCxZ\n-----END PRIVATE KEY-----\n",
		"nested":      map[string]any{"list": []any{"deep-7Gh3Jk9Lq2"}, "n": 1}})
	r := redact.New(pem, trailing, string(sa))
	for _, text := range []string{
		"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
		"line=BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
		"got tok-4Hn8Qz2Lw7Vb.",
		`{"key":"-----BEGIN PRIVATE KEY-----\nSApk2Xo9QwErTyUiOp4MnBvCxZ\n-----END PRIVATE KEY-----\n"}`,
		"SApk2Xo9QwErTyUiOp4MnBvCxZ",
		"kid-93jf83hf02 deep-7Gh3Jk9Lq2",
	} {
		got := r.String(text)
		for _, piece := range []string{"MIIEvQIB", "BKcwggSj", "4Hn8Qz2L", "SApk2Xo9", "93jf83hf", "7Gh3Jk9L"} {
			if strings.Contains(got, piece) {
				t.Errorf("%q left in %q", piece, got)
			}
		}
	}
	// Short lines and leaves are no secrets: ordinary words stay.
	if got := r.String("type 1 ok"); got != "type 1 ok" {
		t.Errorf("over-redacted: %q", got)
	}
}

// TestURLSecrets: a URL's user info, query values and long path segments
// are its secrets, as written and decoded; the host and short segments
// are not.
func TestURLSecrets(t *testing.T) {
	got := redact.URLSecrets("https://bot:pw-9Kd%2F3Lq8@mcp.example.com/s/tok-7Hn2Qz5W/mcp?api_key=key%2B4Lp9Vx2&v=1")
	for _, want := range []string{"pw-9Kd/3Lq8", "tok-7Hn2Qz5W", "key%2B4Lp9Vx2", "key+4Lp9Vx2"} {
		if !slices.Contains(got, want) {
			t.Errorf("%q missing from %q", want, got)
		}
	}
	for _, not := range []string{"mcp.example.com", "mcp", "s", "1", "bot"} {
		if slices.Contains(got, not) {
			t.Errorf("%q taken for a secret: %q", not, got)
		}
	}
	if got := redact.URLSecrets(""); len(got) != 0 {
		t.Errorf("empty URL: %q", got)
	}
}
