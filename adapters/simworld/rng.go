package simworld

import (
	"math/rand/v2"
	"time"
)

// rng is the schedule's one source of choices: a PCG seeded by the Spec.
// Only the goroutine holding the scheduler's baton draws from it, so the
// sequence of draws is the schedule.
type rng struct{ r *rand.Rand }

func newRNG(seed uint64) *rng {
	return &rng{r: rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc909))}
}

// chance reports true with probability p.
func (g *rng) chance(p float64) bool { return p > 0 && g.r.Float64() < p }

// intn returns a number in [0, n).
func (g *rng) intn(n int) int { return g.r.IntN(n) }

// between returns a duration in [lo, hi].
func (g *rng) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(g.r.Int64N(int64(hi-lo)+1))
}

// weighted picks an index by weight (every weight >= 0, at least one > 0).
func (g *rng) weighted(weights []float64) int {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	x := g.r.Float64() * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}
