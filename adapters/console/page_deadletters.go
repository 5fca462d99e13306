package console

import (
	"net/http"

	"opledger/adapters/transport"
)

// maxDeadLettersShown bounds the dead letters listed.
const maxDeadLettersShown = 200

type deadLettersView struct {
	Configured bool
	Letters    []transport.DeadLetter
	Waiting    int // not yet resubmitted
}

// deadLetters: GET /ui/dead-letters, the transport's dead letters, oldest
// first, with resubmit for operators.
func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, v *visit) error {
	vw := deadLettersView{Configured: c.cfg.DeadLetters != nil}
	if vw.Configured {
		dead, err := c.cfg.DeadLetters.ListDeadLetters(r.Context(), maxDeadLettersShown)
		if err != nil {
			return err
		}
		vw.Letters = dead
		for _, dl := range dead {
			if dl.Resubmitted == nil {
				vw.Waiting++
			}
		}
	}
	c.render(w, r, v, http.StatusOK, "deadletters", "Dead letters", "dead-letters", vw)
	return nil
}
