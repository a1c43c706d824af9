package app

import (
	"context"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/model"
)

// watchAgents starts reloading the agents when a file under DIR/agents or
// DIR/.env changes; the folders are watched when it returns. A broken edit keeps the
// last good agents and logs the error.
func watchAgents(ctx context.Context, cfg *config.Config, reg *agent.Registry, runner *engine.Runner, models model.Resolver, logger *slog.Logger) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Warn("agent reload disabled", "err", err)
		return
	}
	// DIR itself is watched for .env (editors replace files by renaming
	// them); its other entries are ignored.
	_ = w.Add(cfg.Dir)
	root := filepath.Join(cfg.Dir, "agents")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			_ = w.Add(p)
		}
		return nil
	})
	go reloadLoop(ctx, w, cfg, reg, runner, models, logger)
}

func reloadLoop(ctx context.Context, w *fsnotify.Watcher, cfg *config.Config, reg *agent.Registry, runner *engine.Runner, models model.Resolver, logger *slog.Logger) {
	defer w.Close()
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-w.Events:
			if filepath.Dir(ev.Name) == cfg.Dir && filepath.Base(ev.Name) != config.DotEnvFile {
				continue
			}
			if ev.Op&fsnotify.Create != 0 {
				_ = w.Add(ev.Name) // a new folder; harmless for files
			}
			timer = time.After(150 * time.Millisecond)
		case err := <-w.Errors:
			logger.Warn("agent watcher", "err", err)
		case <-timer:
			specs, err := LoadAgents(ctx, cfg, models, logger)
			if err != nil {
				logger.Error("agent reload failed; keeping the last good agents", "err", err)
				continue
			}
			old := reg.Replace(specs)
			var names []string
			for _, s := range specs {
				names = append(names, s.Name)
			}
			logger.Info("agents reloaded", "agents", names)
			syncSchedulesAfter(ctx, cfg, runner.Store, specs, logger)
			// The old runtimes close as soon as the runs using them end.
			runner.Retire(old)
		}
	}
}
