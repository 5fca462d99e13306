//go:build !race

package simworld_test

const raceEnabled = false
