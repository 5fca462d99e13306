package simbug

import "testing"

// In an ordinary build nothing can be planted; in a simbugs build exactly
// the bug planted is on, one at a time.
func TestPlant(t *testing.T) {
	for _, b := range All {
		if !Known(b) {
			t.Fatalf("%s is listed but not known", b)
		}
		if got := Plant(b); got != Enabled {
			t.Fatalf("Plant(%s) = %v in a build with Enabled = %v", b, got, Enabled)
		}
		for _, other := range All {
			if On(other) != (Enabled && other == b) {
				t.Fatalf("with %s planted, On(%s) = %v", b, other, On(other))
			}
		}
	}
	Plant("")
	if Known("made-up") || Plant("made-up") {
		t.Fatal("an unknown bug is planted")
	}
	for _, b := range All {
		if On(b) {
			t.Fatalf("%s still on after Plant(\"\")", b)
		}
	}
}
