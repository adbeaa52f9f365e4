// Package contracttest holds the workload's JSON records to the raw log's
// contract, which throttlelab/model/records.py states and exports as
// testdata/records.json (and model/seeds.py as testdata/seeds.json). Only
// tests import it.
package contracttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Records is testdata/records.json: every JSON key cpulab writes, by record
// type, by command (the summaries) and by nested object.
type Records struct {
	Schema    int                 `json:"schema"`
	Counters  []string            `json:"counters"`
	Records   map[string][]string `json:"records"`
	Summaries map[string][]string `json:"summaries"`
	Objects   map[string][]string `json:"objects"`
}

// Seeds is testdata/seeds.json: the PCG streams cpulab load draws from its
// -seed, by what each drives.
type Seeds struct {
	Streams map[string]uint64 `json:"streams"`
}

const regenerate = "regenerate it from throttlelab/model (tests/model/test_records.py and test_seeds.py say how)"

// Load reads one of the workload's testdata files; root is the path from
// the test's package to workload/.
func Load(t *testing.T, root, name string, into any) {
	t.Helper()
	path := filepath.Join(root, "testdata", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (%s)", path, err, regenerate)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v (%s)", path, err, regenerate)
	}
}

// Keys returns the JSON names of a struct type's fields, in their order; an embedded struct without
// a JSON name of its own contributes its fields in its place, as encoding/json writes them.
func Keys(typ reflect.Type) []string {
	var keys []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			keys = append(keys, Keys(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys = append(keys, name)
	}
	return keys
}

// Check fails the test unless the struct of value writes exactly the keys
// the contract lists for what (in any order), naming each one missing on
// either side.
func Check(t *testing.T, what string, want []string, value any) {
	t.Helper()
	if want == nil {
		t.Errorf("%s: not in the contract (throttlelab/model/records.py); add it there, or %s", what, regenerate)
		return
	}
	got := Keys(reflect.TypeOf(value))
	for _, key := range got {
		if !slices.Contains(want, key) {
			t.Errorf("%s: %T writes %q, which the contract (throttlelab/model/records.py) does not list", what, value, key)
		}
	}
	for _, key := range want {
		if !slices.Contains(got, key) {
			t.Errorf("%s: the contract (throttlelab/model/records.py) lists %q, which %T does not write", what, key, value)
		}
	}
}
