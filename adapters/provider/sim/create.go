package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// handleCreate serves POST /v1/refunds. The order of its steps is the
// contract stated in the package doc: receive and count, arrival faults,
// request validation (nothing saved), the key (replay, conflict, mismatch or
// execute), execution faults, commit.
func (s *Simulator) handleCreate(w http.ResponseWriter, r *http.Request) {
	keyHeader := s.dia.keyHeader()
	key := r.Header.Get(keyHeader)
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var params refundParams
	var paramErr *apiError
	if readErr == nil {
		params, paramErr = s.dia.parse(r.Header.Get("Content-Type"), body, s.cfg.ReferenceKey)
	}
	params.op = params.Metadata[s.cfg.ReferenceKey]
	operationID := params.operationID()

	s.mu.Lock()
	entry := s.receiveLocked(key, operationID)
	var arrival Fault
	var hasArrival bool
	if readErr == nil {
		arrival, hasArrival = s.takeFaultLocked(stageArrival, operationID)
		if hasArrival {
			entry.Faults = append(entry.Faults, arrival.Kind)
		}
	}
	s.mu.Unlock()

	if readErr != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(readErr, &maxErr) {
			s.respond(w, entry, s.errorAnswer(&apiError{
				status: http.StatusRequestEntityTooLarge, Type: errTypeInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("Request body larger than %d bytes.", maxErr.Limit),
			}), key, false, ResultRejected)
			return
		}
		s.respond(w, entry, s.errorAnswer(invalidRequest(codeParameterInvalid, "", "Unreadable request body.")),
			key, false, ResultRejected)
		return
	}

	if hasArrival {
		s.log.Info("fault applied", "kind", arrival.Kind, "operation_id", operationID, "idempotency_key", key)
		switch arrival.Kind {
		case FaultDropConnectionBeforeRead:
			s.record(entry, 0, false, "", ResultDropped)
			abortConnection(w)
			return
		case FaultDelay:
			if err := s.sleep(r.Context(), arrival.Duration); err != nil {
				s.abandon(w, entry, key, err)
				return
			}
		}
	}

	maxKey := s.dia.maxKey()
	switch {
	case key == "":
		s.respond(w, entry, s.errorAnswer(invalidRequest(codeParameterMissing, keyHeader,
			"Missing required header: "+keyHeader+".")), key, false, ResultRejected)
		return
	case len(key) > maxKey:
		s.respond(w, entry, s.errorAnswer(invalidRequest(codeParameterInvalid, keyHeader,
			fmt.Sprintf("Invalid %s: longer than %d characters.", keyHeader, maxKey))), key, false, ResultRejected)
		return
	case checkText(keyHeader, key, maxKey) != nil:
		s.respond(w, entry, s.errorAnswer(checkText(keyHeader, key, maxKey)), "", false, ResultRejected)
		return
	case paramErr != nil:
		s.respond(w, entry, s.errorAnswer(paramErr), key, false, ResultRejected)
		return
	}
	if e := params.validate(); e != nil {
		s.respond(w, entry, s.errorAnswer(e), key, false, ResultRejected)
		return
	}

	rec, fault, early := s.admit(key, params, entry)
	if early != nil {
		early(w)
		return
	}
	s.execute(w, r, key, params, rec, entry, fault)
}

