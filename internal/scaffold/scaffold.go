// Package scaffold writes a new Stackbone project (`stackbone init`): an
// offline agent on the scripted model, its script, a tsconfig.json wired to
// the embedded 'stackbone' type declarations, .env.example, .gitignore and
// a minimal stackbone.json.
package scaffold

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stackbone/stackbone/types"
)

//go:embed template
var template embed.FS

// dotted maps template names to the names written: files whose name starts
// with a dot would act on this repository (.gitignore) or be left out of
// the embed, so the template stores them without it.
var dotted = map[string]string{"gitignore": ".gitignore", "env.example": ".env.example"}

// ExistsError is returned by Write when files it would write exist and
// force is false; nothing was written.
type ExistsError struct {
	// Paths are the existing files, relative to the project folder, sorted.
	Paths []string
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("these files exist, nothing was written (--force overwrites them): %s", strings.Join(e.Paths, ", "))
}

// Files returns the project's files by slash-separated path relative to the
// project folder.
func Files() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(template, "template", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := template.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "template/")
		if n, ok := dotted[path.Base(rel)]; ok {
			rel = path.Join(path.Dir(rel), n)
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(types.Stackbone, "stackbone", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := types.Stackbone.ReadFile(p)
		if err != nil {
			return err
		}
		files["types/"+p] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// Write writes the project into dir (created if missing) and returns the
// paths it wrote, sorted. Unless force is set it writes nothing when one of
// the files exists, and returns an *ExistsError naming them.
func Write(dir string, force bool) ([]string, error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if !force {
		var exist []string
		for _, n := range names {
			if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(n))); err == nil {
				exist = append(exist, n)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		if len(exist) > 0 {
			return nil, &ExistsError{Paths: exist}
		}
	}
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}
