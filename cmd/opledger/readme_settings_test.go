package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/cmd/opledger/internal/settings"
)

// readmeRow is one row of README.md's configuration table.
type readmeRow struct {
	line                    int
	env, flag, def, meaning string
	flagIn                  map[string]string
}

var (
	backquoted = regexp.MustCompile("`([^`]*)`")
	flagInPart = regexp.MustCompile("`([a-z -]+)`: `--([a-z-]+)`")
)

// readmeSettings parses the table under "## Configuration".
func readmeSettings(t *testing.T) []readmeRow {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "\n## Configuration\n")
	require.Positive(t, start, "README.md has a Configuration section")
	lineNo := strings.Count(text[:start], "\n") + 1
	var rows []readmeRow
	inTable := false
	for _, line := range strings.Split(text[start+1:], "\n") {
		lineNo++
		if strings.HasPrefix(line, "## ") && inTable {
			break
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !inTable {
			require.Equal(t, []string{"variable", "flag", "default", "meaning"}, cells, "README.md:%d: the table's header", lineNo)
			inTable = true
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		require.Len(t, cells, 4, "README.md:%d: four cells", lineNo)
		r := readmeRow{line: lineNo, meaning: cells[3], flagIn: map[string]string{}}
		if m := backquoted.FindStringSubmatch(cells[0]); m != nil {
			require.Equal(t, "`"+m[1]+"`", cells[0], "README.md:%d: one variable per row", lineNo)
			r.env = m[1]
		} else {
			require.Empty(t, cells[0], "README.md:%d: the variable in backquotes", lineNo)
		}
		main, alt, _ := strings.Cut(cells[1], " (")
		require.True(t, strings.HasPrefix(main, "`--") && strings.HasSuffix(main, "`"), "README.md:%d: the flag as `--name`", lineNo)
		r.flag = strings.TrimSuffix(strings.TrimPrefix(main, "`--"), "`")
		for _, m := range flagInPart.FindAllStringSubmatch(alt, -1) {
			r.flagIn[m[1]] = m[2]
		}
		if cells[2] != "" {
			m := backquoted.FindStringSubmatch(cells[2])
			require.NotNil(t, m, "README.md:%d: the default in backquotes", lineNo)
			r.def = m[1]
		}
		rows = append(rows, r)
	}
	require.NotEmpty(t, rows)
	return rows
}

func settingKey(env, flag string) string { return env + "|" + flag }

// TestREADMEConfigurationTable: every setting of the catalogue is a row of
// README.md's configuration table and every row a setting, with the same
// variable, flag (and per-command flag names) and default, and a meaning.
func TestREADMEConfigurationTable(t *testing.T) {
	t.Parallel()
	rows := readmeSettings(t)
	byKey := map[string]readmeRow{}
	for _, r := range rows {
		k := settingKey(r.env, r.flag)
		_, dup := byKey[k]
		require.False(t, dup, "README.md:%d: %s --%s is in the table twice", r.line, r.env, r.flag)
		byKey[k] = r
	}
	var missing []string
	for _, s := range settings.All {
		k := settingKey(s.Env, s.Flag)
		r, ok := byKey[k]
		if !ok {
			missing = append(missing, readmeLine(s))
			continue
		}
		delete(byKey, k)
		require.Equal(t, s.DefaultText(), r.def, "README.md:%d: the default of %s --%s", r.line, s.Env, s.Flag)
		want := map[string]string{}
		for cmd, flag := range s.FlagIn {
			want[cmd] = flag
		}
		require.Equal(t, want, r.flagIn, "README.md:%d: the flag's other names of %s --%s", r.line, s.Env, s.Flag)
		require.NotEmpty(t, r.meaning, "README.md:%d: the meaning of %s --%s", r.line, s.Env, s.Flag)
	}
	require.Empty(t, missing, "settings missing from README.md's table; add these rows (with their meaning):\n%s", strings.Join(missing, "\n"))
	var extra []string
	for _, r := range byKey {
		extra = append(extra, fmt.Sprintf("README.md:%d: %s --%s", r.line, r.env, r.flag))
	}
	sort.Strings(extra)
	require.Empty(t, extra, "README.md's table has rows that are no setting")
}

func readmeLine(s *settings.Setting) string {
	cell := func(v string) string {
		if v == "" {
			return ""
		}
		return "`" + v + "`"
	}
	flag := "`--" + s.Flag + "`"
	if len(s.FlagIn) > 0 {
		var alts []string
		for cmd, f := range s.FlagIn {
			alts = append(alts, "`"+cmd+"`: `--"+f+"`")
		}
		sort.Strings(alts)
		flag += " (" + strings.Join(alts, "; ") + ")"
	}
	return fmt.Sprintf("| %s | %s | %s | %s |", cell(s.Env), flag, cell(s.DefaultText()), s.Help)
}

// The commands' --help lists the settings they read and nothing else: the
// demo and the audit commands no longer list flags they ignore, and the
// offline ones list no database at all.
func TestHelpListsOnlyWhatACommandReads(t *testing.T) {
	t.Parallel()
	help := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append(args, "--help"), &stdout, &stderr)
		require.Equal(t, 0, code, "%v: %s", args, stderr.String())
		return stderr.String()
	}
	for _, c := range []struct {
		args        []string
		has, hasNot []string
	}{
		{[]string{"demo"}, []string{"--database-url", "--kafka-brokers", "--keep", "[env DATABASE_URL;"},
			[]string{"--schema ", "--store-schema", "--kurrentdb-url", "--transport-schema"}},
		{[]string{"audit", "replay"}, []string{"--store-schema", "--database-url", "--format"}, []string{"--schema ", "--transport-schema", "--kafka"}},
		{[]string{"audit", "verify"}, []string{"--store-schema", "--public-key", "[env OPLEDGER_DIGEST_PUBLIC_KEY_FILE]"}, []string{"--schema ", "--digest-key"}},
		{[]string{"audit", "check-proof"}, []string{"--public-key", "--digest"}, []string{"--database-url", "--store"}},
		{[]string{"migrate"}, []string{"--store-schema", "--schema", "--transport-schema"}, []string{"--store ", "--kafka"}},
		{[]string{"worker"}, []string{"--kafka-group", "--worker-id", "[env OPLEDGER_WORKER_ID; default <host>-<pid>]"}, []string{"--schema ", "--listen"}},
		{[]string{"serve"}, []string{"--listen", "--shutdown-timeout", "[env OPLEDGER_SHUTDOWN_TIMEOUT; default 15s]", "--log-level"}, []string{"--kafka-group", "--worker-id"}},
		{[]string{"dlq", "list"}, []string{"usage: opledger dlq list [--limit N] [flags]", "--transport-schema"}, []string{"list list", "--operator", "--store-schema"}},
		{[]string{"dlq", "resubmit"}, []string{"usage: opledger dlq resubmit (--all", "--operator", "[env OPLEDGER_OPERATOR; default $USER]"}, []string{"resubmit resubmit"}},
		{[]string{"dlq", "signals"}, []string{"usage: opledger dlq signals [--limit N]"}, []string{"signals signals"}},
		{[]string{"projections", "rebuild"}, []string{"--live-schema", "--schema NAME", "[env OPLEDGER_SCHEMA; default opledger]"}, []string{"--transport-schema"}},
		{[]string{"keys", "list"}, []string{"--signing-keys"}, []string{"--database-url"}},
		{[]string{"provider-sim"}, []string{"--provider NAME", "[env PROVIDER_PROFILE; default stripe-v1]", "[env PROVIDER_SIM_LISTEN; default 127.0.0.1:8081]"}, []string{"--database-url"}},
	} {
		out := help(c.args...)
		for _, s := range c.has {
			require.Contains(t, out, s, "%v --help", c.args)
		}
		for _, s := range c.hasNot {
			require.NotContains(t, out, s, "%v --help", c.args)
		}
	}
}
