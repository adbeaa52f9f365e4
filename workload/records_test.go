package main

import (
	"slices"
	"testing"

	"cpulab/internal/cgroup"
	"cpulab/internal/contracttest"
	"cpulab/internal/loadgen"
	"cpulab/internal/record"
	"cpulab/internal/service"
)

// The records each subcommand writes carry exactly the JSON keys of the
// raw log's contract (throttlelab/model/records.py, exported as
// testdata/records.json).
func TestRecordsWriteTheKeysOfTheContract(t *testing.T) {
	var contract contracttest.Records
	contracttest.Load(t, ".", "records.json", &contract)
	records := map[string]any{
		"header":    record.Header{},
		"round":     roundRecord{},
		"report":    spinReport{},
		"listening": listeningRecord{},
	}
	// written by the load generator's unexported types: its own test checks them
	inLoadgen := []string{"stats", "req"}
	for name, value := range records {
		contracttest.Check(t, name+" record", contract.Records[name], value)
	}
	for name := range contract.Records {
		if _, ok := records[name]; !ok && !slices.Contains(inLoadgen, name) {
			t.Errorf("the contract lists the record %q, which no test here holds to a struct", name)
		}
	}
	summaries := map[string]any{
		"info":  infoSummary{},
		"burst": burstSummary{},
		"spin":  spinSummary{},
		"serve": serveSummary{},
		"load":  loadgen.Summary{},
	}
	for name, value := range summaries {
		contracttest.Check(t, name+" summary", contract.Summaries[name], value)
	}
	if len(contract.Summaries) != len(summaries) {
		t.Errorf("the contract has summaries of %d commands, the workload %d", len(contract.Summaries), len(summaries))
	}
	objects := map[string]any{
		"cgroup":           cgroup.Record{},
		"env":              record.EnvVars{},
		"stats_answer":     service.Stats{},
		"endpoint_summary": loadgen.EndpointSummary{},
	}
	for name, value := range objects {
		contracttest.Check(t, name, contract.Objects[name], value)
	}
	if len(contract.Objects) != len(objects) {
		t.Errorf("the contract has %d objects of the workload, this test %d", len(contract.Objects), len(objects))
	}
}