// admit decides, under the lock, what the key says about this request: an
// early answer (replay, conflict, mismatch, key store full), or execution
// with the record marked in progress and the execution fault, if any, taken.
func (s *Simulator) admit(key string, p refundParams, entry *ReceivedRequest) (*keyRecord, Fault, func(http.ResponseWriter)) {
	fingerprint := p.fingerprint()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.now()
	s.pruneKeysLocked(now)

	rec, _ := s.keys.get(key, now)
	switch {
	case rec != nil && rec.fingerprint != fingerprint:
		return nil, Fault{}, s.respondFunc(entry, s.errorAnswer(&apiError{
			status: http.StatusBadRequest, Type: errTypeIdempotency, Code: codeIdempotencyKeyReused,
			Message: fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. Try a key other than %q to execute a different request.", key),
		}), key, false, ResultMismatch)
	case rec != nil && rec.inProgress:
		return nil, Fault{}, s.respondFunc(entry, s.errorAnswer(&apiError{
			status: http.StatusConflict, Type: errTypeIdempotency, Code: codeIdempotencyKeyInUse,
			Message: fmt.Sprintf("Another request with idempotency key %q is in progress. Try again later.", key),
		}), key, false, ResultConflict)
	case rec != nil && s.replaysSavedErrors():
		return nil, Fault{}, s.respondFunc(entry, rec.saved, key, true, ResultReplayed)
	case rec != nil && rec.refundID != "":
		// stripe-v2, meridian: the work under this key committed; answer its current state.
		current := s.dia.current(s.refundsByID[rec.refundID])
		return nil, Fault{}, s.respondFunc(entry, current, key, true, ResultReplayed)
	case rec != nil && !rec.failedWithoutEffect():
		return nil, Fault{}, s.respondFunc(entry, rec.saved, key, true, ResultReplayed)
	case rec != nil:
		// stripe-v2, meridian: the saved result is a failure with no effect: execute again.
		rec.inProgress = true
	case s.keys.len() >= s.cfg.MaxRememberedKeys:
		return nil, Fault{}, s.respondFunc(entry, s.errorAnswer(&apiError{
			status: http.StatusTooManyRequests, Type: errTypeRateLimit, Code: "rate_limit",
			Message: fmt.Sprintf("The simulator already remembers %d idempotency keys; try again later.", s.keys.len()),
		}), key, false, ResultRejected)
	default:
		rec = &keyRecord{fingerprint: fingerprint, firstSeen: now, inProgress: true, operationID: p.operationID()}
		s.keys.put(key, rec)
	}
	fault, ok := s.takeFaultLocked(stageExecution, p.operationID())
	if ok {
		entry.Faults = append(entry.Faults, fault.Kind)
	}
	return rec, fault, nil
}

// execute runs a request that was admitted, applying its execution fault.
func (s *Simulator) execute(w http.ResponseWriter, r *http.Request, key string, p refundParams, rec *keyRecord, entry *ReceivedRequest, fault Fault) {
	if fault.Kind != "" {
		s.log.Info("fault applied", "kind", fault.Kind, "operation_id", p.operationID(), "idempotency_key", key)
	}
	switch fault.Kind {
	case FaultRejectValidation:
		a := s.errorAnswer(invalidRequest(codeParameterInvalid, "amount",
			"The refund was rejected before execution (simulated reject-validation fault)."))
		s.save(rec, a, nil)
		s.respond(w, entry, a, key, false, ResultRejected)
		return
	case Fault5xxBeforeCommit:
		a := s.errorAnswer(&apiError{status: http.StatusInternalServerError, Type: errTypeAPI,
			Message: "An unexpected error occurred (simulated 5xx-before-commit fault)."})
		s.save(rec, a, nil)
		s.respond(w, entry, a, key, false, ResultFailed)
		return
	}

	ref := s.commit(rec, key, p, entry, fault.Kind == FaultDecline)
	success := s.dia.created(ref)
	result := ResultCreated
	if ref.Declined {
		result = ResultDeclined
	}
	switch fault.Kind {
	case Fault5xxAfterCommit:
		a := s.errorAnswer(&apiError{status: http.StatusInternalServerError, Type: errTypeAPI,
			Message: "An unexpected error occurred (simulated 5xx-after-commit fault)."})
		s.save(rec, a, ref)
		s.respond(w, entry, a, key, false, ResultFailed)
	case FaultLoseResponseAfterCommit:
		s.save(rec, success, ref)
		s.record(entry, 0, false, ref.ID, ResultLost)
		abortConnection(w)
	case FaultHoldResponse:
		release := s.beginHold()
		select {
		case <-release:
		case <-r.Context().Done():
		case <-s.done:
		}
		s.endHold()
		s.save(rec, success, ref)
		if r.Context().Err() != nil {
			s.record(entry, 0, false, ref.ID, result) // the client left; nobody to answer
			return
		}
		s.respond(w, entry, success, key, false, result)
	default:
		s.save(rec, success, ref)
		s.respond(w, entry, success, key, false, result)
	}
}

