package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const twoNodes = `{"items": [
 {"metadata": {"name": "lab-control-plane"}, "spec": {"podCIDR": "10.244.0.0/24"},
  "status": {"addresses": [{"type": "Hostname", "address": "lab-control-plane"}, {"type": "InternalIP", "address": "172.18.0.3"}]}},
 {"metadata": {"name": "lab-worker"}, "spec": {"podCIDR": "10.244.1.0/24"},
  "status": {"addresses": [{"type": "InternalIP", "address": "fc00::3"}, {"type": "InternalIP", "address": "172.18.0.2"}]}},
 {"metadata": {"name": "joining"}, "spec": {}, "status": {"addresses": [{"type": "InternalIP", "address": "172.18.0.4"}]}}
]}`

func TestParseNodesKeepsNodesWithACIDRAndAnIPv4Address(t *testing.T) {
	nodes, err := parseNodes([]byte(twoNodes))
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{"lab-control-plane", "10.244.0.0/24", "172.18.0.3"}, {"lab-worker", "10.244.1.0/24", "172.18.0.2"}}
	if !reflect.DeepEqual(nodes, want) {
		t.Fatalf("got %v, want %v", nodes, want)
	}
}

func TestCNIConfigIsPtpOverTheNodesCIDR(t *testing.T) {
	data, err := cniConfig("10.244.1.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var config struct {
		Plugins []struct {
			Type string
			IPAM struct {
				Type   string
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(data, &config); err != nil {
		t.Fatal(err)
	}
	if config.Plugins[0].Type != "ptp" || config.Plugins[0].IPAM.Type != "host-local" ||
		config.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" {
		t.Fatalf("config %s", data)
	}
	if _, err := cniConfig("not a cidr"); err == nil {
		t.Fatal("a bad podCIDR gave a config")
	}
}

func TestRouteArgs(t *testing.T) {
	got := routeArgs(Node{"w", "10.244.1.0/24", "172.18.0.2"})
	want := []string{"route", "replace", "10.244.1.0/24", "via", "172.18.0.2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

func TestWriteIfChangedWritesOnlyANewContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.d", "10.conflist")
	for i, want := range []bool{true, false} {
		changed, err := writeIfChanged(path, []byte("a"))
		if err != nil || changed != want {
			t.Fatalf("write %d: changed %v err %v", i, changed, err)
		}
	}
	if data, _ := os.ReadFile(path); string(data) != "a" {
		t.Fatalf("file holds %q", data)
	}
}
