package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/sqllog"
	"github.com/vouchml/vouch/server"
	"github.com/vouchml/vouch/stream"
)

// exportDir holds the exporters' cursor files, beside the log.
func exportDir(auditDir string) string { return filepath.Join(auditDir, "export") }

// startExporters starts one exporter per --export target over the
// server's log, their metrics added to so. The returned stop function
// ends them (each has persisted its cursor after its last acknowledged
// batch, so the next start resumes there).
func (m *Main) startExporters(ctx context.Context, targets []string, dataDir string, so *server.Options, logger *slog.Logger) (func(), error) {
	if len(targets) == 0 {
		return func() {}, nil
	}
	var src stream.Source
	var origin, dir string
	switch l := so.Appender.(type) {
	case *audit.Log:
		src, dir = l, exportDir(l.Dir())
		if cp, err := l.Checkpoint(); err == nil {
			origin = cp.Origin
		}
	case *sqllog.Log:
		// The replicas share the log; each keeps its own cursor in its
		// data directory (every replica exports the whole log: receivers
		// deduplicate on the log index).
		src, dir = l, exportDir(auditDir(dataDir))
		if cp, err := l.Checkpoint(ctx); err == nil {
			origin = cp.Origin
		}
	default:
		return nil, fmt.Errorf("%w: --export streams the transparency log: it needs --audit on or --audit-db (not --audit-log or --audit=off)", ErrUsage)
	}
	exps, err := newExporters(ctx, src, origin, dir, targets, ".cursor", logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, e := range exps {
		so.Collectors = append(so.Collectors, e.exp.Collectors()...)
		wg.Add(1)
		go func() { defer wg.Done(); e.exp.Run(ctx) }()
		fmt.Fprintf(m.Stderr, "export  %s from log index %d (cursor %s)\n", e.target, e.exp.Cursor(), e.cursor)
	}
	return func() {
		cancel()
		wg.Wait()
		for _, e := range exps {
			e.sink.Close()
		}
	}, nil
}

type exporter struct {
	target, cursor string
	sink           stream.Sink
	exp            *stream.Exporter
}

// newExporters opens a sink and an exporter per target, cursors under the
// log's export directory.
// suffix names the cursor files: a backfill keeps its own, so that it
// never moves the cursor of a serving process's exporter to the same target.
func newExporters(ctx context.Context, l stream.Source, origin, dir string, targets []string, suffix string, logger *slog.Logger) ([]*exporter, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var out []*exporter
	names := map[string]bool{}
	for _, t := range targets {
		name := stream.Name(t)
		if names[name] {
			return nil, fmt.Errorf("%w: --export %s given twice", ErrUsage, t)
		}
		names[name] = true
		sink, err := stream.Open(ctx, t, origin)
		if err != nil {
			return nil, err
		}
		cursor := filepath.Join(dir, name+suffix)
		exp, err := stream.New(l, sink, stream.Options{Name: name, CursorPath: cursor, Logger: logger})
		if err != nil {
			sink.Close()
			return nil, err
		}
		out = append(out, &exporter{target: t, cursor: cursor, sink: sink, exp: exp})
	}
	return out, nil
}

// backfill delivers a log directory's entries to target from its cursor
// (or from the start) up to the latest checkpoint, then returns: `vouch
// audit export --to`. The log is opened read-only, so this runs beside a
// serving process.
func (m *Main) backfill(ctx context.Context, dir, target string) error {
	l, err := audit.Open(ctx, dir, audit.Options{NoIndex: true})
	if err != nil {
		return err
	}
	defer l.Close(context.Background())
	cp, err := l.Checkpoint()
	if err != nil {
		return err
	}
	exps, err := newExporters(ctx, l, cp.Origin, exportDir(l.Dir()), []string{target}, ".backfill.cursor", slog.New(slog.NewTextHandler(m.Stderr, nil)))
	if err != nil {
		return err
	}
	e := exps[0]
	defer e.sink.Close()
	from := e.exp.Cursor()
	if from >= cp.Size {
		fmt.Fprintf(m.Stdout, "%s: up to date at log index %d (checkpoint size %d)\n", target, from, cp.Size)
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.exp.Run(rctx) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for e.exp.Cursor() < cp.Size {
		select {
		case <-ctx.Done():
			cancel()
			<-done
			return fmt.Errorf("interrupted at log index %d of %d (resume with the same command): %w", e.exp.Cursor(), cp.Size, ctx.Err())
		case <-tick.C:
			msg := ""
			if err := e.exp.Err(); err != nil {
				msg = " (retrying: " + err.Error() + ")"
			}
			fmt.Fprintf(m.Stderr, "%s: %d of %d%s\n", target, e.exp.Cursor(), cp.Size, msg)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	<-done
	fmt.Fprintf(m.Stdout, "%s: delivered log indexes %d to %d (checkpoint size %d)\n", target, from, cp.Size-1, cp.Size)
	return nil
}
