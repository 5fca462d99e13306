//go:build !simbugs

package domain

// planted reports whether bug is planted: never, in this build. It is a
// constant false the compiler folds away at every site.
func planted(string) bool { return false }
