package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stackbone/stackbone/internal/config"
)

// ProjectFile is the project's provider configuration file, DIR/stackbone.json.
const ProjectFile = "stackbone.json"

// Provider types of stackbone.json. All three use the OpenAI Chat
// Completions provider (internal/model/openai), so streaming, tools, retries
// and response_format take one code path.
const (
	// TypeOpenAICompatible is any Chat Completions endpoint: baseURL
	// (with its version path) and apiKey as a bearer token.
	TypeOpenAICompatible = "openai-compatible"
	// TypeAzureOpenAI is Azure OpenAI: baseURL is the resource's
	// "https://RESOURCE.openai.azure.com/openai", the model name is the
	// deployment, apiVersion the api-version query (default
	// DefaultAzureAPIVersion), apiKey the api-key header.
	TypeAzureOpenAI = "azure-openai"
	// TypeGoogle is Gemini through its OpenAI-compatible endpoint
	// (baseURL default GoogleBaseURL), which supports tools and streaming
	// in the Chat Completions format; apiKey is a bearer token.
	TypeGoogle = "google"
)

// GoogleBaseURL is the default baseURL of a "google" provider.
const GoogleBaseURL = "https://generativelanguage.googleapis.com/v1beta/openai"

// DefaultAzureAPIVersion is the api-version of an "azure-openai" provider
// without apiVersion.
const DefaultAzureAPIVersion = "2024-10-21"

const knownTypes = TypeOpenAICompatible + ", " + TypeAzureOpenAI + ", " + TypeGoogle

// builtin names the built-in providers, which a stackbone.json entry may not
// redefine.
var builtin = map[string]bool{"openai": true, "anthropic": true, "ollama": true, "scripted": true}

// Custom is one provider configured in stackbone.json, with its ${NAME}
// references resolved.
type Custom struct {
	// Type is TypeOpenAICompatible, TypeAzureOpenAI or TypeGoogle.
	Type string
	// BaseURL includes the version path, e.g. "https://openrouter.ai/api/v1".
	BaseURL string
	// APIKey is sent as a bearer token (Azure: the api-key header).
	APIKey string
	// APIVersion is Azure's api-version query.
	APIVersion string
	// unset is the error of a ${NAME} reference set nowhere: it is reported
	// when an agent uses the provider, not when the file loads, so a project
	// can run without the key of a provider no agent uses.
	unset error
}

// FileError is a stackbone.json error: File is its path, Field the JSON path
// of the offending value ("providers.openrouter.baseURL"), empty when the
// file as a whole is at fault.
type FileError struct {
	File  string
	Field string
	Msg   string
}

// Error implements error.
func (e *FileError) Error() string {
	if e.Field == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + e.Field + ": " + e.Msg
}

type fileProvider struct {
	Type    *string `json:"type"`
	BaseURL *string `json:"baseURL"`
	APIKey  *string `json:"apiKey"`
	// APIVersion is for azure-openai only.
	APIVersion *string `json:"apiVersion"`
}

// LoadFile reads DIR/stackbone.json. A missing file is no providers. lookup
// resolves ${NAME} references in baseURL and apiKey (the caller reads the
// process environment first, then DIR/.env). Every problem is a *FileError
// naming the file and the field; all of them are returned, joined.
func LoadFile(dir string, lookup func(string) (string, bool)) (map[string]Custom, error) {
	path := filepath.Join(dir, ProjectFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Custom{}, nil
	}
	if err != nil {
		return nil, &FileError{File: path, Msg: err.Error()}
	}
	var raw struct {
		Providers map[string]json.RawMessage `json:"providers"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, &FileError{File: path, Msg: "not valid JSON: " + err.Error()}
	}
	names := make([]string, 0, len(raw.Providers))
	for n := range raw.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]Custom{}
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FileError{File: path, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	for _, name := range names {
		field := "providers." + name
		switch {
		case builtin[name]:
			fail(field, "%q is a built-in provider; choose another name", name)
			continue
		case name == "" || strings.ContainsAny(name, "/ \t"):
			fail(field, "a provider name must be non-empty without \"/\" or spaces")
			continue
		}
		var fp fileProvider
		dec := json.NewDecoder(bytes.NewReader(raw.Providers[name]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fp); err != nil {
			fail(field, "want {\"type\", \"baseURL\", \"apiKey\", \"apiVersion\"}: %v", err)
			continue
		}
		var c Custom
		switch {
		case fp.Type == nil || *fp.Type == "":
			fail(field+".type", "missing (known: %s)", knownTypes)
			continue
		case *fp.Type != TypeOpenAICompatible && *fp.Type != TypeAzureOpenAI && *fp.Type != TypeGoogle:
			fail(field+".type", "unknown type %q (known: %s)", *fp.Type, knownTypes)
			continue
		}
		c.Type = *fp.Type
		if fp.APIVersion != nil {
			if c.Type != TypeAzureOpenAI {
				fail(field+".apiVersion", "only for type %q", TypeAzureOpenAI)
				continue
			}
			c.APIVersion = *fp.APIVersion
		}
		if c.Type == TypeAzureOpenAI && c.APIVersion == "" {
			c.APIVersion = DefaultAzureAPIVersion
		}
		if c.Type == TypeGoogle && fp.BaseURL == nil {
			def := GoogleBaseURL
			fp.BaseURL = &def
		}
		if fp.BaseURL == nil || strings.TrimSpace(*fp.BaseURL) == "" {
			if c.Type == TypeAzureOpenAI {
				fail(field+".baseURL", "missing: the resource's URL, e.g. https://RESOURCE.openai.azure.com/openai")
			} else {
				fail(field+".baseURL", "missing: the endpoint's URL including its version path, e.g. https://openrouter.ai/api/v1")
			}
			continue
		}
		var unset string
		if c.BaseURL, unset = config.ExpandRefs(*fp.BaseURL, lookup); unset != "" {
			c.unset = &FileError{File: path, Field: field + ".baseURL", Msg: "${" + unset + "} is set neither in the environment nor in .env"}
		}
		if fp.APIKey != nil {
			if c.APIKey, unset = config.ExpandRefs(*fp.APIKey, lookup); unset != "" && c.unset == nil {
				c.unset = &FileError{File: path, Field: field + ".apiKey", Msg: "${" + unset + "} is set neither in the environment nor in .env"}
			}
		}
		out[name] = c
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
