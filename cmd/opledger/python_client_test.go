package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pythonDir is the Python client's package (clients/python).
const pythonDir = "../../clients/python"

// python3 finds the interpreter: when scripts/test.sh runs the suite
// (OPLEDGER_REQUIRE_PYTHON=1) a missing one fails the test, else it skips.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("OPLEDGER_REQUIRE_PYTHON") == "1" {
			t.Fatal("python3 is required (OPLEDGER_REQUIRE_PYTHON=1) and not on PATH")
		}
		t.Skip("no python3 on PATH")
	}
	return p
}

// pythonEnv is the environment a Python process of clients/python runs in
// against s: the package on its path, no bytecode written into the tree.
func (s *system) pythonEnv(extra ...string) []string {
	src, _ := filepath.Abs(filepath.Join(pythonDir, "src"))
	env := append(os.Environ(), "PYTHONPATH="+src, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	return append(env, extra...)
}

// TestPythonClient runs the Python client's tests (clients/python/tests,
// unittest) against real serve and provider-sim processes: the same
// surface as the Go client's, proven the same way.
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	py := python3(t)
	t.Parallel()
	s := newSystemWith(t, "--disable", "reconciler", "--enable-kinds", "export-download")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // bounded: the suite takes seconds
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Dir = pythonDir
	cmd.Env = s.pythonEnv("OPLEDGER_TEST_API=http://"+s.api, "OPLEDGER_TEST_SIM=http://"+s.sim,
		"OPLEDGER_TEST_AGENT_TOKEN="+agentToken, "OPLEDGER_TEST_WORKER_TOKEN="+workerToken,
		"OPLEDGER_TEST_OPERATOR_TOKEN="+operatorToken, "OPLEDGER_TEST_AUDITOR_TOKEN="+auditorToken)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "python3 -m unittest:\n%s", out)
	require.NotContains(t, string(out), "skipped", "every test ran against serve:\n%s", out)
	require.Contains(t, string(out), "test_a_lease_lost_mid_call_cancels_the_call", "the tests against serve ran:\n%s", out)
	t.Logf("python3 -m unittest: %s", strings.TrimSpace(string(out[max(0, len(out)-200):])))
}
