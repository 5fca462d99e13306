package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
)

// replicationQuery asks, on one pooled connection (so on the server this
// store's writes go to: a multi-host URL's current primary), for the
// session's synchronous_commit, synchronous_standby_names, whether the
// server is a standby itself, and the standbys pg_stat_replication shows.
// A standby counts as synchronous only with sync_state 'sync' or 'quorum':
// PostgreSQL gives those states only to streaming standbys its commits wait
// for. A role without pg_read_all_stats sees the walsenders' pids and NULL
// for the rest: those are counted apart, as hidden.
const replicationQuery = `
SELECT current_setting('synchronous_commit'),
       current_setting('synchronous_standby_names'),
       pg_is_in_recovery(),
       count(r.pid),
       count(r.pid) FILTER (WHERE r.sync_state IN ('sync', 'quorum')),
       count(r.pid) FILTER (WHERE r.sync_state IS NULL),
       coalesce(string_agg(coalesce(r.application_name, '?') || ' ' || coalesce(r.state, '?') || ' ' || coalesce(r.sync_state, '?'),
                           ', ' ORDER BY r.application_name), '')
FROM (SELECT 1) AS one LEFT JOIN pg_stat_replication AS r ON true`

// maxDetailStandbys bounds the text Detail quotes of pg_stat_replication (a
// server has a handful of standbys; Detail must stay one log line).
const maxDetailStandbys = 400

// rowQuerier is a pool or a connection.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Replication implements eventstore.ReplicationProbe: whether a commit this
// store's server acknowledges now has reached a synchronous standby first.
// It reads settings and pg_stat_replication and writes nothing.
func (s *Store) Replication(ctx context.Context) (eventstore.Replication, error) {
	return probeReplication(ctx, s.pool)
}

var _ eventstore.ReplicationProbe = (*Store)(nil)

func probeReplication(ctx context.Context, q rowQuerier) (eventstore.Replication, error) {
	var r replicationState
	err := q.QueryRow(ctx, replicationQuery).Scan(&r.commit, &r.names, &r.inRecovery, &r.standbys, &r.sync, &r.hidden, &r.list)
	if err != nil {
		return eventstore.Replication{}, interpretError("replication", err)
	}
	return r.replication(), nil
}

// replicationState is what the server answered.
type replicationState struct {
	commit, names          string // synchronous_commit, synchronous_standby_names
	inRecovery             bool
	standbys, sync, hidden int64
	list                   string // "name state sync_state, ..."
}

// waitsForStandby is true for the synchronous_commit levels at which a
// commit waits for the synchronous standbys: on (flushed there),
// remote_write (written there) and remote_apply (applied there). local and
// off never wait.
func waitsForStandby(level string) bool {
	switch level {
	case "on", "remote_write", "remote_apply":
		return true
	}
	return false
}

func (r replicationState) replication() eventstore.Replication {
	settings := fmt.Sprintf("synchronous_commit=%s, synchronous_standby_names='%s'", r.commit, r.names)
	standbys := "no standby in pg_stat_replication"
	if r.standbys > 0 {
		list := r.list
		if len(list) > maxDetailStandbys {
			list = list[:maxDetailStandbys] + "..."
		}
		standbys = fmt.Sprintf("%d standby(s) in pg_stat_replication (%s)", r.standbys, list)
	}
	var why []string
	switch {
	case r.inRecovery:
		why = append(why, "the server is a standby itself (writes go elsewhere: is the URL's target_session_attrs=read-write?)")
	case strings.TrimSpace(r.names) == "":
		why = append(why, "synchronous_standby_names is empty: a commit is acknowledged once on this server's disk alone")
	}
	if !waitsForStandby(r.commit) {
		why = append(why, "synchronous_commit="+r.commit+" does not wait for a standby")
	}
	if r.sync == 0 && !r.inRecovery && strings.TrimSpace(r.names) != "" {
		why = append(why, "no standby is synchronous now")
	}
	if r.hidden > 0 {
		why = append(why, fmt.Sprintf("%d standby(s) hidden from this role: GRANT pg_read_all_stats to it", r.hidden))
	}
	out := eventstore.Replication{SyncStandbys: int(r.sync)}
	out.Synchronous = !r.inRecovery && waitsForStandby(r.commit) && strings.TrimSpace(r.names) != "" && r.sync > 0
	if out.Synchronous {
		out.Detail = fmt.Sprintf("synchronous: %s; %s", settings, standbys)
	} else {
		out.Detail = fmt.Sprintf("NOT synchronous: %s; %s; %s", strings.Join(why, "; "), settings, standbys)
	}
	return out
}
