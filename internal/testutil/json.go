package testutil

import (
	"encoding/json"
	"fmt"
	"io"
)

// DecodeJSON reads one JSON document of the given schema (its "schema"
// field: leakscope.report/v1, leakscope.diff/v1) from r into v, as a
// consumer of leakscope's JSON would: fields v does not know are ignored,
// another schema is an error.
func DecodeJSON(r io.Reader, schema string, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read %s: %w", schema, err)
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("parse %s: %w", schema, err)
	}
	if head.Schema != schema {
		return fmt.Errorf("parse %s: schema %q", schema, head.Schema)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("parse %s: %w", schema, err)
	}
	return nil
}
