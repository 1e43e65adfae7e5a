package symbolize

import "fmt"

// safely runs fn and turns a panic into an error. debug/elf and debug/dwarf
// have panicked on malformed input before, and a target can map any file,
// so nothing read from an object may crash the tracer.
func safely(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: malformed input: %v", what, r)
		}
	}()
	return fn()
}
