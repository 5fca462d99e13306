//go:build race

package simworld_test

// raceEnabled: the race detector slows every schedule several times over.
const raceEnabled = true
