package loadgen

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// balancedHost is the host name in request URLs. The transport pools
// connections per host, so one name puts every target's connections in one
// pool; the dialer, not the URL, decides where a connection goes.
const balancedHost = "cpulab-balanced"

// balancer picks a target for each NEW connection, as kube-proxy does: a
// connection is bound to one backend for its life and reused, so backends
// see uneven load when there are few connections.
type balancer struct {
	addrs  []string
	dialer net.Dialer

	mu  sync.Mutex
	rng *rand.Rand

	nextConnID atomic.Int64
	conns      []atomic.Int64 // connections opened per target
}

func newBalancer(targets []string, seed uint64) *balancer {
	b := &balancer{
		rng:    rand.New(rand.NewPCG(seed, balanceStream)),
		conns:  make([]atomic.Int64, len(targets)),
		dialer: net.Dialer{Timeout: 5 * time.Second},
	}
	for _, t := range targets {
		b.addrs = append(b.addrs, hostPort(t))
	}
	return b
}

// trackedConn remembers which target and connection served a request.
type trackedConn struct {
	net.Conn
	target int
	id     int64
}

// dial ignores addr (always balancedHost) and connects to a random target.
func (b *balancer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	b.mu.Lock()
	target := b.rng.IntN(len(b.addrs))
	b.mu.Unlock()
	conn, err := b.dialer.DialContext(ctx, "tcp", b.addrs[target])
	if err != nil {
		return nil, err
	}
	b.conns[target].Add(1)
	return &trackedConn{Conn: conn, target: target, id: b.nextConnID.Add(1) - 1}, nil
}

func (b *balancer) connectionsPerTarget() []int64 {
	out := make([]int64, len(b.conns))
	for i := range b.conns {
		out[i] = b.conns[i].Load()
	}
	return out
}

// transport reuses connections, like a long-lived client behind a Service.
// maxConns bounds the connections ever open at once (0: no bound). Without a
// bound, a request that waits for a new connection may be served by one
// another request just released, and net/http then keeps the late dial as an
// extra idle connection: a closed loop of N workers would end with more than
// N connections, and per-connection balancing would no longer be one
// connection per worker. Proxy stays nil: traffic goes only to the targets.
func (b *balancer) transport(maxConns int) *http.Transport {
	return &http.Transport{
		DialContext:         b.dial,
		MaxIdleConns:        0, // no limit
		MaxIdleConnsPerHost: 1 << 20,
		MaxConnsPerHost:     maxConns,
		IdleConnTimeout:     0, // keep connections for the whole run
		DisableCompression:  true,
	}
}
