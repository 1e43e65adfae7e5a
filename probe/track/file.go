package track

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// fileV1 is the --track-file format (YAML, or JSON, which YAML reads):
//
//	presets: [stdio, dirent]
//	pairs:
//	  - kind: pool.conn
//	    library: libpool.so
//	    acquire: [{function: pool_get, handle: ret}]
//	    release: [{function: pool_put, handle: arg1}]
type fileV1 struct {
	Presets []string   `yaml:"presets"`
	Pairs   []filePair `yaml:"pairs"`
}

type filePair struct {
	Kind    string     `yaml:"kind"`
	Library string     `yaml:"library"`
	Acquire []fileCall `yaml:"acquire"`
	Release []fileCall `yaml:"release"`
}

type fileCall struct {
	Function string `yaml:"function"`
	Handle   string `yaml:"handle"`
}

// ParseFile reads a --track-file. Unknown fields are errors, so a typo is
// never silently ignored.
func ParseFile(data []byte) ([]Pair, error) {
	var f fileV1
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse track file: %w", err)
	}
	var out []Pair
	for _, name := range f.Presets {
		ps, err := PresetPairs(name)
		if err != nil {
			return nil, fmt.Errorf("parse track file: %w", err)
		}
		out = append(out, ps...)
	}
	for i, fp := range f.Pairs {
		p := Pair{Kind: fp.Kind, Library: fp.Library}
		for _, c := range fp.Acquire {
			call, err := fileCallOf(c, Handle{Kind: Ret}, true)
			if err != nil {
				return nil, fmt.Errorf("parse track file: pair %d (%s): acquire: %w", i+1, fp.Kind, err)
			}
			p.Acquire = append(p.Acquire, call)
		}
		for _, c := range fp.Release {
			call, err := fileCallOf(c, Handle{Kind: Arg, Arg: 1}, false)
			if err != nil {
				return nil, fmt.Errorf("parse track file: pair %d (%s): release: %w", i+1, fp.Kind, err)
			}
			p.Release = append(p.Release, call)
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("parse track file: pair %d: %w", i+1, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parse track file: no presets and no pairs")
	}
	return out, nil
}

func fileCallOf(c fileCall, def Handle, acquire bool) (Call, error) {
	call := Call{Function: c.Function, Handle: def}
	if c.Handle != "" {
		h, err := ParseHandle(c.Handle, acquire)
		if err != nil {
			return Call{}, fmt.Errorf("%s: %w", c.Function, err)
		}
		call.Handle = h
	}
	return call, nil
}
