package tsload

import (
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
)

//go:embed js/stackbone.js
var stackboneModule string

//go:embed js/prelude.js
var preludeSource string

// preludeName is the goja program name of the prelude; frames from it (and
// from the virtual module, "stackbone:...") are not user code.
const preludeName = "stackbone:prelude"

var preludeProgram = goja.MustCompile(preludeName, preludeSource, true)

// gojaUnsupported tells esbuild which ESNext features goja lacks, so it lowers
// them (or, for regexp features, turns literals into RegExp calls).
var gojaUnsupported = map[string]bool{
	"async-generator":                 false,
	"for-await":                       false,
	"top-level-await":                 false,
	"dynamic-import":                  false,
	"import-meta":                     false,
	"using":                           false,
	"decorators":                      false,
	"regexp-unicode-property-escapes": false,
	"regexp-match-indices":            false,
	"regexp-set-notation":             false,
}

var stackbonePlugin = api.Plugin{
	Name: "stackbone-virtual",
	Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: `^stackbone$`},
			func(api.OnResolveArgs) (api.OnResolveResult, error) {
				return api.OnResolveResult{Path: "stackbone", Namespace: "stackbone"}, nil
			})
		b.OnLoad(api.OnLoadOptions{Filter: `.*`, Namespace: "stackbone"},
			func(api.OnLoadArgs) (api.OnLoadResult, error) {
				return api.OnLoadResult{Contents: &stackboneModule, Loader: api.LoaderJS}, nil
			})
	},
}

// bundle is one agent file, bundled and compiled.
type bundle struct {
	abs  string // entry file, absolute
	rel  string // entry file relative to the project folder, forward slashes
	prog *goja.Program
	size int
}

// build bundles the entry files in one esbuild run and compiles each output
// for goja. Errors come back as *LoadError values joined together.
func build(root string, files []string, log *slog.Logger) ([]*bundle, error) {
	start := time.Now()
	outdir := filepath.Dir(files[0])
	for _, f := range files[1:] {
		if filepath.Dir(f) != outdir {
			// Different folders: build them one by one so that every output
			// sits next to its entry (goja resolves source map paths
			// relative to the program name).
			var out []*bundle
			var errs []error
			for _, f := range files {
				b, err := build(root, []string{f}, log)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				out = append(out, b...)
			}
			return out, errors.Join(errs...)
		}
	}
	res := api.Build(api.BuildOptions{
		EntryPoints:    files,
		AbsWorkingDir:  root,
		Outdir:         outdir,
		Bundle:         true,
		Write:          false,
		Format:         api.FormatIIFE,
		GlobalName:     "__agent",
		Platform:       api.PlatformNeutral,
		MainFields:     []string{"module", "main"},
		Target:         api.ESNext,
		Supported:      gojaUnsupported,
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
		LogLevel:       api.LogLevelSilent,
		Define:         map[string]string{"process.env.NODE_ENV": `"production"`},
		Plugins:        []api.Plugin{stackbonePlugin},
	})
	if len(res.Errors) > 0 {
		errs := make([]error, 0, len(res.Errors))
		for _, m := range res.Errors {
			errs = append(errs, esbuildError(root, files, m))
		}
		return nil, errors.Join(errs...)
	}
	for _, w := range res.Warnings {
		log.Warn("agent bundle warning", "msg", esbuildError(root, files, w).Error())
	}
	byOut := make(map[string]api.OutputFile, len(res.OutputFiles))
	for _, o := range res.OutputFiles {
		byOut[o.Path] = o
	}
	out := make([]*bundle, 0, len(files))
	var errs []error
	for _, f := range files {
		rel := relPath(root, f)
		o, ok := byOut[strings.TrimSuffix(f, filepath.Ext(f))+".js"]
		if !ok {
			errs = append(errs, &LoadError{File: rel, Message: "esbuild produced no output for this file"})
			continue
		}
		js := string(o.Contents)
		if n := countPropertyEscapes(js); n > 0 {
			log.Warn("agent bundle uses regexp Unicode property escapes (\\p{...}), which never match in the JS engine",
				"file", rel, "occurrences", n)
		}
		// The program name sits next to the entry (as "agents/x.js") so that
		// the source map's relative sources resolve to "agents/x.ts".
		name := strings.TrimSuffix(rel, filepath.Ext(rel)) + ".js"
		prog, err := goja.Compile(name, js, false)
		if err != nil {
			errs = append(errs, &LoadError{File: rel, Message: "cannot compile bundle: " + err.Error()})
			continue
		}
		out = append(out, &bundle{abs: f, rel: rel, prog: prog, size: len(js)})
	}
	log.Debug("bundled agents", "files", len(files), "took", time.Since(start))
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// esbuildError turns an esbuild message into a *LoadError with a path
// relative to the project folder and a 1-based column.
func esbuildError(root string, files []string, m api.Message) *LoadError {
	e := &LoadError{Message: m.Text}
	if m.Location == nil {
		if len(files) == 1 {
			e.File = relPath(root, files[0])
		} else {
			e.File = "agents"
		}
		return e
	}
	l := m.Location
	f := l.File
	if filepath.IsAbs(f) {
		f = relPath(root, f)
	}
	e.File = filepath.ToSlash(f)
	e.Line = l.Line
	col := l.Column
	if col <= len(l.LineText) {
		col = utf8.RuneCountInString(l.LineText[:col])
	}
	e.Col = col + 1
	return e
}

func relPath(root, f string) string {
	r, err := filepath.Rel(root, f)
	if err != nil {
		return filepath.ToSlash(f)
	}
	return filepath.ToSlash(r)
}

// countPropertyEscapes counts \p{ and \P{ in a bundle, not counting the
// inline source map.
func countPropertyEscapes(js string) int {
	if i := strings.LastIndex(js, "//# sourceMappingURL="); i >= 0 {
		js = js[:i]
	}
	return strings.Count(js, `\p{`) + strings.Count(js, `\P{`)
}

func (b *bundle) String() string { return fmt.Sprintf("%s (%d bytes)", b.rel, b.size) }
