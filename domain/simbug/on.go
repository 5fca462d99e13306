//go:build simbugs

package simbug

import (
	"sync/atomic"

	"opledger/domain"
)

// Enabled reports whether this build can plant bugs: true, it was built with
// the simbugs tag. Never ship such a binary.
const Enabled = true

var planted atomic.Value // Bug; "" when none

// On reports whether bug b is planted now.
func On(b Bug) bool {
	p, _ := planted.Load().(Bug)
	return p != "" && p == b
}

// Plant plants b (one bug at a time; "" plants none) and reports whether b
// is known (or "").
func Plant(b Bug) bool {
	if b != "" && !Known(b) {
		return false
	}
	planted.Store(b)
	domain.SetPlantedBug(string(b))
	return true
}
