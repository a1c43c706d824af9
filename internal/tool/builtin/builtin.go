// Package builtin holds the deep-agent built-in tools that work on shared
// state: write_todos (state key "todos") and a virtual file system (state key
// "files": ls, read_file, write_file, edit_file). The `task` tool, which runs
// subagents, lives in the engine because it runs the agent loop.
package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/tool"
)

// Names of the built-in tools; a user tool may not take one.
const (
	WriteTodos = "write_todos"
	Ls         = "ls"
	ReadFile   = "read_file"
	WriteFile  = "write_file"
	EditFile   = "edit_file"
	Task       = "task"
)

// Todo is one item of the todo list.
type Todo struct {
	Content string `json:"content"`
	Status  string `json:"status"`
	// Done is true exactly when Status is "completed", so a UI can patch
	// /todos/0/done.
	Done bool `json:"done"`
}

// File is one file of the virtual file system.
type File struct {
	Content    string `json:"content"`
	ModifiedAt string `json:"modifiedAt"`
}

// state reads and writes the top-level keys of a state object.
type state map[string]json.RawMessage

func loadState(raw json.RawMessage) (state, error) {
	st := state{}
	if len(raw) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("state is not an object: %w", err)
	}
	return st, nil
}

func (st state) files() (map[string]File, error) {
	fs := map[string]File{}
	if raw, ok := st["files"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &fs); err != nil {
			return nil, errors.New("state key files is not a map of files")
		}
	}
	return fs, nil
}

func (st state) with(key string, v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	st[key] = b
	return json.Marshal(st)
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// Todos returns write_todos.
func Todos() *tool.Tool {
	return &tool.Tool{
		Name: WriteTodos,
		Description: "Replace the todo list of this task. Send the whole list every time; statuses are pending, " +
			"in_progress and completed. Call it at most once per step.",
		Parameters: schema(`{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object",` +
			`"properties":{"content":{"type":"string","minLength":1},"status":{"type":"string","enum":["pending","in_progress","completed"]}},` +
			`"required":["content","status"]}}},"required":["todos"]}`),
		OncePerStep: true,
		// A pure state change, stored together with its result: safe to
		// run again after a crash.
		Idempotent: true,
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			var args struct {
				Todos []Todo `json:"todos"`
			}
			if err := json.Unmarshal(c.Args, &args); err != nil {
				return tool.Result{}, err
			}
			for i := range args.Todos {
				args.Todos[i].Done = args.Todos[i].Status == "completed"
			}
			if args.Todos == nil {
				args.Todos = []Todo{}
			}
			st, err := loadState(c.State)
			if err != nil {
				return tool.Result{}, err
			}
			newState, err := st.with("todos", args.Todos)
			if err != nil {
				return tool.Result{}, err
			}
			done := 0
			for _, t := range args.Todos {
				if t.Done {
					done++
				}
			}
			return tool.Result{Content: fmt.Sprintf("Updated the todo list: %d items, %d completed.", len(args.Todos), done), State: newState}, nil
		},
	}
}

