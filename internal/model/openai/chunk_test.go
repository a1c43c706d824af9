package openai

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// chunkSeeds are chunks as servers send them, and the odd ones the hand
// decoder leaves to json.Unmarshal.
var chunkSeeds = []string{
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"content":"déjà \"vu\"\n\u00e9\ud83d\ude00 \ud800x \/ \t"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}`,
	`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":2,"function":{"arguments":"\"Paris\"}"}},{"index":3,"id":null}]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Let me \"think\"."},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":"","reasoning":"step one","reasoning_details":[{"type":"reasoning.text","text":"step one"}]}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":{"text":"an object"}}}]}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"error":{"message":"overloaded","type":"server_error"}}`,
	`{"error":null}`,
	` { "choices" : [ { "index" : 0 , "delta" : { "content" : "x" } } ] } `,
	`{"Choices":[{"index":0,"delta":{"content":"case"}}]}`,
	`{"choices":[{"INDEX":0,"delta":{"Content":"case"}}]}`,
	`{"choices":[{"index":1.5,"delta":{}}]}`,
	`{"choices":[{"index":"0","delta":{}}]}`,
	`{"choices":{"index":0}}`,
	`{"usage":5}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}]`,
	`{"choices":[{"index":0,"delta":{"content":"\ud83d\u0041"}}]}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad \xff utf8\"}}]}",
	`null`,
	`[]`,
	`{"choices":null,"usage":{"prompt_tokens":null}}`,
	`{"choices":[{"index":99999999999999999999}]}`,
	`{"choices":[{"index":-3,"delta":{"content":"\u0000"}}]}`,
	`{"choices":[{"index":01}]}`,
	`{"a":tru,"choices":[]}`,
	`{"a":"\x","choices":[]}`,
	`{"choices":[{"index":0}],"choices":[{"delta":{"content":"again"}}]}`,
	`{"a":1,}`,
	`{"choic\u0065s":[{"index":0,"delta":{"content":"escaped key"}}]}`,
	`{"a":-,"b":1.,"c":1e}`,
	"{\"a\":\"tab\there\"}",
	`{"a":[1,2,{"b":[true,false,null,-0.5e+3]}],"choices":[{"index":0,"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}]} x`,
	``,
}

// FuzzDecodeChunk: decodeChunk gives what json.Unmarshal gives, value and
// error alike.
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	// At encoding/json's nesting limit and past it (refused, not a stack
	// overflow).
	for _, n := range []int{9999, 10000} {
		f.Add([]byte(`{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want chunk
		gerr := decodeChunk(data, &got)
		werr := json.Unmarshal(data, &want)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("%s: error %v, json.Unmarshal %v", data, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", data, got, want)
		}
	})
}
