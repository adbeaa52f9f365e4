package cgroup

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func p(v int64) *int64 { return &v }

func TestReadFromFixtureTrees(t *testing.T) {
	tests := []struct {
		tree      string
		want      Record
		wantError string // substring; "" means no error expected
	}{
		{
			tree: "v1-separate",
			want: Record{Version: 1, Path: "/kubepods/burstable/pod1/ctr1",
				QuotaUS: p(50000), PeriodUS: p(100000), BurstUS: p(0), Shares: p(102),
				Counters: Counters{Totals: Totals{NrPeriods: p(60), NrThrottled: p(20), ThrottledUsec: p(7052500), UsageUsec: p(3312000)}, Bursts: Bursts{NrBursts: p(3), BurstUsec: p(12500)}}},
		},
		{
			tree: "v1-combined",
			want: Record{Version: 1, Path: "/docker/0123abcd",
				PeriodUS: p(100000), Shares: p(1024),
				Counters: Counters{Totals: Totals{NrPeriods: p(0), NrThrottled: p(0), ThrottledUsec: p(0), UsageUsec: p(123456)}}},
		},
		{
			tree: "v1-container-mount",
			want: Record{Version: 1, Path: "/docker/0123abcd",
				QuotaUS: p(150000), PeriodUS: p(100000), BurstUS: p(20000), Shares: p(512),
				Counters: Counters{Totals: Totals{NrPeriods: p(60), NrThrottled: p(20), ThrottledUsec: p(7052500), UsageUsec: p(5)}, Bursts: Bursts{NrBursts: p(0), BurstUsec: p(0)}}},
		},
		{
			tree: "v1-no-cpuacct",
			want: Record{Version: 1, Path: "/job",
				QuotaUS: p(25000), PeriodUS: p(100000), Shares: p(256),
				Counters: Counters{Totals: Totals{NrPeriods: p(60), NrThrottled: p(20), ThrottledUsec: p(7052500)}, Bursts: Bursts{NrBursts: p(0), BurstUsec: p(0)}}},
		},
		{
			tree: "v2-limited",
			want: Record{Version: 2,
				Path:    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope",
				QuotaUS: p(200000), PeriodUS: p(100000), BurstUS: p(0), Weight: p(59),
				Counters: Counters{Totals: Totals{NrPeriods: p(60), NrThrottled: p(20), ThrottledUsec: p(7052500), UsageUsec: p(3312000)}, Bursts: Bursts{NrBursts: p(4), BurstUsec: p(51000)}}},
		},
		{
			tree: "v2-unlimited",
			want: Record{Version: 2, Path: "/user.slice/app.scope",
				PeriodUS: p(100000), Weight: p(100),
				Counters: Counters{Totals: Totals{NrPeriods: p(0), NrThrottled: p(0), ThrottledUsec: p(0), UsageUsec: p(42)}, Bursts: Bursts{NrBursts: p(0), BurstUsec: p(0)}}},
		},
		{
			tree: "v2-root",
			want: Record{Version: 2, Path: "/", Counters: Counters{Totals: Totals{UsageUsec: p(999)}}},
		},
		{
			tree:      "v2-no-cpu-controller",
			want:      Record{Version: 2, Path: "/system.slice/x.service", Counters: Counters{Totals: Totals{UsageUsec: p(7)}}},
			wantError: "cpu controller not enabled",
		},
		{
			tree: "v2-hybrid-unified",
			want: Record{Version: 2, Path: "/svc",
				QuotaUS: p(50000), PeriodUS: p(100000), Weight: p(17),
				Counters: Counters{Totals: Totals{NrPeriods: p(60), NrThrottled: p(20), ThrottledUsec: p(7052500), UsageUsec: p(3312000)}, Bursts: Bursts{NrBursts: p(0), BurstUsec: p(0)}}},
		},
		{
			tree:      "v2-bad-cpu-max",
			want:      Record{Version: 2, Path: "/bad", Weight: p(100), Counters: Counters{Totals: Totals{NrPeriods: p(60), NrThrottled: p(20), ThrottledUsec: p(7052500), UsageUsec: p(3312000)}, Bursts: Bursts{NrBursts: p(0), BurstUsec: p(0)}}},
			wantError: "cpu.max",
		},
		{
			tree:      "does-not-exist",
			want:      Record{Version: 2},
			wantError: "proc_cgroup",
		},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			dir := filepath.Join("testdata", tt.tree)
			got := ReadFrom(filepath.Join(dir, "root"), filepath.Join(dir, "proc_cgroup"))
			if tt.wantError == "" && got.Error != "" {
				t.Fatalf("unexpected error: %s", got.Error)
			}
			if tt.wantError != "" && !strings.Contains(got.Error, tt.wantError) {
				t.Fatalf("error %q does not mention %q", got.Error, tt.wantError)
			}
			got.Error = ""
			if g, w := toJSON(t, got), toJSON(t, tt.want); g != w {
				t.Errorf("record mismatch\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestReadHonoursEnvironment(t *testing.T) {
	dir := filepath.Join("testdata", "v1-separate")
	t.Setenv(EnvRoot, filepath.Join(dir, "root"))
	t.Setenv(EnvProcCgroup, filepath.Join(dir, "proc_cgroup"))
	got := Read()
	if got.Version != 1 || got.QuotaUS == nil || *got.QuotaUS != 50000 {
		t.Fatalf("Read() did not use the fixture tree: %+v", got)
	}
}

func TestParseProcCgroupRejectsMalformedLines(t *testing.T) {
	for _, text := range []string{"", "\n", "garbage", "1:cpu"} {
		if _, err := parseProcCgroup(text); err == nil {
			t.Errorf("parseProcCgroup(%q): want error", text)
		}
	}
}

func TestParseProcCgroupKeepsColonsInPath(t *testing.T) {
	ms, err := parseProcCgroup("0::/a:b/c\n")
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].path != "/a:b/c" {
		t.Errorf("path = %q", ms[0].path)
	}
}

func TestRecordJSONUsesNullForMissingValues(t *testing.T) {
	got := toJSON(t, Record{Version: 2, Path: "/", Counters: Counters{Totals: Totals{UsageUsec: p(5)}}})
	want := `{"version":2,"path":"/","quota_us":null,"period_us":null,"burst_us":null,` +
		`"weight":null,"shares":null,"nr_periods":null,"nr_throttled":null,` +
		`"throttled_usec":null,"usage_usec":5,"nr_bursts":null,"burst_usec":null}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestCountersSub(t *testing.T) {
	before := Counters{Totals: Totals{NrPeriods: p(10), NrThrottled: p(2), ThrottledUsec: p(100)}}
	after := Counters{Totals: Totals{NrPeriods: p(15), NrThrottled: p(5), ThrottledUsec: p(350), UsageUsec: p(9)}}
	d := after.Sub(before)
	if *d.NrPeriods != 5 || *d.NrThrottled != 3 || *d.ThrottledUsec != 250 {
		t.Errorf("delta = %+v", d)
	}
	if d.UsageUsec != nil {
		t.Errorf("usage delta should be nil when one side is missing, got %d", *d.UsageUsec)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
