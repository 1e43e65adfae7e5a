package analyze

import "strings"

// GoCaller names the Go code that made the cgo call on s: the first frame
// past cgo's generated stub (pkg._Cfunc_name) that is not the Go runtime,
// with the function it was inlined into, if any ("main.(*t).buffer,
// inlined in main.(*t).open"). "" when s has no cgo call. The table's top
// frame of such a stack is C glue; this is the application's own code.
func GoCaller(s Stack) string {
	for i, f := range s.Frames {
		if !strings.Contains(f.Function, "._Cfunc_") {
			continue
		}
		for j := i + 1; j < len(s.Frames); j++ {
			g := s.Frames[j]
			if g.Function == "" || strings.HasPrefix(g.Function, "runtime.") || strings.Contains(g.Function, "._Cfunc_") {
				continue
			}
			if !g.Inlined {
				return g.Function
			}
			for _, h := range s.Frames[j+1:] {
				if !h.Inlined {
					return g.Function + ", inlined in " + h.Function
				}
			}
			return g.Function
		}
		return ""
	}
	return ""
}
