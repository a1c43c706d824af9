package eventsource

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// Events carry their own name (none when they have no event field), an
// event without data is not dispatched, and CRLF line ends are read.
func TestReaderNames(t *testing.T) {
	r := NewReader(strings.NewReader("event: ping\r\n\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\n: keepalive\n\ndata: x\ndata: y\n\nevent: error\ndata: e\n\nevent: cut\ndata: never dispatched"), 1<<20)
	defer r.Release()
	type ev struct{ name, data string }
	var got []ev
	for {
		name, data, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev{string(name), string(data)})
	}
	want := []ev{{"message_start", `{"a":1}`}, {"", "x\ny"}, {"error", "e"}}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
}

// A line longer than the reader's limit is ErrLineTooLong.
func TestReaderLimit(t *testing.T) {
	r := NewReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50)
	defer r.Release()
	if _, _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("a 106-byte line under a 50-byte limit: %v", err)
	}
}
