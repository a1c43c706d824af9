package anthropic

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// eventSeeds are stream events as the Messages API sends them, and odd ones
// the hand decoder leaves to json.Unmarshal.
var eventSeeds = []string{
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":1,"cache_creation_input_tokens":0}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{},"caller":{"type":"direct"}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"déjà \"vu\"\n\u00e9\ud83d\ude00 \ud800x \/ \t"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me \"think\"\n"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","Thinking":"case"}}`,
	`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null,"stop_details":null},"usage":{"output_tokens":30}}`,
	`{"type":"message_stop"}`,
	`{"type":"ping"}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`{"type":"error","error":null}`,
	` { "type" : "content_block_delta" , "index" : 2 , "delta" : { "type" : "text_delta" , "text" : "x" } } `,
	`{"Type":"message_stop"}`,
	`{"type":"content_block_delta","Delta":{"text":"case"}}`,
	`{"type":"content_block_delta","index":1.5}`,
	`{"index":"0"}`,
	`{"delta":[]}`,
	`{"usage":5}`,
	`{"type":"message_stop"`,
	"{\"delta\":{\"text\":\"bad \xff utf8\"}}",
	`null`,
	`[]`,
	`{"message":null,"usage":{"input_tokens":null}}`,
	`{"index":99999999999999999999}`,
	`{"index":-3,"delta":{"text":"\u0000"}}`,
	`{"index":01}`,
	`{"a":tru}`,
	`{"typ\u0065":"escaped key"}`,
	`{"delta":{"text":"a"},"delta":{"type":"again"}}`,
	`{"type":"message_stop"} x`,
	``,
}

// FuzzDecodeEvent: decodeEvent gives what json.Unmarshal gives, value and
// error alike.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add([]byte(s))
	}
	// At encoding/json's nesting limit and past it (refused, not a stack
	// overflow).
	for _, n := range []int{9999, 10000} {
		f.Add([]byte(`{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want streamEvent
		gerr := decodeEvent(data, &got)
		werr := json.Unmarshal(data, &want)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("%s: error %v, json.Unmarshal %v", data, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", data, got, want)
		}
	})
}
