package tsload

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// maxJSONDepth bounds the nesting the native decoder follows; deeper input
// is left to JSON.parse (which has its own limit and error).
const maxJSONDepth = 512

// jsonValue builds the JS value JSON.parse would return for data, using the
// runtime's own objects and arrays: plain, mutable, in the text's key order,
// with the numbers and strings goja's JSON.parse yields. It is much cheaper
// than JSON.parse (which decodes through encoding/json tokens). ok is false
// when data is not something it decodes exactly as JSON.parse would (invalid
// JSON or UTF-8, numbers out of float64 range, very deep nesting): the
// caller then leaves the text to JSON.parse, which throws the same error as
// before.
func (r *jsRuntime) jsonValue(data string) (v goja.Value, ok bool) {
	if !utf8.ValidString(data) {
		return nil, false
	}
	d := jsonDecoder{vm: r.vm, data: data}
	v, ok = d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, false
	}
	return v, true
}

// jsonDecoder is a strict JSON (RFC 8259) recursive descent decoder into
// goja values.
type jsonDecoder struct {
	vm   *goja.Runtime
	data string
	pos  int
}

// space skips the whitespace JSON allows between tokens.
func (d *jsonDecoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (goja.Value, bool) {
	d.space()
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.string()
		if !ok {
			return nil, false
		}
		return d.vm.ToValue(s), true
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"):
		return d.vm.ToValue(true), true
	case d.literal("false"):
		return d.vm.ToValue(false), true
	case d.literal("null"):
		return goja.Null(), true
	}
	return nil, false
}

// literal consumes word if the input continues with it.
func (d *jsonDecoder) literal(word string) bool {
	if len(d.data)-d.pos < len(word) || d.data[d.pos:d.pos+len(word)] != word {
		return false
	}
	d.pos += len(word)
	return true
}

func (d *jsonDecoder) object(depth int) (goja.Value, bool) {
	if depth > maxJSONDepth {
		return nil, false
	}
	d.pos++ // '{'
	o := d.vm.NewObject()
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return o, true
	}
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		key, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		// JSON.parse defines own data properties: no setter runs (a
		// "__proto__" key is an ordinary property), a repeated key keeps
		// its first position and takes the last value.
		if o.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE) != nil {
			return nil, false
		}
		done, ok := d.sep('}')
		if !ok {
			return nil, false
		}
		if done {
			return o, true
		}
	}
}

// sep reads what follows an object member or an array element: ',' (more
// follow) or the closing byte (done).
func (d *jsonDecoder) sep(closing byte) (done, ok bool) {
	d.space()
	if d.pos >= len(d.data) {
		return false, false
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return false, true
	case closing:
		d.pos++
		return true, true
	}
	return false, false
}

func (d *jsonDecoder) array(depth int) (goja.Value, bool) {
	if depth > maxJSONDepth {
		return nil, false
	}
	d.pos++ // '['
	var items []any
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return d.vm.NewArray(), true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		items = append(items, v)
		done, ok := d.sep(']')
		if !ok {
			return nil, false
		}
		if done {
			return d.vm.NewArray(items...), true
		}
	}
}

// string decodes the string literal at pos. A string with escapes is
// unquoted by encoding/json, as JSON.parse does (a lone surrogate escape
// becomes U+FFFD).
func (d *jsonDecoder) string() (string, bool) {
	start := d.pos
	d.pos++ // '"'
	escaped := false
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			raw := d.data[start:d.pos]
			if !escaped {
				return raw[1 : len(raw)-1], true
			}
			var s string
			if json.Unmarshal([]byte(raw), &s) != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			escaped = true
			d.pos += 2
		case c < 0x20:
			return "", false
		default:
			d.pos++
		}
	}
	return "", false
}

// number decodes the number literal at pos the way JSON.parse does: to the
// nearest float64 (an integral one is an integer value in goja).
func (d *jsonDecoder) number() (goja.Value, bool) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case d.digits() == 0:
		return nil, false
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if d.digits() == 0 {
			return nil, false
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if d.digits() == 0 {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(d.data[start:d.pos], 64)
	if err != nil {
		// Out of range: JSON.parse throws; let it.
		return nil, false
	}
	return d.vm.ToValue(f), true
}

// digits consumes a run of decimal digits and returns its length.
func (d *jsonDecoder) digits() int {
	start := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	return d.pos - start
}
