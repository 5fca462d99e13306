package settings

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func flagsWith(env map[string]string, ss ...*Setting) (*Flags, *bytes.Buffer) {
	var stderr bytes.Buffer
	f := New("test", "[flags]", &stderr).Bind(ss...)
	f.lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return f, &stderr
}

// A flag overrides the variable, which overrides the default; an empty
// variable counts as unset; each source is named as what it is.
func TestPrecedenceAndNames(t *testing.T) {
	f, _ := flagsWith(map[string]string{"OPLEDGER_SWEEP_INTERVAL": "5s", "OPLEDGER_RECONCILE_INTERVAL": ""},
		SweepInterval, ReconcileInterval, ShutdownTimeout)
	_, ok := f.Parse([]string{"--shutdown-timeout", "1m"})
	require.True(t, ok)
	require.Equal(t, 5*time.Second, f.Duration(SweepInterval))
	require.Equal(t, FromEnv, f.Source(SweepInterval))
	require.Equal(t, "OPLEDGER_SWEEP_INTERVAL", f.Name(SweepInterval))
	require.Equal(t, 3*time.Second, f.Duration(ReconcileInterval), "an empty variable is unset")
	require.Equal(t, "OPLEDGER_RECONCILE_INTERVAL / --reconcile-interval", f.Name(ReconcileInterval))
	require.Equal(t, time.Minute, f.Duration(ShutdownTimeout))
	require.Equal(t, "--shutdown-timeout", f.Name(ShutdownTimeout))

	f, _ = flagsWith(map[string]string{"OPLEDGER_SWEEP_INTERVAL": "5s"}, SweepInterval)
	_, ok = f.Parse([]string{"--sweep-interval=7s"})
	require.True(t, ok)
	require.Equal(t, 7*time.Second, f.Duration(SweepInterval), "the flag wins over the variable")
}

// Every bad setting is one line naming where it came from and what is
// wanted; the command does not go on (exit 1).
func TestBadSettingsAreOneLineEach(t *testing.T) {
	f, stderr := flagsWith(map[string]string{"OPLEDGER_LOG_LEVEL": "loud", "DATABASE_URL": "postgres://u:secret@h/db"},
		LogLevel, SweepInterval, RateBurst, Disable, DatabaseURL)
	code, ok := f.Parse([]string{"--sweep-interval", "0", "--rate-burst", "x", "--disable", "relay,janitor"})
	require.False(t, ok)
	require.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Equal(t, []string{
		`opledger test: OPLEDGER_LOG_LEVEL "loud": want debug, info, warn or error`,
		`opledger test: --sweep-interval "0": want a positive duration like 2s`,
		`opledger test: --rate-burst "x": want a whole number from 1 to 1000000`,
		`opledger test: --disable "relay,janitor": unknown "janitor": want a comma-separated list of projector, sweeper, reconciler or relay`,
	}, lines)

	f, _ = flagsWith(map[string]string{"DATABASE_URL": "postgres://u:secret@h/db"}, DatabaseURL)
	_, ok = f.Parse(nil)
	require.True(t, ok)
	require.NotContains(t, f.Invalid(DatabaseURL, "no").Error(), "secret", "a URL is named without its password")
}

// Switches: --flag alone, or a variable that says true or false.
func TestSwitches(t *testing.T) {
	f, _ := flagsWith(map[string]string{"OPLEDGER_WORKER_RELAY": "true"}, WorkerRelay, Dev)
	_, ok := f.Parse([]string{"--dev"})
	require.True(t, ok)
	require.True(t, f.Bool(Dev))
	require.True(t, f.Bool(WorkerRelay))

	f, stderr := flagsWith(map[string]string{"OPLEDGER_WORKER_RELAY": "yes please"}, WorkerRelay)
	code, ok := f.Parse(nil)
	require.False(t, ok)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), `OPLEDGER_WORKER_RELAY "yes please": want true or false`)
}

// Positional arguments may come before, between or after the flags; an
// unknown flag is one line (exit 2) that says where the flags are listed.
func TestPositionalsAndUnknownFlags(t *testing.T) {
	f, _ := flagsWith(nil, StoreSchema)
	wide := f.Local().Bool("wide", false, "")
	_, ok := f.Parse([]string{"OP-1", "--store-schema", "s", "ROLE", "--wide", "ITEM"})
	require.True(t, ok)
	require.Equal(t, []string{"OP-1", "ROLE", "ITEM"}, f.Args())
	require.True(t, *wide)
	require.Equal(t, "s", f.Text(StoreSchema))

	f, stderr := flagsWith(nil, StoreSchema)
	code, ok := f.Parse([]string{"--transport-schema", "x"})
	require.False(t, ok)
	require.Equal(t, 2, code)
	require.Equal(t, "opledger test: flag provided but not defined: --transport-schema (opledger test --help lists its flags)\n", stderr.String())
}

// A setting's other flag name in one command, and --help listing what the
// command bound with its variable and default.
func TestFlagInAndUsage(t *testing.T) {
	var stderr bytes.Buffer
	f := New("projections rebuild", "[flags]", &stderr).Bind(ReadModelSchema)
	_, ok := f.Parse([]string{"--live-schema", "live2"})
	require.True(t, ok)
	require.Equal(t, "live2", f.Text(ReadModelSchema))
	require.Equal(t, "--live-schema", f.Name(ReadModelSchema))

	var help bytes.Buffer
	f.Usage(&help)
	require.Contains(t, help.String(), "  --live-schema NAME\n      schema of the read models analysts query\n      [env OPLEDGER_SCHEMA; default opledger]\n")
}

// Every catalogue default passes its own check, and no two settings share
// a variable or (within what one command could bind) confuse each other.
func TestCatalogueIsConsistent(t *testing.T) {
	envs := map[string]bool{}
	for _, s := range All {
		require.NotEmpty(t, s.Flag)
		require.NotEmpty(t, s.Help, s.Flag)
		if s.Env != "" {
			require.False(t, envs[s.Env], "%s is two settings' variable", s.Env)
			envs[s.Env] = true
		}
		if s.Check != nil {
			require.NoError(t, s.Check(s.defaultValue()), "the default of --%s", s.Flag)
		}
		require.Equal(t, s.Bool, s.Arg == "", "--%s: a switch has no argument, a value has one", s.Flag)
	}
	require.Equal(t, "8h", ConsoleSessionTTL.Default)
	require.Equal(t, "1m30s", fmtDuration(90*time.Second))
}
