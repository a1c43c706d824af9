// Command vendorgen writes Studio's one vendored JavaScript module,
// internal/studio/web/vendor/agui-client.js: the official @ag-ui/client
// (with its dependencies: @ag-ui/core, rxjs, zod, fast-json-patch, …)
// bundled by esbuild into a single minified ES module, so Studio's chat
// playground speaks AG-UI through the protocol's own client while the
// binary still needs no Node.js to build or run.
//
// The package comes from tests/agui/node_modules (npm ci there pins it with
// tests/agui/package-lock.json). Run from the repository root:
//
//	(cd tests/agui && npm ci --no-audit --no-fund)
//	go run ./internal/studio/vendorgen
//
// The test of this package rebuilds the bundle and fails when it differs
// from the committed file.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// Out is the bundle's path from the repository root.
const Out = "internal/studio/web/vendor/agui-client.js"

// pkgDir is where the bundled packages are installed, from the root.
const pkgDir = "tests/agui"

// entry is what the page imports: the client and the helpers it uses.
const entry = `export { HttpAgent, buildResumeArray, isInterruptExpired, randomUUID } from '@ag-ui/client';
`

func main() {
	root, err := os.Getwd()
	if err == nil {
		root, err = repoRoot(root)
	}
	if err == nil {
		var b []byte
		if b, err = Bundle(root); err == nil {
			err = os.WriteFile(filepath.Join(root, Out), b, 0o644)
			if err == nil {
				fmt.Printf("wrote %s (%d bytes)\n", Out, len(b))
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vendorgen:", err)
		os.Exit(1)
	}
}

// repoRoot walks up from dir to the folder holding go.mod.
func repoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + dir)
		}
	}
}

// ErrNotInstalled is returned when tests/agui has no node_modules.
var ErrNotInstalled = errors.New("@ag-ui/client is not installed: run npm ci --no-audit --no-fund in " + pkgDir)

// trim replaces two modules the page never runs with small stand-ins,
// which takes the bundle from about 470 kB to about 230 kB:
//   - @ag-ui/proto, the protobuf transport: HttpAgent always asks for
//     text/event-stream and Stackbone answers SSE only, so the client
//     never decodes protobuf (the stand-in throws if it ever had to);
//   - zod's translated error messages (zod/v4/locales/index.js, every
//     language but English, which zod imports on its own): the client's
//     schema checks report in English.
var trim = api.Plugin{
	Name: "stackbone-trim",
	Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: `^@ag-ui/proto$`}, func(api.OnResolveArgs) (api.OnResolveResult, error) {
			return api.OnResolveResult{Path: "proto", Namespace: "stackbone-stub"}, nil
		})
		b.OnResolve(api.OnResolveOptions{Filter: `locales/index\.js$`}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
			if !strings.Contains(filepath.ToSlash(a.Importer), "/zod/") {
				return api.OnResolveResult{}, nil
			}
			return api.OnResolveResult{Path: "zod-locales", Namespace: "stackbone-stub"}, nil
		})
		b.OnLoad(api.OnLoadOptions{Filter: `.*`, Namespace: "stackbone-stub"}, func(a api.OnLoadArgs) (api.OnLoadResult, error) {
			src := stubs[a.Path]
			return api.OnLoadResult{Contents: &src, Loader: api.LoaderJS}, nil
		})
	},
}

var stubs = map[string]string{
	"proto": `export const AGUI_MEDIA_TYPE = "application/vnd.ag-ui.event+proto";
export class AGUIUnknownEventTypeError extends Error {}
export function decode() { throw new Error("Stackbone Studio reads AG-UI over SSE only; the server answered in protobuf."); }
`,
	"zod-locales": "export {};\n",
}

// Bundle builds the module from the packages under root/tests/agui.
func Bundle(root string) ([]byte, error) {
	dir := filepath.Join(root, pkgDir)
	pj, err := os.ReadFile(filepath.Join(dir, "node_modules", "@ag-ui", "client", "package.json"))
	if err != nil {
		return nil, ErrNotInstalled
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(pj, &meta); err != nil {
		return nil, fmt.Errorf("@ag-ui/client package.json: %w", err)
	}
	res := api.Build(api.BuildOptions{
		Stdin: &api.StdinOptions{
			Contents:   entry,
			ResolveDir: dir,
			Sourcefile: "agui-client-entry.js",
			Loader:     api.LoaderJS,
		},
		AbsWorkingDir:     dir,
		Bundle:            true,
		Write:             false,
		Format:            api.FormatESModule,
		Platform:          api.PlatformBrowser,
		Target:            api.ES2022,
		MinifyWhitespace:  true,
		MinifyIdentifiers: true,
		MinifySyntax:      true,
		TreeShaking:       api.TreeShakingTrue,
		LegalComments:     api.LegalCommentsEndOfFile,
		Charset:           api.CharsetUTF8,
		LogLevel:          api.LogLevelSilent,
		Define:            map[string]string{"process.env.NODE_ENV": `"production"`},
		Plugins:           []api.Plugin{trim},
		Banner: map[string]string{"js": "// @ag-ui/client " + meta.Version +
			" (MIT) and its dependencies, bundled for Stackbone Studio by internal/studio/vendorgen. Do not edit: regenerate."},
	})
	if len(res.Errors) > 0 {
		var msgs []string
		for _, m := range res.Errors {
			msgs = append(msgs, m.Text)
		}
		return nil, errors.New("esbuild: " + strings.Join(msgs, "; "))
	}
	if len(res.OutputFiles) != 1 {
		return nil, fmt.Errorf("esbuild wrote %d files, want 1", len(res.OutputFiles))
	}
	out := res.OutputFiles[0].Contents
	// The page is served from the binary: no source map to point at.
	out = bytes.TrimRight(out, "\n")
	return append(out, '\n'), nil
}
