package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
)

// Rows is the part of a query's result the shared scanners read;
// database/sql's *sql.Rows and pgx's Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CollectRows scans every row of rows with scan and returns the values in
// row order (nil when there are none). The first error of scan or of rows
// ends it with that error and no values. The caller closes rows.
func CollectRows[T any](rows Rows, scan func(Rows) (*T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ScanMessages decodes rows of (seq, v, json) columns into messages, Seq
// set from the seq column.
func ScanMessages(rows Rows) ([]message.Message, error) {
	return CollectRows(rows, func(r Rows) (*message.Message, error) {
		var (
			seq  int64
			v    int
			data []byte
		)
		if err := r.Scan(&seq, &v, &data); err != nil {
			return nil, err
		}
		m, err := DecodeMessage(v, data)
		if err != nil {
			return nil, err
		}
		m.Seq = seq
		return &m, nil
	})
}

// ScanEvents decodes rows of (seq, v, json) columns into events, Seq set
// from the seq column.
func ScanEvents(rows Rows) ([]event.Event, error) {
	return CollectRows(rows, func(r Rows) (*event.Event, error) {
		var (
			seq  int64
			v    int
			data []byte
		)
		if err := r.Scan(&seq, &v, &data); err != nil {
			return nil, err
		}
		e, err := DecodeEvent(v, data)
		if err != nil {
			return nil, err
		}
		e.Seq = seq
		return &e, nil
	})
}

// Migration is one numbered schema change of a driver, a file named
// NNNN_name.sql.
type Migration struct {
	// Version is the file's number, recorded in schema_version.
	Version int
	// Name is the file's name.
	Name string
	// SQL is the file's text.
	SQL string
}

// LoadMigrations returns the migrations dir/*.sql of fsys (a driver's
// embedded files) in version order. A file name that does not start with a
// positive number and _, two files with one version, or no file at all is
// an error.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, name := range names {
		base := strings.TrimPrefix(name, dir+"/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and _", base)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: base, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share a version", out[i-1].Name, out[i].Name)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("migrate: no migrations embedded")
	}
	return out, nil
}

// PendingMigrations returns the migrations of ms (in version order, as
// LoadMigrations returns them) whose versions are not among applied, the
// versions the database's schema_version records. Every missing version is
// pending, also one below the newest applied (a database that ran a build
// where a later migration landed first), so no migration is ever skipped. A
// database holding a version newer than the last of ms (written by a later
// release) is an error.
func PendingMigrations(ms []Migration, applied []int) ([]Migration, error) {
	done := make(map[int]bool, len(applied))
	newest := 0
	for _, v := range applied {
		done[v] = true
		newest = max(newest, v)
	}
	if len(ms) > 0 {
		if latest := ms[len(ms)-1].Version; newest > latest {
			return nil, fmt.Errorf("migrate: the database schema is version %d, newer than this build's %d", newest, latest)
		}
	}
	var out []Migration
	for _, m := range ms {
		if !done[m.Version] {
			out = append(out, m)
		}
	}
	return out, nil
}
