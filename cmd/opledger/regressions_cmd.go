package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"opledger/adapters/httpapi"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/clock"
	"opledger/domain/regression"
)

func init() {
	register("regressions", "log regressions the processes recorded (the store lost acknowledged writes): list, ack", runRegressions)
}

const regressionsUsage = `usage: opledger regressions <list|ack> [flags]

  list [--json]        the log regressions recorded since the last acknowledgement, newest
                       first (stream evidence-regressions), and that acknowledgement
  ack --note TEXT      acknowledge every regression recorded so far, as the operator whose
                       bearer token is in --token-file (authenticated against --tokens): /readyz,
                       the metrics and the console stop raising the alarm until the next one

A process records a LogRegressed when one of its caches or cursors finds the store holding
less than it had seen: a failover to a standby that had not received the last commits (an
asynchronous one) lost acknowledged writes. Read the escalated lost effects first (GET
/v1/escalations, the console), then acknowledge. docs/operations.md, "High availability".
Run 'opledger regressions <subcommand> --help' for flags.`

func runRegressions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, args, synopsis, code, ok := subcommand("regressions", regressionsUsage,
		map[string]string{"list": "[--json] [flags]", "ack": "--note TEXT [flags]"}, args, stderr)
	if !ok {
		return code
	}
	cmd := "regressions " + sub
	f := newFlags(cmd, synopsis, stderr)
	f.Bind(storeSettings...)
	var (
		asJSON bool
		note   string
	)
	if sub == "list" {
		f.Local().BoolVar(&asJSON, "json", false, "the JSON GET /v1/regressions answers")
	} else {
		f.Bind(settings.TokensFile, settings.OperatorToken)
		f.Local().StringVar(&note, "note", "", "what was done: the lost effects' escalations read, the provider checked (required)")
	}
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) > 0 {
		return fail(stderr, cmd, fmt.Errorf("unexpected arguments %q", f.Args()))
	}
	var operator string
	if sub == "ack" {
		if strings.TrimSpace(note) == "" {
			return fail(stderr, cmd, errors.New("--note TEXT is required: say what was done (the escalations read, the provider checked)"))
		}
		who, err := authenticateOperator(f)
		if err != nil {
			return fail(stderr, cmd, err)
		}
		operator = who.Name
	}
	db := dbFrom(f)
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer pool.Close()
	opened, err := db.store(ctx, pool)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer opened.Release()
	m, err := regression.NewMonitor(regression.MonitorConfig{Store: opened.Store, Clock: clock.System{}})
	if err != nil {
		return fail(stderr, cmd, err)
	}
	if sub == "ack" {
		ack, err := m.Acknowledge(ctx, operator, strings.TrimSpace(note))
		if errors.Is(err, regression.ErrNothingToAcknowledge) {
			fmt.Fprintln(stdout, "no log regression is unacknowledged")
			return 0
		}
		if err != nil {
			return fail(stderr, cmd, err)
		}
		fmt.Fprintf(stdout, "acknowledged %d log regressions (through version %d of evidence-regressions) as %s\n", ack.Regressions, ack.Through, operator)
		return 0
	}
	if err := m.Refresh(ctx); err != nil {
		return fail(stderr, cmd, err)
	}
	st := m.Status()
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(st); err != nil {
			return fail(stderr, cmd, err)
		}
		return 0
	}
	return printRegressions(st, stdout, stderr)
}

// authenticateOperator reads the bearer token in --token-file and finds
// it in --tokens, as serve would: it must be an operator's.
func authenticateOperator(f *settings.Flags) (httpapi.Principal, error) {
	tokensFile, tokenFile := f.Text(settings.TokensFile), f.Text(settings.OperatorToken)
	switch {
	case tokensFile == "":
		return httpapi.Principal{}, f.Missing(settings.TokensFile, "tokens file")
	case tokenFile == "":
		return httpapi.Principal{}, f.Missing(settings.OperatorToken, "the operator's token file")
	}
	tokens, err := httpapi.LoadTokens(tokensFile)
	if err != nil {
		return httpapi.Principal{}, err
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		return httpapi.Principal{}, fmt.Errorf("%s: %w", f.Name(settings.OperatorToken), err)
	}
	who, known := tokens.Authenticate(strings.TrimSpace(string(raw)))
	switch {
	case !known:
		return httpapi.Principal{}, fmt.Errorf("the token in %s is not in %s", tokenFile, tokensFile)
	case who.Role != httpapi.RoleOperator:
		return httpapi.Principal{}, fmt.Errorf("the token in %s is %s's, a %s's: only an operator acknowledges", tokenFile, who.Name, who.Role)
	}
	return who, nil
}

func printRegressions(st regression.Status, stdout, stderr io.Writer) int {
	if !st.Alarm() {
		fmt.Fprintf(stdout, "no log regression is unacknowledged (%d recorded in all)\n", st.Total)
	} else {
		tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "NOTICED\tBY\tCACHE\tSTREAM\tHAD\tHOLDS\tEXECUTIONS IT KNEW")
		for _, r := range st.Recent {
			var execs []string
			for _, x := range r.SeenExecutions {
				e := fmt.Sprintf("%s %s %s", x.ExecutionID, x.State, x.IdempotencyKey)
				if x.ProviderReference != "" {
					e += " ref " + x.ProviderReference
				}
				execs = append(execs, e)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.NoticedAt.UTC().Format(time.RFC3339), r.Noticer, r.Cache, orDash(r.Stream),
				r.SeenVersion, r.HeldVersion, orDash(strings.Join(execs, "; ")))
		}
		if err := tw.Flush(); err != nil {
			return fail(stderr, "regressions list", err)
		}
		fmt.Fprintf(stdout, "%d log regressions unacknowledged (the newest %d shown); acknowledge with: opledger regressions ack --note TEXT\n",
			st.Unacknowledged, len(st.Recent))
	}
	if a := st.LastAcknowledged; a != nil {
		fmt.Fprintf(stdout, "last acknowledged by %s at %s: %s\n", a.Operator, a.AcknowledgedAt.UTC().Format(time.RFC3339), oneLine(a.Note))
	}
	return 0
}
