package responses

import (
	"encoding/json"
	"testing"
)

// TestTextDeltaWireForm: a text delta event is written with its fields in
// the order and form every other event has (a map's: sorted keys),
// escapes included.
func TestTextDeltaWireForm(t *testing.T) {
	d := "<b>é</b> \"q\" \u2028"
	got, err := json.Marshal(textDelta{Delta: d, ItemID: "msg_1", Logprobs: []any{}, OutputIndex: 2, SequenceNumber: 7,
		Type: "response.output_text.delta"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]any{"type": "response.output_text.delta", "sequence_number": int64(7), "item_id": "msg_1",
		"output_index": 2, "content_index": 0, "delta": d, "logprobs": []any{}})
	if string(got) != string(want) {
		t.Fatalf("delta event:\n got %s\nwant %s", got, want)
	}
}
