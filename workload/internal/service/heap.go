package service

import "runtime"

// heapNode is 64 bytes holding two pointers, so a live heap of them gives
// the garbage collector real marking work, unlike one big byte slice.
type heapNode struct {
	next, link *heapNode
	payload    [6]uint64
}

const nodeBytes = 64

// buildLiveHeap allocates mb MiB of nodes as a list whose extra links point
// back into the list, and returns its head (nil for 0).
func buildLiveHeap(mb int) *heapNode {
	n := mb << 20 / nodeBytes
	nodes := make([]*heapNode, n)
	for i := range nodes {
		nodes[i] = &heapNode{payload: [6]uint64{uint64(i)}}
		if i > 0 {
			nodes[i-1].next = nodes[i]
			nodes[i].link = nodes[i/2]
		}
	}
	if n == 0 {
		return nil
	}
	return nodes[0]
}

func (h *heapNode) count() int {
	n := 0
	for ; h != nil; h = h.next {
		n++
	}
	return n
}

// pageSize is the stride at which allocations are touched.
const pageSize = 4096

// allocateAndDrop allocates n bytes and writes one byte per page, so the
// memory is really faulted in and the allocation really costs, then drops it.
func allocateAndDrop(n int64) {
	if n <= 0 {
		return
	}
	buf := make([]byte, n)
	for i := 0; i < len(buf); i += pageSize {
		buf[i] = byte(i)
	}
	runtime.KeepAlive(buf)
}
