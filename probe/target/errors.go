package target

import "errors"

// ErrNoAllocator means no object of the process exports malloc (probe
// returns it as probe.ErrNoAllocator).
var ErrNoAllocator = errors.New("no allocator found")
