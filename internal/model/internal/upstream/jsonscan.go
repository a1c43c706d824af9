package upstream

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONScanner reads a JSON document by hand, checking the grammar as it
// goes, for decoders of streamed chunks that must give what json.Unmarshal
// gives (a reflective decode of every chunk was most of the cost of reading
// an answer). Each method reports false when the data is malformed or not
// what it expects; the caller then leaves the document to json.Unmarshal,
// which decodes it or reports the error. Keys are matched exactly: Other
// refuses a key that matches a field but for case, and Object one with
// escapes, as json.Unmarshal would match them.
type JSONScanner struct {
	data  []byte
	i     int
	depth int // objects and arrays open at the cursor
}

// maxDepth is encoding/json's nesting limit: deeper documents are left to
// json.Unmarshal, which refuses them ("exceeded max depth"), instead of
// recursing until the stack overflows.
const maxDepth = 10000

// Reset starts reading data.
func (d *JSONScanner) Reset(data []byte) { d.data, d.i, d.depth = data, 0, 0 }

// enter opens a nesting level; false past maxDepth. The caller calls
// leave when the level ends.
func (d *JSONScanner) enter() bool {
	d.depth++
	return d.depth <= maxDepth
}

func (d *JSONScanner) leave() { d.depth-- }

func (d *JSONScanner) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Peek returns the next non-space byte (0 at the end).
func (d *JSONScanner) Peek() byte {
	d.ws()
	if d.i < len(d.data) {
		return d.data[d.i]
	}
	return 0
}

// Object calls field for each key of the object at the cursor; field
// reads the value. A null stands for an empty object.
func (d *JSONScanner) Object(field func(key []byte) bool) bool {
	if d.Null() {
		return true
	}
	if d.Peek() != '{' {
		return false
	}
	d.i++
	defer d.leave()
	if !d.enter() {
		return false
	}
	if d.Peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.Peek() != '"' {
			return false
		}
		key, ok := d.rawString()
		if !ok || bytes.IndexByte(key, '\\') >= 0 || d.Peek() != ':' {
			return false
		}
		d.i++
		if !field(key) {
			return false
		}
		switch d.Peek() {
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

// Array calls elem for each element of the array at the cursor; a null
// is an empty array.
func (d *JSONScanner) Array(elem func() bool) bool {
	if d.Null() {
		return true
	}
	if d.Peek() != '[' {
		return false
	}
	d.i++
	defer d.leave()
	if !d.enter() {
		return false
	}
	if d.Peek() == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.Peek() {
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

// Null consumes a null literal.
func (d *JSONScanner) Null() bool {
	if d.Peek() == 'n' && bytes.HasPrefix(d.data[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// Raw consumes any value and returns its bytes (a copy).
func (d *JSONScanner) Raw() ([]byte, bool) {
	d.ws()
	from := d.i
	if !d.Skip() {
		return nil, false
	}
	return bytes.Clone(d.data[from:d.i]), true
}

// Skip consumes any value, checking its grammar.
func (d *JSONScanner) Skip() bool {
	switch c := d.Peek(); {
	case c == '{':
		return d.Object(func([]byte) bool { return d.Skip() })
	case c == '[':
		return d.Array(d.Skip)
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
func (d *JSONScanner) number() ([]byte, bool) {
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
func (d *JSONScanner) rawString() ([]byte, bool) {
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

// Str reads a string (or null, leaving *dst as it is).
func (d *JSONScanner) Str(dst *string) bool {
	if d.Null() {
		return true
	}
	if d.Peek() != '"' {
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

// Integer reads an integer (or null, leaving *dst as it is).
func (d *JSONScanner) Integer(dst *int) bool {
	if d.Null() {
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

// End reports whether only white space is left.
func (d *JSONScanner) End() bool {
	d.ws()
	return d.i == len(d.data)
}

// Other skips the value of a key that is none of names, and refuses one
// that matches a name but for case.
func (d *JSONScanner) Other(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return false
		}
	}
	return d.Skip()
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
