// podnet is the pod network of the lab's kind clusters (throttlelab; the node images
// made here carry no kindnetd, which has no released module). It runs on every node with the
// host's network: it writes the node's CNI config (ptp and host-local over the node's podCIDR)
// and keeps a route to every other node's podCIDR through that node's InternalIP. Standard
// library only; routes are set by the node's own `ip`, run chrooted into the node's root.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount"

// Node is what podnet reads of a node.
type Node struct {
	Name    string
	PodCIDR string
	Address string // the InternalIP
}

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			PodCIDR string `json:"podCIDR"`
		} `json:"spec"`
		Status struct {
			Addresses []struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			} `json:"addresses"`
		} `json:"status"`
	} `json:"items"`
}

// parseNodes reads a NodeList; a node without a podCIDR or an InternalIP is left out.
func parseNodes(body []byte) ([]Node, error) {
	var list nodeList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the node list is not JSON: %w", err)
	}
	var nodes []Node
	for _, item := range list.Items {
		node := Node{Name: item.Metadata.Name, PodCIDR: item.Spec.PodCIDR}
		for _, a := range item.Status.Addresses {
			if a.Type == "InternalIP" && net.ParseIP(a.Address).To4() != nil {
				node.Address = a.Address
				break
			}
		}
		if node.PodCIDR != "" && node.Address != "" {
			nodes = append(nodes, node)
		}
	}
	return nodes, nil
}

// cniConfig is the node's CNI config list for its podCIDR.
func cniConfig(podCIDR string) ([]byte, error) {
	if _, _, err := net.ParseCIDR(podCIDR); err != nil {
		return nil, fmt.Errorf("podCIDR %q: %w", podCIDR, err)
	}
	config := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "throttlelab",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": []any{[]any{map[string]any{"subnet": podCIDR}}},
					"routes": []any{map[string]any{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	out, err := json.MarshalIndent(config, "", "  ")
	return append(out, '\n'), err
}

// routeArgs are the `ip` arguments of the route to another node's pods.
func routeArgs(other Node) []string {
	return []string{"route", "replace", other.PodCIDR, "via", other.Address}
}

type client struct {
	http   *http.Client
	server string
}

func newClient() (*client, error) {
	ca, err := os.ReadFile(filepath.Join(serviceAccount, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in the service account's ca.crt")
	}
	server := os.Getenv("CONTROL_PLANE_ENDPOINT") // kind patches this in (the API server without kube-proxy)
	if server == "" {
		server = net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	}
	return &client{
		http:   &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		server: "https://" + server,
	}, nil
}

func (c *client) nodes() ([]Node, error) {
	token, err := os.ReadFile(filepath.Join(serviceAccount, "token"))
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest("GET", c.server+"/api/v1/nodes", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/nodes: HTTP %d: %s", resp.StatusCode, body)
	}
	return parseNodes(body)
}

// writeIfChanged replaces path with data (through a file beside it) unless it holds data already.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

func sync(c *client, self, config, root, ip string, routed map[string]string) error {
	nodes, err := c.nodes()
	if err != nil {
		return err
	}
	found := false
	for _, node := range nodes {
		if node.Name == self {
			found = true
			data, err := cniConfig(node.PodCIDR)
			if err != nil {
				return err
			}
			changed, err := writeIfChanged(config, data)
			if err != nil {
				return err
			}
			if changed {
				fmt.Printf("podnet: %s: pods in %s (%s)\n", self, node.PodCIDR, config)
			}
			continue
		}
		if routed[node.PodCIDR] == node.Address {
			continue
		}
		cmd := exec.Command(ip, routeArgs(node)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir = "/"
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", routeArgs(node), err, out)
		}
		routed[node.PodCIDR] = node.Address
		fmt.Printf("podnet: %s: route to %s's pods %s via %s\n", self, node.Name, node.PodCIDR, node.Address)
	}
	if !found {
		return fmt.Errorf("node %s has no podCIDR yet", self)
	}
	return nil
}

func main() {
	config := flag.String("cni-config", "/host/etc/cni/net.d/10-throttlelab.conflist", "the CNI config file to write")
	root := flag.String("root", "/host", "the node's root, where `ip` is run")
	ip := flag.String("ip", "/usr/sbin/ip", "the node's ip command, inside -root")
	every := flag.Duration("every", 10*time.Second, "how often to read the nodes")
	flag.Parse()
	self := os.Getenv("NODE_NAME")
	if self == "" {
		fmt.Fprintln(os.Stderr, "podnet: NODE_NAME is not set (the DaemonSet sets it from spec.nodeName)")
		os.Exit(2)
	}
	c, err := newClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podnet:", err)
		os.Exit(1)
	}
	routed := map[string]string{}
	for {
		if err := sync(c, self, *config, *root, *ip, routed); err != nil {
			fmt.Fprintln(os.Stderr, "podnet:", err)
		}
		time.Sleep(*every)
	}
}
