//go:build simbugs

package domain

import "sync/atomic"

var plantedBug atomic.Value // string; "" when none

// planted reports whether bug is planted now.
func planted(bug string) bool {
	p, _ := plantedBug.Load().(string)
	return p != "" && p == bug
}

// SetPlantedBug plants bug in the pure model ("" plants none). Only a
// build with the tag simbugs has it; simbug.Plant calls it. Never ship such
// a binary.
func SetPlantedBug(bug string) { plantedBug.Store(bug) }
