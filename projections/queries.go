package projections

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// queryFiles holds the analysts' example queries that docs/projections.md
// shows, each run by a test. They name tables unqualified: run them with
// search_path set to the read models' schema.
//
//go:embed queries/*.sql
var queryFiles embed.FS

// ExampleQuery is one documented analyst query.
type ExampleQuery struct {
	Name string // the file name without .sql, e.g. "stuck_unknown"
	SQL  string
}

// ExampleQueries returns the documented analyst queries, by name.
func ExampleQueries() ([]ExampleQuery, error) {
	entries, err := fs.ReadDir(queryFiles, "queries")
	if err != nil {
		return nil, fmt.Errorf("read embedded queries: %w", err)
	}
	out := make([]ExampleQuery, 0, len(entries))
	for _, e := range entries {
		body, err := queryFiles.ReadFile(path.Join("queries", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read embedded query %s: %w", e.Name(), err)
		}
		out = append(out, ExampleQuery{Name: strings.TrimSuffix(e.Name(), ".sql"), SQL: string(body)})
	}
	return out, nil
}
