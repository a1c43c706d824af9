package openai

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeChunk decodes one streamed chunk into c as json.Unmarshal would.
// The chunks OpenAI and compatible servers send are decoded by hand (a
// reflective decode of every chunk was most of the cost of reading an
// answer); anything the hand decoder does not expect (malformed JSON, a key
// in other case or with escapes, a value of another type, invalid UTF-8)
// goes to json.Unmarshal, which decodes it or reports the error.
// FuzzDecodeChunk holds the two to the same results.
func decodeChunk(data []byte, c *chunk) error {
	*c = chunk{}
	d := chunkDecoder{data: data}
	if d.chunk(c) {
		return nil
	}
	*c = chunk{}
	return json.Unmarshal(data, c)
}

// chunkDecoder reads a chunk, checking the JSON grammar as it goes; each
// method reports false when the data is malformed or not what it expects.
type chunkDecoder struct {
	data []byte
	i    int
}

func (d *chunkDecoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (d *chunkDecoder) peek() byte {
	d.ws()
	if d.i < len(d.data) {
		return d.data[d.i]
	}
	return 0
}

// object calls field for each key of the object at the cursor; field
// reads the value. A null stands for an empty object.
func (d *chunkDecoder) object(field func(key []byte) bool) bool {
	if d.null() {
		return true
	}
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		key, ok := d.rawString()
		if !ok || bytes.IndexByte(key, '\\') >= 0 || d.peek() != ':' {
			return false
		}
		d.i++
		if !field(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// array calls elem for each element of the array at the cursor; a null
// is an empty array.
func (d *chunkDecoder) array(elem func() bool) bool {
	if d.null() {
		return true
	}
	if d.peek() != '[' {
		return false
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// null consumes a null literal.
func (d *chunkDecoder) null() bool {
	if d.peek() == 'n' && bytes.HasPrefix(d.data[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// skip consumes any value, checking its grammar.
func (d *chunkDecoder) skip() bool {
	switch c := d.peek(); {
	case c == '{':
		return d.object(func([]byte) bool { return d.skip() })
	case c == '[':
		return d.array(d.skip)
	case c == '"':
		_, ok := d.rawString()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		_, ok := d.number()
		return ok
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(d.data[d.i:], []byte(lit)) {
			d.i += len(lit)
			return true
		}
	}
	return false
}

// number consumes a number (the JSON grammar: no leading zeros, no
// leading +) and returns it.
func (d *chunkDecoder) number() ([]byte, bool) {
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.data) && d.data[d.i] == '-' {
		d.i++
	}
	if d.i < len(d.data) && d.data[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, false
	}
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return d.data[start:d.i], true
}

// rawString consumes a string and returns its bytes between the quotes,
// still escaped; control characters and unknown escapes are malformed.
func (d *chunkDecoder) rawString() ([]byte, bool) {
	start := d.i + 1
	for j := start; j < len(d.data); j++ {
		switch c := d.data[j]; {
		case c == '"':
			d.i = j + 1
			return d.data[start:j], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			j++
			if j >= len(d.data) {
				return nil, false
			}
			switch d.data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(d.data[j+1:]); !ok {
					return nil, false
				}
				j += 4
			default:
				return nil, false
			}
		}
	}
	return nil, false
}

// str reads a string (or null, leaving *dst as it is).
func (d *chunkDecoder) str(dst *string) bool {
	if d.null() {
		return true
	}
	if d.peek() != '"' {
		return false
	}
	raw, ok := d.rawString()
	if !ok {
		return false
	}
	s, ok := unquote(raw)
	if ok {
		*dst = s
	}
	return ok
}

// integer reads an integer (or null, leaving *dst as it is).
func (d *chunkDecoder) integer(dst *int) bool {
	if d.null() {
		return true
	}
	num, ok := d.number()
	if !ok {
		return false
	}
	n, err := strconv.Atoi(string(num))
	if err != nil {
		return false // a fraction, an exponent, too large: json.Unmarshal decides
	}
	*dst = n
	return true
}

func (d *chunkDecoder) chunk(c *chunk) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			if c.Choices != nil {
				return false // a repeated key: json.Unmarshal merges
			}
			if d.peek() == '[' {
				c.Choices = []choice{} // as json.Unmarshal: [] is not nil
			}
			return d.array(func() bool {
				c.Choices = append(c.Choices, choice{})
				return d.choice(&c.Choices[len(c.Choices)-1])
			})
		case "usage":
			if d.null() {
				c.Usage = nil
				return true
			}
			if c.Usage == nil {
				c.Usage = new(usage)
			}
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "prompt_tokens":
					return d.integer(&c.Usage.PromptTokens)
				case "completion_tokens":
					return d.integer(&c.Usage.CompletionTokens)
				}
				return d.other(key, "prompt_tokens", "completion_tokens")
			})
		case "error":
			d.ws()
			from := d.i
			if !d.skip() {
				return false
			}
			c.Error = bytes.Clone(d.data[from:d.i])
			return true
		}
		return d.other(key, "choices", "usage", "error")
	}) && d.end()
}

// end reports whether only white space is left.
func (d *chunkDecoder) end() bool {
	d.ws()
	return d.i == len(d.data)
}

// other skips the value of a key that is none of names, and refuses one
// that matches a name but for case.
func (d *chunkDecoder) other(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return false
		}
	}
	return d.skip()
}

func (d *chunkDecoder) choice(ch *choice) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return d.integer(&ch.Index)
		case "finish_reason":
			return d.str(&ch.FinishReason)
		case "delta":
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "content":
					return d.str(&ch.Delta.Content)
				case "tool_calls":
					if ch.Delta.ToolCalls != nil {
						return false
					}
					if d.peek() == '[' {
						ch.Delta.ToolCalls = []toolCallDelta{}
					}
					return d.array(func() bool {
						ch.Delta.ToolCalls = append(ch.Delta.ToolCalls, toolCallDelta{})
						return d.toolCall(&ch.Delta.ToolCalls[len(ch.Delta.ToolCalls)-1])
					})
				}
				return d.other(key, "content", "tool_calls")
			})
		}
		return d.other(key, "index", "finish_reason", "delta")
	})
}

func (d *chunkDecoder) toolCall(tc *toolCallDelta) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return d.integer(&tc.Index)
		case "id":
			return d.str(&tc.ID)
		case "function":
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return d.str(&tc.Function.Name)
				case "arguments":
					return d.str(&tc.Function.Arguments)
				}
				return d.other(key, "name", "arguments")
			})
		}
		return d.other(key, "index", "id", "function")
	})
}

// unquote decodes the escapes of a JSON string's contents as
// encoding/json does; ok is false for invalid UTF-8 (which encoding/json
// replaces) so the caller falls back.
func unquote(raw []byte) (string, bool) {
	if bytes.IndexByte(raw, '\\') < 0 {
		if !utf8.Valid(raw) {
			return "", false
		}
		return string(raw), true
	}
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			b = append(b, raw[i])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(raw[i+1:])
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					r2, ok2 = hex4(raw[i+3:])
				}
				if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", false
		}
		i++
	}
	if !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
