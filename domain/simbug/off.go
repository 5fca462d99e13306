//go:build !simbugs

package simbug

// Enabled reports whether this build can plant bugs: false, it was built
// without the simbugs tag.
const Enabled = false

// On reports whether bug b is planted: never, in this build. It is a
// constant false the compiler folds away at every site.
func On(Bug) bool { return false }

// Plant refuses: this build has no registry. It returns false.
func Plant(Bug) bool { return false }
