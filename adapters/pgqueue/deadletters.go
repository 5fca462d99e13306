package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/adapters/transport"
	"opledger/domain"
)

// deadLetterID names row id as a dead letter: "DL-<id>".
func deadLetterID(id int64) string { return "DL-" + strconv.FormatInt(id, 10) }

func parseDeadLetterID(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "DL-"), 10, 64)
	if err != nil || n <= 0 || !strings.HasPrefix(s, "DL-") {
		return 0, fmt.Errorf("%w: %q is not a Postgres dead letter id (DL-<row id>)", transport.ErrDeadLetterNotFound, s)
	}
	return n, nil
}

// ListDeadLetters implements transport.DeadLetterQueue: the dead rows of the
// queue's topic, resubmitted ones included (marked), oldest first, at most
// limit (default transport.DefaultResubmitLimit).
func (q *Queue) ListDeadLetters(ctx context.Context, limit int) ([]transport.DeadLetter, error) {
	if limit <= 0 {
		limit = transport.DefaultResubmitLimit
	}
	rows, err := q.cfg.DB.Query(ctx, q.sql.listDead, q.cfg.Topic, limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters of %s: %w", q.cfg.Topic, err)
	}
	defer rows.Close()
	var out []transport.DeadLetter
	for rows.Next() {
		var (
			id             int64
			msgID, key     string
			value, headers []byte
			reason, detail *string
			deadAt         *time.Time
			newID, by      *string
			resubAt        *time.Time
			published      *bool
			dl             transport.DeadLetter
		)
		if err := rows.Scan(&id, &msgID, &key, &value, &headers, &reason, &detail, &deadAt, &newID, &by, &resubAt, &published); err != nil {
			return nil, fmt.Errorf("list dead letters: %w", err)
		}
		if err := json.Unmarshal(headers, &dl.Headers); err != nil {
			return nil, fmt.Errorf("dead letter row %d: headers: %w", id, err)
		}
		dl.ID, dl.MessageID, dl.Key, dl.Value = deadLetterID(id), domain.MessageID(msgID), []byte(key), value
		dl.Origin = transport.Origin{Transport: "postgres", Topic: q.cfg.Topic, Offset: id}
		if reason != nil {
			dl.Reason = domain.Reason(*reason)
		}
		if detail != nil {
			dl.Detail = *detail
		}
		if deadAt != nil {
			dl.DeadAt = *deadAt
		}
		if newID != nil {
			dl.Resubmitted = &transport.Resubmission{DeadLetterID: dl.ID, MessageID: domain.MessageID(*newID), By: *by, At: *resubAt, Published: *published}
		}
		out = append(out, dl)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// Resubmit implements transport.DeadLetterQueue. Each dead letter is
// resubmitted in one transaction: its copy is inserted as a ready message
// under ResubmissionMessageID, the dead row marked resubmitted, and the
// resubmission recorded. Named ids that are not dead letters fail with
// ErrDeadLetterNotFound, ones resubmitted before with ErrAlreadyResubmitted;
// resubmissions made before the failure stand and are returned.
func (q *Queue) Resubmit(ctx context.Context, req transport.ResubmitRequest) ([]transport.Resubmission, error) {
	if req.By == "" {
		return nil, errors.New("resubmit: the operator (By) is required")
	}
	var ids []int64
	if req.All {
		limit := req.Limit
		if limit <= 0 {
			limit = transport.DefaultResubmitLimit
		}
		rows, err := q.cfg.DB.Query(ctx, q.sql.deadIDs, q.cfg.Topic, limit)
		if err != nil {
			return nil, fmt.Errorf("resubmit: list dead letters: %w", err)
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return nil, fmt.Errorf("resubmit: list dead letters: %w", err)
		}
	} else {
		for _, s := range req.IDs {
			id, err := parseDeadLetterID(s)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
	}
	var out []transport.Resubmission
	for _, id := range ids {
		r, err := q.resubmitOne(ctx, id, req.By)
		if err != nil {
			if req.All && errors.Is(err, transport.ErrAlreadyResubmitted) {
				continue // resubmitted concurrently by another operator
			}
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (q *Queue) resubmitOne(ctx context.Context, id int64, by string) (r transport.Resubmission, err error) {
	dl := deadLetterID(id)
	tx, err := q.cfg.DB.Begin(ctx)
	if err != nil {
		return r, fmt.Errorf("resubmit %s: %w", dl, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	var (
		msgID, key, state string
		value, rawHeaders []byte
	)
	err = tx.QueryRow(ctx, q.sql.lockDead, id, q.cfg.Topic).Scan(&msgID, &key, &value, &rawHeaders, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("resubmit %s: %w", dl, transport.ErrDeadLetterNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("resubmit %s: %w", dl, err)
	}
	switch state {
	case "resubmitted":
		return r, fmt.Errorf("resubmit %s: %w", dl, transport.ErrAlreadyResubmitted)
	case "dead":
	default:
		return r, fmt.Errorf("resubmit %s: %w (the message is %s)", dl, transport.ErrDeadLetterNotFound, state)
	}
	var headers map[string]string
	if err := json.Unmarshal(rawHeaders, &headers); err != nil {
		return r, fmt.Errorf("resubmit %s: headers: %w", dl, err)
	}
	newID := transport.ResubmissionMessageID(dl)
	h, err := encodeHeaders(transport.ResubmissionHeaders(headers, dl, msgID, newID))
	if err != nil {
		return r, err
	}
	if _, err := tx.Exec(ctx, q.sql.insertMessage, q.cfg.Topic, string(newID), key, transport.WithMessageID(value, newID), h); err != nil {
		return r, fmt.Errorf("resubmit %s: insert copy: %w", dl, err)
	}
	if _, err := tx.Exec(ctx, q.sql.markResubmit, id); err != nil {
		return r, fmt.Errorf("resubmit %s: mark: %w", dl, err)
	}
	var fresh bool
	err = tx.QueryRow(ctx, q.sql.beginResubmission, dl, string(newID), by, true).Scan(&r.DeadLetterID, &r.MessageID, &r.By, &r.At, &r.Published, &fresh)
	if err != nil {
		return r, fmt.Errorf("resubmit %s: record: %w", dl, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return r, fmt.Errorf("resubmit %s: commit: %w", dl, err)
	}
	return r, nil
}