// Files returns ls, read_file, write_file and edit_file. now stamps
// modifiedAt.
func Files(now func() time.Time) []*tool.Tool {
	if now == nil {
		now = time.Now
	}
	stamp := func() string { return now().UTC().Format(time.RFC3339Nano) }
	return []*tool.Tool{
		{
			Name:        Ls,
			Idempotent:  true, // reads or changes state only, stored with the result
			Description: "List the files in the virtual file system under a folder (default /).",
			Parameters:  schema(`{"type":"object","properties":{"path":{"type":"string"}}}`),
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				var a struct {
					Path string `json:"path"`
				}
				_ = json.Unmarshal(c.Args, &a)
				dir := a.Path
				if dir == "" {
					dir = "/"
				}
				if err := checkPath(dir); err != nil {
					return tool.Result{}, err
				}
				st, err := loadState(c.State)
				if err != nil {
					return tool.Result{}, err
				}
				fs, err := st.files()
				if err != nil {
					return tool.Result{}, err
				}
				prefix := strings.TrimSuffix(dir, "/") + "/"
				var names []string
				for p := range fs {
					if strings.HasPrefix(p, prefix) || p == dir {
						names = append(names, p)
					}
				}
				sort.Strings(names)
				b, _ := json.Marshal(names)
				if names == nil {
					b = []byte("[]")
				}
				return tool.Result{Content: string(b)}, nil
			},
		},
		{
			Name:        ReadFile,
			Idempotent:  true, // reads or changes state only, stored with the result
			Description: "Read a file of the virtual file system, with line numbers. offset is the first line (0-based), limit the number of lines (default 200).",
			Parameters: schema(`{"type":"object","properties":{"file_path":{"type":"string"},"offset":{"type":"integer","minimum":0},` +
				`"limit":{"type":"integer","minimum":1}},"required":["file_path"]}`),
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				var a struct {
					FilePath string `json:"file_path"`
					Offset   int    `json:"offset"`
					Limit    *int   `json:"limit"`
				}
				if err := json.Unmarshal(c.Args, &a); err != nil {
					return tool.Result{}, err
				}
				f, err := lookup(c.State, a.FilePath)
				if err != nil {
					return tool.Result{}, err
				}
				limit := 200
				if a.Limit != nil {
					limit = *a.Limit
				}
				if f.Content == "" {
					return tool.Result{Content: "(empty file)"}, nil
				}
				lines := strings.Split(f.Content, "\n")
				if a.Offset >= len(lines) {
					return tool.Result{}, fmt.Errorf("offset %d is past the end of %s (%d lines)", a.Offset, a.FilePath, len(lines))
				}
				end := min(a.Offset+limit, len(lines))
				var b strings.Builder
				for i := a.Offset; i < end; i++ {
					fmt.Fprintf(&b, "%6d\t%s\n", i+1, lines[i])
				}
				return tool.Result{Content: strings.TrimSuffix(b.String(), "\n")}, nil
			},
		},
		{
			Name:        WriteFile,
			Idempotent:  true, // reads or changes state only, stored with the result
			Description: "Write a file of the virtual file system (creates or replaces it). Paths are absolute.",
			Parameters:  schema(`{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}`),
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				var a struct {
					FilePath string `json:"file_path"`
					Content  string `json:"content"`
				}
				if err := json.Unmarshal(c.Args, &a); err != nil {
					return tool.Result{}, err
				}
				if err := checkPath(a.FilePath); err != nil {
					return tool.Result{}, err
				}
				st, err := loadState(c.State)
				if err != nil {
					return tool.Result{}, err
				}
				fs, err := st.files()
				if err != nil {
					return tool.Result{}, err
				}
				fs[a.FilePath] = File{Content: a.Content, ModifiedAt: stamp()}
				newState, err := st.with("files", fs)
				if err != nil {
					return tool.Result{}, err
				}
				return tool.Result{Content: fmt.Sprintf("Wrote %s (%d bytes).", a.FilePath, len(a.Content)), State: newState}, nil
			},
		},
		{
			Name:        EditFile,
			Idempotent:  true, // reads or changes state only, stored with the result
			Description: "Replace old_string with new_string in a file. old_string must occur exactly once unless replace_all is true.",
			Parameters: schema(`{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string","minLength":1},` +
				`"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["file_path","old_string","new_string"]}`),
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				var a struct {
					FilePath   string `json:"file_path"`
					OldString  string `json:"old_string"`
					NewString  string `json:"new_string"`
					ReplaceAll bool   `json:"replace_all"`
				}
				if err := json.Unmarshal(c.Args, &a); err != nil {
					return tool.Result{}, err
				}
				f, err := lookup(c.State, a.FilePath)
				if err != nil {
					return tool.Result{}, err
				}
				n := strings.Count(f.Content, a.OldString)
				switch {
				case n == 0:
					return tool.Result{}, fmt.Errorf("old_string was not found in %s", a.FilePath)
				case n > 1 && !a.ReplaceAll:
					return tool.Result{}, fmt.Errorf("old_string occurs %d times in %s; give more context so it is unique, or set replace_all", n, a.FilePath)
				}
				if a.ReplaceAll {
					f.Content = strings.ReplaceAll(f.Content, a.OldString, a.NewString)
				} else {
					f.Content = strings.Replace(f.Content, a.OldString, a.NewString, 1)
				}
				f.ModifiedAt = stamp()
				st, _ := loadState(c.State)
				fs, _ := st.files()
				fs[a.FilePath] = f
				newState, err := st.with("files", fs)
				if err != nil {
					return tool.Result{}, err
				}
				return tool.Result{Content: fmt.Sprintf("Edited %s (%d replacement(s)).", a.FilePath, map[bool]int{true: n, false: 1}[a.ReplaceAll]), State: newState}, nil
			},
		},
	}
}

func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q must be absolute (start with /)", p)
	}
	if path.Clean(p) != p && p != "/" {
		return fmt.Errorf("path %q is not clean; use %q", p, path.Clean(p))
	}
	return nil
}

func lookup(raw json.RawMessage, p string) (File, error) {
	if err := checkPath(p); err != nil {
		return File{}, err
	}
	st, err := loadState(raw)
	if err != nil {
		return File{}, err
	}
	fs, err := st.files()
	if err != nil {
		return File{}, err
	}
	f, ok := fs[p]
	if !ok {
		return File{}, fmt.Errorf("file %s does not exist", p)
	}
	return f, nil
}
