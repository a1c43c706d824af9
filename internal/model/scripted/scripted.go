// Package scripted is the provider for tests and the offline demo: a
// model.Provider that answers from a script (see package script) in-process,
// without any network.
//
// The model reference "scripted/NAME" in an agent file reads the script
// <agentDir>/NAME.script.json, where agentDir is the folder of the agent
// file. The file is read again when it changes, so a script can be edited
// while the server runs.
package scripted

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
)

// FileSuffix is appended to NAME to find the script of "scripted/NAME".
const FileSuffix = ".script.json"

// ErrBadName is returned for a script name that is not a plain file stem.
var ErrBadName = errors.New("scripted model name must be a plain name (no path)")

// Provider answers model requests from a script.
type Provider struct {
	path string // empty for a fixed script

	mu      sync.Mutex
	script  *script.Script
	modTime time.Time
	size    int64
}

var (
	_ model.Provider       = (*Provider)(nil)
	_ model.FormatHonourer = (*Provider)(nil)
)

// HonoursFormat accepts both response formats: the script's reply text is
// returned as written, and the engine checks the final answer against the
// format (a script that answers prose under a format fails the turn).
func (p *Provider) HonoursFormat(f model.ResponseFormat) bool {
	return f.Known()
}

// New returns a provider over a fixed, already parsed script.
func New(s *script.Script) *Provider {
	return &Provider{script: s}
}

// Path returns the script file of "scripted/name" for an agent in agentDir.
func Path(agentDir, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("%w: %q", ErrBadName, name)
	}
	return filepath.Join(agentDir, name+FileSuffix), nil
}

// Open returns a provider for "scripted/name" of an agent in agentDir: it
// reads <agentDir>/<name>.script.json now (failing if it is missing or
// invalid) and again whenever the file changes.
func Open(agentDir, name string) (*Provider, error) {
	path, err := Path(agentDir, name)
	if err != nil {
		return nil, err
	}
	p := &Provider{path: path}
	if _, err := p.current(); err != nil {
		return nil, err
	}
	return p, nil
}

// current returns the script, re-reading the file if it changed. A file
// that became invalid keeps the last good script and reports the error.
func (p *Provider) current() (*script.Script, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.path == "" {
		return p.script, nil
	}
	fi, err := os.Stat(p.path)
	if err != nil {
		return nil, fmt.Errorf("model script: %w", err)
	}
	if p.script != nil && fi.ModTime().Equal(p.modTime) && fi.Size() == p.size {
		return p.script, nil
	}
	s, err := script.Load(p.path)
	if err != nil {
		return nil, err
	}
	p.script, p.modTime, p.size = s, fi.ModTime(), fi.Size()
	return s, nil
}

// Stream answers one step: the matching rule's reasoning as one Reasoning
// chunk, its text as a few Text chunks,
// then its tool calls (arguments in fragments), then Finish. A rule with an
// error answers with a *model.Error of that status; no rule matching is a
// *model.Error with status 400 wrapping script.ErrNoMatch.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		s, err := p.current()
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		r, err := s.Reply(req)
		if err != nil {
			yield(model.Chunk{}, &model.Error{Status: 400, Message: err.Error(), Err: err})
			return
		}
		if err := wait(ctx, r.Delay); err != nil {
			yield(model.Chunk{}, err)
			return
		}
		if r.Error != nil {
			yield(model.Chunk{}, &model.Error{Status: r.Error.Status, Message: r.Error.Message})
			return
		}
		first := true
		send := func(c model.Chunk) bool {
			if !first {
				if err := wait(ctx, r.ChunkDelay); err != nil {
					yield(model.Chunk{}, err)
					return false
				}
			}
			first = false
			return yield(c, nil)
		}
		if r.Reasoning != "" {
			// Yielded at once before the answer, as a provider yields a
			// finished block.
			if !send(model.Chunk{Type: model.Reasoning, Reasoning: &message.Reasoning{Type: message.ReasoningText, Text: r.Reasoning}}) {
				return
			}
		}
		for _, t := range r.Chunks {
			if !send(model.Chunk{Type: model.Text, Text: t}) {
				return
			}
		}
		for i, tc := range r.ToolCalls {
			if !send(model.Chunk{Type: model.ToolCallStart, Index: i, ID: tc.ID, Name: tc.Name}) {
				return
			}
			for _, frag := range script.SplitArgs(tc.Arguments) {
				if !send(model.Chunk{Type: model.ToolCallArgs, Index: i, Text: frag}) {
					return
				}
			}
		}
		yield(model.Chunk{Type: model.Finish, Stop: r.Stop, Usage: r.Usage}, nil)
	}
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
