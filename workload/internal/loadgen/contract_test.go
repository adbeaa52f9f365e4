package loadgen

import (
	"testing"

	"cpulab/internal/contracttest"
)

// The load generator's records carry exactly the JSON keys of the raw log's
// contract (throttlelab/model/records.py, exported as testdata/records.json).
func TestRecordsWriteTheKeysOfTheContract(t *testing.T) {
	var contract contracttest.Records
	contracttest.Load(t, "../..", "records.json", &contract)
	contracttest.Check(t, "req record", contract.Records["req"], reqRecord{})
	contracttest.Check(t, "stats record", contract.Records["stats"], statsRecord{})
}

// The streams drawn from -seed are those throttlelab/model/seeds.py names
// (exported as testdata/seeds.json).
func TestStreamsAreThoseOfTheSeeds(t *testing.T) {
	var seeds contracttest.Seeds
	contracttest.Load(t, "../..", "seeds.json", &seeds)
	want := map[string]uint64{"work": workStream, "ping": pingStream, "balance": balanceStream}
	for name, stream := range want {
		got, ok := seeds.Streams[name]
		if !ok {
			t.Errorf("seeds.json names no %q stream (throttlelab/model/seeds.py WORKLOAD_STREAMS)", name)
		} else if got != stream {
			t.Errorf("%s stream: seeds.json says %d, the load generator draws from %d", name, got, stream)
		}
	}
	if len(seeds.Streams) != len(want) {
		t.Errorf("seeds.json names %d streams, the load generator draws %d", len(seeds.Streams), len(want))
	}
}
