package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A session ends when it is ended. The cookie alone is not enough: it is
// honoured only while the session store holds its session, not ended and
// not expired. The store is PostgreSQL's, shared by every serve instance,
// so a sign-out on one instance, an operator ending every session of a
// token, or a token removed from the tokens file (checked on every request
// besides) ends the session everywhere at once; a copy of the cookie and
// its CSRF token taken before is refused after. A store rather than a
// revocation list: what is not in it is not a session (a lost row signs out
// instead of letting a revoked cookie back in), and an operator can list
// the sessions that are open.

// SessionRecord is one console session as the store keeps it.
type SessionRecord struct {
	ID          string
	TokenDigest string // hex SHA-256 of the bearer token
	Principal   string
	Role        string
	IssuedAt    time.Time
	ExpiresAt   time.Time
}

// SessionStore keeps the console's sessions. Safe for concurrent use.
type SessionStore interface {
	// Open records a new session.
	Open(ctx context.Context, s SessionRecord) error
	// Active reports whether session id is recorded, not ended and not
	// expired at now.
	Active(ctx context.Context, id string, now time.Time) (bool, error)
	// End ends session id (a sign-out); ending an ended one does nothing.
	End(ctx context.Context, id, by string, now time.Time) error
	// EndToken ends every open session of the token whose digest is
	// tokenDigest and says how many.
	EndToken(ctx context.Context, tokenDigest, by string, now time.Time) (int64, error)
	// List lists the sessions open at now, at most limit, newest first.
	List(ctx context.Context, now time.Time, limit int) ([]SessionRecord, error)
}

// tokenDigest is the hex SHA-256 of a bearer token, as the tokens file
// and the session store name it.
func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// maxExpiredDeleted bounds the expired rows one sign-in deletes: sign-ins
// are rate-limited per token, so expired rows never outgrow the deletions.
const maxExpiredDeleted = 100

// DB runs statements: *pgxpool.Pool satisfies it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PostgresSessions is the SessionStore in the transport schema's
// console_sessions table (the transport schema's migration 004, adapters/transport/pgstate).
type PostgresSessions struct {
	db    DB
	table string
}

// NewPostgresSessions returns the store of schema's console_sessions.
func NewPostgresSessions(db DB, schema string) (*PostgresSessions, error) {
	if db == nil || schema == "" {
		return nil, errors.New("console: PostgresSessions needs a database and a schema")
	}
	return &PostgresSessions{db: db, table: pgx.Identifier{schema, "console_sessions"}.Sanitize()}, nil
}

func (p *PostgresSessions) Open(ctx context.Context, s SessionRecord) error {
	if _, err := p.db.Exec(ctx, `INSERT INTO `+p.table+` (id, token_digest, principal, role, issued_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)`, s.ID, s.TokenDigest, s.Principal, s.Role, s.IssuedAt, s.ExpiresAt); err != nil {
		return fmt.Errorf("console: open session: %w", err)
	}
	if _, err := p.db.Exec(ctx, `DELETE FROM `+p.table+` WHERE id IN (SELECT id FROM `+p.table+` WHERE expires_at < $1 LIMIT $2)`,
		s.IssuedAt, maxExpiredDeleted); err != nil {
		return fmt.Errorf("console: delete expired sessions: %w", err)
	}
	return nil
}

func (p *PostgresSessions) Active(ctx context.Context, id string, now time.Time) (bool, error) {
	var active bool
	err := p.db.QueryRow(ctx, `SELECT ended_at IS NULL AND expires_at > $2 FROM `+p.table+` WHERE id = $1`, id, now).Scan(&active)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("console: read session: %w", err)
	}
	return active, nil
}

func (p *PostgresSessions) End(ctx context.Context, id, by string, now time.Time) error {
	if _, err := p.db.Exec(ctx, `UPDATE `+p.table+` SET ended_at = $2, ended_by = $3 WHERE id = $1 AND ended_at IS NULL`, id, now, by); err != nil {
		return fmt.Errorf("console: end session: %w", err)
	}
	return nil
}

func (p *PostgresSessions) EndToken(ctx context.Context, digest, by string, now time.Time) (int64, error) {
	tag, err := p.db.Exec(ctx, `UPDATE `+p.table+` SET ended_at = $2, ended_by = $3
WHERE token_digest = $1 AND ended_at IS NULL AND expires_at > $2`, digest, now, by)
	if err != nil {
		return 0, fmt.Errorf("console: end the token's sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (p *PostgresSessions) List(ctx context.Context, now time.Time, limit int) ([]SessionRecord, error) {
	rows, err := p.db.Query(ctx, `SELECT id, token_digest, principal, role, issued_at, expires_at FROM `+p.table+`
WHERE ended_at IS NULL AND expires_at > $1 ORDER BY issued_at DESC, id LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("console: list sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SessionRecord, error) {
		var s SessionRecord
		err := row.Scan(&s.ID, &s.TokenDigest, &s.Principal, &s.Role, &s.IssuedAt, &s.ExpiresAt)
		s.IssuedAt, s.ExpiresAt = s.IssuedAt.UTC(), s.ExpiresAt.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("console: list sessions: %w", err)
	}
	return out, nil
}
