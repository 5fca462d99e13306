package simworld

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"opledger/domain/simbug"
)

// Spec is one schedule: everything a run draws comes from Seed, within the
// limits the rest of the spec sets. Two runs of one Spec (on the memory
// store) take the same steps and print the same trace hash.
type Spec struct {
	// Seed drives every choice of the schedule (a PCG).
	Seed uint64
	// Ops is how many refund operations the agents request (1..MaxOps).
	Ops int
	// Faults are the kinds the schedule may inject. Each schedule switches a
	// random subset of them on (swarm testing: a schedule with few kinds
	// reaches states that every kind at once would drown).
	Faults FaultSet
	// Steps bounds the chaos phase, in scheduler steps; the settle phase
	// that follows injects nothing and runs until the world is quiet.
	Steps int
	// Skip lists fault injections (by their order of drawing, from 1) that
	// the run skips: what shrinking removes one by one.
	Skip []int
	// Bug is the planted bug, in a build with -tags simbugs ("" none).
	Bug simbug.Bug
}

// Bounds of a Spec.
const (
	MaxOps   = 64
	MaxSteps = 100_000
)

// DefaultSteps is the chaos phase's length for ops operations.
func DefaultSteps(ops int) int { return 40 + 30*ops }

// Validate refuses a spec out of bounds.
func (s Spec) Validate() error {
	switch {
	case s.Ops < 1 || s.Ops > MaxOps:
		return fmt.Errorf("spec: ops %d outside [1, %d]", s.Ops, MaxOps)
	case s.Steps < 0 || s.Steps > MaxSteps:
		return fmt.Errorf("spec: steps %d outside [0, %d]", s.Steps, MaxSteps)
	case s.Faults&^AllFaults != 0:
		return fmt.Errorf("spec: fault set %x names unknown kinds", uint64(s.Faults))
	case s.Bug != "" && !simbug.Known(s.Bug):
		return fmt.Errorf("spec: unknown bug %q", s.Bug)
	}
	for _, k := range s.Skip {
		if k < 1 {
			return fmt.Errorf("spec: skipped injection %d: injections count from 1", k)
		}
	}
	return nil
}

// String is the compact form `opledger sim --replay` reads:
// s1.<seed hex>.o<ops>.n<steps>.f<fault set hex>[.k<i,j,...>][.b<bug>].
func (s Spec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s1.%016x.o%d.n%d.f%x", s.Seed, s.Ops, s.Steps, uint64(s.Faults))
	if len(s.Skip) > 0 {
		parts := make([]string, len(s.Skip))
		for i, k := range s.Skip {
			parts[i] = strconv.Itoa(k)
		}
		b.WriteString(".k" + strings.Join(parts, ","))
	}
	if s.Bug != "" {
		b.WriteString(".b" + string(s.Bug))
	}
	return b.String()
}

// ParseSpec reads the compact form String writes.
func ParseSpec(text string) (Spec, error) {
	parts := strings.Split(strings.TrimSpace(text), ".")
	if len(parts) < 5 || parts[0] != "s1" {
		return Spec{}, fmt.Errorf("replay %q: want s1.<seed>.o<ops>.n<steps>.f<faults>[.k<skips>][.b<bug>]", text)
	}
	var s Spec
	var err error
	if s.Seed, err = strconv.ParseUint(parts[1], 16, 64); err != nil {
		return Spec{}, fmt.Errorf("replay %q: seed: %w", text, err)
	}
	for _, p := range parts[2:] {
		if p == "" {
			return Spec{}, fmt.Errorf("replay %q: empty part", text)
		}
		val := p[1:]
		switch p[0] {
		case 'o':
			s.Ops, err = strconv.Atoi(val)
		case 'n':
			s.Steps, err = strconv.Atoi(val)
		case 'f':
			var f uint64
			f, err = strconv.ParseUint(val, 16, 64)
			s.Faults = FaultSet(f)
		case 'k':
			for _, k := range strings.Split(val, ",") {
				n, perr := strconv.Atoi(k)
				if perr != nil {
					err = perr
					break
				}
				s.Skip = append(s.Skip, n)
			}
		case 'b':
			s.Bug = simbug.Bug(val)
		default:
			err = fmt.Errorf("unknown part %q", p)
		}
		if err != nil {
			return Spec{}, fmt.Errorf("replay %q: %w", text, err)
		}
	}
	slices.Sort(s.Skip)
	s.Skip = slices.Compact(s.Skip)
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("replay %q: %w", text, err)
	}
	return s, nil
}

// skipped reports whether injection n is to be skipped.
func (s Spec) skipped(n int) bool {
	_, found := slices.BinarySearch(s.Skip, n)
	return found
}

// ScheduleSeed derives schedule i's seed from a sweep's seed (SplitMix64),
// so any schedule of a sweep replays on its own.
func ScheduleSeed(sweep uint64, i int) uint64 {
	z := sweep + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
