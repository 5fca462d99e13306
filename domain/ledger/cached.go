package ledger

import "opledger/domain"

// Cached reports what the handler's state cache holds for op: the version
// it folded the state to and the id of the event there (its anchor), and
// whether it holds the operation at all. It reads without touching the
// cache's order. For tests and the simulator, which compare it with what
// the store holds (a cache ahead of its stream must notice when it reads).
func (h *Handler) Cached(op domain.OperationID) (version int64, anchor string, ok bool) {
	c := h.cache
	if c == nil {
		return 0, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, found := c.byStream[op.StreamName()]
	if !found {
		return 0, "", false
	}
	e := el.Value.(*cachedState)
	return e.state.Version, e.anchor, true
}
