package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// projectFile is the project's configuration file, DIR/stackbone.json.
const projectFile = "stackbone.json"

// EmbeddingsRef reads the "embeddings" field of DIR/stackbone.json: the
// "provider/model" of the embedding model ("" when the file or the field
// is missing: no semantic search).
func EmbeddingsRef(dir string) (string, error) {
	path := filepath.Join(dir, projectFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var raw struct {
		Embeddings json.RawMessage `json:"embeddings"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return "", fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	if len(raw.Embeddings) == 0 || string(raw.Embeddings) == "null" {
		return "", nil
	}
	var ref string
	if err := json.Unmarshal(raw.Embeddings, &ref); err != nil || !strings.Contains(ref, "/") {
		return "", fmt.Errorf("%s: embeddings: want a \"provider/model\" string such as \"openai/text-embedding-3-small\"", path)
	}
	return ref, nil
}
