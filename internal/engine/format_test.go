package engine

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/stackbone/stackbone/internal/model"
)

// plainProvider is a provider that knows nothing of response formats.
type plainProvider struct{}

func (plainProvider) Stream(context.Context, model.Request) iter.Seq2[model.Chunk, error] {
	return func(func(model.Chunk, error) bool) {}
}

// TestFormatRefusedWhereNotHonoured: a provider that does not declare it
// can honour a response format gets an input error naming response_format
// (a 400 at the edge), so the format is never dropped silently; no format
// asks nothing.
func TestFormatRefusedWhereNotHonoured(t *testing.T) {
	f := &model.ResponseFormat{Type: model.FormatJSONObject}
	err := honours(plainProvider{}, "custom/m", f)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Field != FieldResponseFormat {
		t.Fatalf("want a 400 on response_format, got %v", err)
	}
	if err := honours(plainProvider{}, "custom/m", nil); err != nil {
		t.Fatalf("no format: %v", err)
	}
}
