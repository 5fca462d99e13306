package sim

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"opledger/domain/strictjson"
)

// maxAdminBody bounds a /_sim request body.
const maxAdminBody = 4 << 10

// The /_sim endpoints drive and observe the simulator. They are not counted
// in the ledger.

func (s *Simulator) handleLedger(w http.ResponseWriter, _ *http.Request) {
	s.writeAdmin(w, http.StatusOK, s.Ledger())
}

func (s *Simulator) handleExport(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := s.WriteLedgerExport(&buf); err != nil {
		s.writeAdminError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", s.dia.exportContentType())
	_, _ = w.Write(buf.Bytes())
}

func (s *Simulator) handleListFaults(w http.ResponseWriter, _ *http.Request) {
	faults := s.ArmedFaults()
	out := make([]faultJSON, 0, len(faults))
	for _, f := range faults {
		out = append(out, toFaultJSON(f))
	}
	s.writeAdmin(w, http.StatusOK, map[string]any{"armed": out})
}

// faultJSON is a Fault on the wire: the duration as a Go duration string.
type faultJSON struct {
	Kind        FaultKind `json:"kind"`
	OperationID string    `json:"operation_id,omitempty"`
	Duration    string    `json:"duration,omitempty"`
}

func toFaultJSON(f Fault) faultJSON {
	out := faultJSON{Kind: f.Kind, OperationID: f.OperationID}
	if f.Duration != 0 {
		out.Duration = f.Duration.String()
	}
	return out
}

func (s *Simulator) handleArm(w http.ResponseWriter, r *http.Request) {
	var in faultJSON
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeAdminError(w, http.StatusBadRequest, err)
		return
	}
	if e := checkText("operation_id", in.OperationID, maxMetadataValueLen); e != nil {
		s.writeAnswer(w, answer{status: e.status, body: e.stripeBody()}, "", 0, false)
		return
	}
	f := Fault{Kind: in.Kind, OperationID: in.OperationID}
	if in.Duration != "" {
		d, err := time.ParseDuration(in.Duration)
		if err != nil {
			s.writeAdminError(w, http.StatusBadRequest, fmt.Errorf("fault duration: %w", err))
			return
		}
		f.Duration = d
	}
	if err := s.Arm(f); err != nil {
		s.writeAdminError(w, http.StatusBadRequest, err)
		return
	}
	s.writeAdmin(w, http.StatusOK, map[string]any{"armed": toFaultJSON(f)})
}

func (s *Simulator) handleRelease(w http.ResponseWriter, _ *http.Request) {
	s.writeAdmin(w, http.StatusOK, map[string]int{"released": s.Release()})
}

func (s *Simulator) handleClock(w http.ResponseWriter, _ *http.Request) {
	s.writeAdmin(w, http.StatusOK, map[string]time.Time{"now": s.Now()})
}

func (s *Simulator) handleAdvance(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Advance string `json:"advance"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeAdminError(w, http.StatusBadRequest, err)
		return
	}
	d, err := time.ParseDuration(in.Advance)
	if err != nil {
		s.writeAdminError(w, http.StatusBadRequest, fmt.Errorf("advance: %w", err))
		return
	}
	now, err := s.Advance(d)
	if err != nil {
		s.writeAdminError(w, http.StatusBadRequest, err)
		return
	}
	s.writeAdmin(w, http.StatusOK, map[string]time.Time{"now": now})
}

// decodeAdmin reads a /_sim body strictly (domain/strictjson): exactly one
// JSON object, exact names, no duplicates, no unknown fields, valid UTF-8,
// at most maxAdminBody bytes.
func decodeAdmin(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		return fmt.Errorf("read request body (at most %d bytes): %w", maxAdminBody, err)
	}
	if err := strictjson.DecodeObject(body, v, strictjson.Options{}); err != nil {
		return fmt.Errorf("decode request body: %w", err)
	}
	return nil
}

// The /_sim answers have one shape whatever the profile: JSON, errors as
// {"error":{"type","message"}}.

func (s *Simulator) writeAdmin(w http.ResponseWriter, status int, v any) {
	s.writeAnswer(w, answer{status: status, body: mustJSON(v)}, "", 0, false)
}

func (s *Simulator) writeAdminError(w http.ResponseWriter, status int, err error) {
	e := &apiError{status: status, Type: errTypeInvalidRequest, Message: err.Error()}
	s.writeAnswer(w, answer{status: status, body: e.stripeBody()}, "", 0, false)
}