// commit creates the refund (declined: as a refund that moved nothing),
// counts it, and ties it to its key at once: a retrieve by key finds it
// even while its answer is still held.
func (s *Simulator) commit(rec *keyRecord, key string, p refundParams, entry *ReceivedRequest, declined bool) *refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := &refund{
		ID:             s.dia.refundID(len(s.refunds) + 1),
		IdempotencyKey: key,
		Operation:      p.operationID(),
		Amount:         p.Amount,
		Currency:       p.Currency,
		Order:          p.Order,
		Declined:       declined,
		Metadata:       cloneMetadata(p.Metadata),
		Created:        s.clock.now().Unix(),
	}
	s.refunds = append(s.refunds, ref)
	s.refundsByID[ref.ID] = ref
	op := ref.Operation
	s.refundsByOp[op] = append(s.refundsByOp[op], ref)
	var c *Counters
	if op != "" {
		c = s.countersLocked(op)
	}
	if declined {
		s.totals.RefundsDeclined++
		if c != nil {
			c.RefundsDeclined++
		}
	} else {
		s.totals.RefundsCreated++
		if c != nil {
			c.RefundsCreated++
		}
	}
	rec.refundID = ref.ID
	entry.RefundID = ref.ID
	return ref
}

// save stores the result of an execution under its key and ends it.
func (s *Simulator) save(rec *keyRecord, a answer, ref *refund) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.saved = a
	rec.inProgress = false
	if ref != nil {
		rec.refundID = ref.ID
	}
}

// record completes a request's log entry.
func (s *Simulator) record(entry *ReceivedRequest, status int, replayed bool, refundID string, result RequestResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entry.Status, entry.Replayed, entry.Result = status, replayed, result
	if refundID != "" {
		entry.RefundID = refundID
	}
}

// respond records the answer in the log, then writes it, so the ledger
// already shows a request when its client reads the response.
func (s *Simulator) respond(w http.ResponseWriter, entry *ReceivedRequest, a answer, key string, replayed bool, result RequestResult) {
	s.record(entry, a.status, replayed, "", result)
	s.writeAnswer(w, a, key, entry.Seq, replayed)
}

func (s *Simulator) respondFunc(entry *ReceivedRequest, a answer, key string, replayed bool, result RequestResult) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { s.respond(w, entry, a, key, replayed, result) }
}

// errSimulatorClosed ends a delay when Close is called.
var errSimulatorClosed = errors.New("provider simulator closed")

// sleep waits d of real time, or until ctx ends or Close is called.
func (s *Simulator) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return errSimulatorClosed
	}
}

// abandon ends a delayed request without executing it: silently when the
// client left, with a 503 (nothing executed, nothing saved) on Close.
func (s *Simulator) abandon(w http.ResponseWriter, entry *ReceivedRequest, key string, cause error) {
	if !errors.Is(cause, errSimulatorClosed) {
		s.record(entry, 0, false, "", ResultAbandoned)
		return
	}
	s.respond(w, entry, s.errorAnswer(&apiError{status: http.StatusServiceUnavailable, Type: errTypeAPI,
		Message: "The simulator is shutting down; nothing was executed."}), key, false, ResultAbandoned)
}

// abortConnection closes the client's connection without a response. It
// hijacks the connection when it can; otherwise (HTTP/2) it aborts the
// handler, which resets the stream.
func abortConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
