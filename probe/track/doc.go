// Package track describes acquire/release pairs as data: which function of
// which library acquires a resource, which releases it, and where the
// handle is (the return value, an argument, or a pointer an argument points
// to). It parses the --track command-line syntax and --track-file files,
// and holds the presets users turn on by name.
package track
