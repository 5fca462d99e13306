package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// domain/ stays free of drivers: no database, HTTP, Kafka, gRPC or KurrentDB
// client, and of OpenTelemetry only the API (trace, attribute, codes), never
// the SDK or an exporter.
func TestDomainImportsNoDriver(t *testing.T) {
	t.Parallel()
	forbidden := []string{
		"github.com/jackc/", "database/sql", "net/http", "github.com/segmentio/kafka-go", "github.com/twmb/franz-go",
		"google.golang.org/grpc", "github.com/EventStore/", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters",
		"opledger/adapters", "opledger/cmd", "opledger/eventstore/postgres", "opledger/eventstore/kurrent", "opledger/projections",
	}
	var found []string
	err := filepath.WalkDir("../../domain", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if strings.HasPrefix(p, bad) {
					found = append(found, path+" imports "+p)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found)
}

// The Go client (client/) is a public package for other teams' workers: it
// imports the standard library only, so that it pins its users to nothing
// of opledger's internals (the wire is its contract); its example imports
// the client and the standard library.
func TestClientImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	var found []string
	err := filepath.WalkDir("../../client", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if strings.Contains(first, ".") || (first == "opledger" && p != "opledger/client") {
				found = append(found, path+" imports "+p)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found)
}

// Nothing below cmd imports cmd: adapters, their tests and the tools
// depend on the ports and the adapters, and the CLI composes them. The test
// world (adapters/harness) and serve's roles (adapters/roles) live among
// the adapters for that reason.
func TestNothingBelowCmdImportsCmd(t *testing.T) {
	t.Parallel()
	var found []string
	for _, dir := range []string{"../../adapters", "../../domain", "../../eventstore", "../../projections", "../../scripts", "../../client", "../../inbox"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "opledger/cmd/") {
					found = append(found, path+" imports "+p)
				}
			}
			return nil
		})
		if !os.IsNotExist(err) {
			require.NoError(t, err)
		}
	}
	require.Empty(t, found)
}

// The pure model (package domain, every build tag) imports nothing of ours:
// the roles around it import it, never the other way. Its planted bugs are
// its own (domain/planted.go).
func TestPureModelImportsNothingOfOurs(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../domain/*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var found []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue // the model's tests may use the roles and a store
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "opledger/") {
				found = append(found, path+" imports "+p)
			}
		}
	}
	require.Empty(t, found)
}
