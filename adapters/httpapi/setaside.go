package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"opledger/domain"
	"opledger/domain/setaside"
)

// CodeSetAsideUnknown answers a release of an item with no recorded
// failure.
const CodeSetAsideUnknown = "set-aside.unknown"

// SetAsideView is one failing item as GET /v1/set-aside shows it (and
// `opledger set-aside list --json` prints it).
type SetAsideView struct {
	Role          string     `json:"role"`
	Item          string     `json:"item"`
	OperationID   *string    `json:"operation_id"`
	Reason        string     `json:"reason"`
	Detail        string     `json:"detail"`
	Attempts      int        `json:"attempts"`
	FirstFailedAt time.Time  `json:"first_failed_at"`
	LastFailedAt  time.Time  `json:"last_failed_at"`
	RetryAt       *time.Time `json:"retry_at"` // null once set aside
	SetAside      bool       `json:"set_aside"`
	SetAsideAt    *time.Time `json:"set_aside_at"`
}

// NewSetAsideView shows it.
func NewSetAsideView(it setaside.Item) SetAsideView {
	v := SetAsideView{Role: string(it.Role), Item: it.Item, Reason: it.Reason, Detail: it.Detail, Attempts: it.Attempts,
		FirstFailedAt: it.FirstFailedAt.UTC(), LastFailedAt: it.LastFailedAt.UTC(), SetAside: it.SetAside}
	if it.OperationID != "" {
		op := string(it.OperationID)
		v.OperationID = &op
	}
	if it.SetAside {
		at := it.SetAsideAt.UTC()
		v.SetAsideAt = &at
	} else {
		at := it.RetryAt.UTC()
		v.RetryAt = &at
	}
	return v
}

type setAsideListResponse struct {
	Items []SetAsideView `json:"items"`
	// NextAfter, when set, is the after= of the next page.
	NextAfter string `json:"next_after,omitempty"`
}

// listSetAside: GET /v1/set-aside?role=&set_aside_only=&after=&limit=. The
// loops' failing items, oldest first failure first: those being retried
// after a backoff and those set aside (no loop retries them until an
// operator releases them). role narrows to one loop; set_aside_only=true to
// the set-aside ones.
func (s *Server) listSetAside(_ http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	q := r.URL.Query()
	limit, err := pageLimit(r)
	if err != nil {
		return reply{}, err
	}
	query := setaside.Query{Limit: min(limit, setaside.MaxListLimit)}
	if text := q.Get("role"); text != "" {
		role, err := parseSetAsideRole("role", text)
		if err != nil {
			return reply{}, err
		}
		query.Role = role
	}
	switch q.Get("set_aside_only") {
	case "", "false":
	case "true":
		query.SetAsideOnly = true
	default:
		return reply{}, invalid("set_aside_only", "set_aside_only must be true or false")
	}
	if text := q.Get("after"); text != "" {
		after, ok := parseSetAsideCursor(text)
		if !ok {
			return reply{}, invalid("after", "after must be a next_after this endpoint answered")
		}
		query.After = &after
	}
	items, err := s.cfg.SetAside.List(r.Context(), query)
	if err != nil {
		return reply{}, readError("set-aside items", err)
	}
	resp := setAsideListResponse{Items: make([]SetAsideView, 0, len(items))}
	for _, it := range items {
		resp.Items = append(resp.Items, NewSetAsideView(it))
	}
	if len(items) == query.Limit { // a full page: there may be more (the next may be empty)
		resp.NextAfter = setAsideCursor(items[len(items)-1])
	}
	return ok(resp), nil
}

type releaseRequest struct {
	Role *string `json:"role"`
	Item *string `json:"item"`
}

type releaseResponse struct {
	Released SetAsideView `json:"released"`
	// Note says what the release does for this role.
	Note string `json:"note"`
}

// releaseSetAside: POST /v1/set-aside/release {"role","item"}. Forgets the
// item's failures, so its loop tries it again at its next round, its
// retries counted from one. 404 set-aside.unknown when the item has no
// recorded failure.
func (s *Server) releaseSetAside(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	var req releaseRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	text, err := need(req.Role, "role")
	if err != nil {
		return reply{}, err
	}
	role, err := parseSetAsideRole("role", text)
	if err != nil {
		return reply{}, err
	}
	item, err := need(req.Item, "item")
	if err != nil {
		return reply{}, err
	}
	if refusal := domain.CheckText("item", item, 2*domain.MaxIDLength, true); refusal != nil {
		return reply{}, invalid("item", "%s", refusal.Detail)
	}
	it, found, err := s.cfg.SetAside.Get(r.Context(), role, item)
	if err != nil {
		return reply{}, readError("set-aside item", err)
	}
	if !found {
		return reply{}, notFound(CodeSetAsideUnknown, "%s has no failing item %q", role, item)
	}
	if err := s.cfg.SetAside.Clear(r.Context(), role, item); err != nil {
		return reply{}, readError("release set-aside item", err)
	}
	s.cfg.Logger.InfoContext(r.Context(), "set-aside item released", "role", role, "item", item,
		"operation_id", it.OperationID, "by", who.Name, "attempts", it.Attempts, "reason", it.Reason)
	return ok(releaseResponse{Released: NewSetAsideView(it), Note: ReleaseNote(role)}), nil
}

// ReleaseNote says what releasing an item of role does.
func ReleaseNote(role setaside.Role) string {
	if role == setaside.RoleProjector {
		return "the entry is forgotten; the projector has read past a skipped event, and only a rebuild (opledger projections rebuild --swap) folds it again"
	}
	return fmt.Sprintf("the %s tries the item again at its next round, its retries counted from one", role)
}

func parseSetAsideRole(field, text string) (setaside.Role, error) {
	role := setaside.Role(text)
	if !role.Known() {
		names := make([]string, len(setaside.Roles))
		for i, r := range setaside.Roles {
			names[i] = string(r)
		}
		return "", invalid(field, "%s must be one of %s", field, strings.Join(names, ", "))
	}
	return role, nil
}

// setAsideCursor encodes a keyset position: an item's first failure, role
// and id.
func setAsideCursor(it setaside.Item) string {
	raw := it.FirstFailedAt.UTC().Format(time.RFC3339Nano) + "|" + string(it.Role) + "|" + it.Item
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseSetAsideCursor(text string) (setaside.Item, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return setaside.Item{}, false
	}
	ts, rest, found := strings.Cut(string(raw), "|")
	if !found {
		return setaside.Item{}, false
	}
	role, item, found := strings.Cut(rest, "|") // the item, last, may hold '|'
	at, err := time.Parse(time.RFC3339Nano, ts)
	if !found || err != nil || !setaside.Role(role).Known() || item == "" {
		return setaside.Item{}, false
	}
	return setaside.Item{FirstFailedAt: at, Role: setaside.Role(role), Item: item}, true
}
