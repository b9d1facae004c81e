package fabric

import (
	"fmt"
	"sort"

	"github.com/vishvananda/netlink"

	"github.com/ocsemu/ocsemu/dataplane/monoclock"
)

// QdiscStat is one root qdisc's counters (what `tc -s qdisc` shows), read
// over netlink in the node's namespace.
type QdiscStat struct {
	Node       string `json:"node"`
	Iface      string `json:"iface"`
	Kind       string `json:"kind"` // tbf, noqueue, ...
	RateBps    uint64 `json:"rate_bytes_per_s,omitempty"`
	Bytes      uint64 `json:"bytes"`
	Packets    uint32 `json:"packets"`
	Drops      uint32 `json:"drops"`
	Overlimits uint32 `json:"overlimits"`
	Requeues   uint32 `json:"requeues"`
	Backlog    uint32 `json:"backlog_bytes"`
	// TNs is when the kernel answered for this node (CLOCK_MONOTONIC; the
	// midpoint of the request):
	// one pass over a lab's nodes takes milliseconds, more on a busy host,
	// so rates must divide by each counter's own time.
	TNs int64 `json:"t_ns,omitempty"`
}

// QdiscStats reads the root qdisc of every interface of every node of the
// lab (loopback left out), sorted by node and interface.
func (l *Lab) QdiscStats() ([]QdiscStat, error) {
	var out []QdiscStat
	for _, n := range l.Topo.Nodes {
		h, err := l.Handle(n.Name)
		if err != nil {
			return nil, fmt.Errorf("qdisc stats of %s: %w", n.Name, err)
		}
		links, err := h.LinkList()
		if err != nil {
			return nil, fmt.Errorf("qdisc stats of %s: links: %w", n.Name, err)
		}
		ifName := make(map[int]string, len(links))
		for _, ln := range links {
			if ln.Attrs().Flags&0x8 == 0 && ln.Attrs().Name != "lo" { // IFF_LOOPBACK
				ifName[ln.Attrs().Index] = ln.Attrs().Name
			}
		}
		// One dump per namespace: the recorder reads every 20 ms. The
		// kernel answered between the two readings of the clock; their
		// midpoint halves the error a descheduled reader adds (stamped
		// after the reply alone, on a loaded machine, a 2.4 ms interval
		// after an 80 ms one read 24 times the port's rate).
		before := monoclock.Now()
		qs, err := h.QdiscList(nil)
		at := before + (monoclock.Now()-before)/2
		if err != nil {
			return nil, fmt.Errorf("qdisc stats of %s: %w", n.Name, err)
		}
		for _, q := range qs {
			a := q.Attrs()
			name, ok := ifName[a.LinkIndex]
			if a.Parent != netlink.HANDLE_ROOT || !ok {
				continue
			}
			st := QdiscStat{Node: n.Name, Iface: name, Kind: q.Type(), TNs: at}
			if t, ok := q.(*netlink.Tbf); ok {
				st.RateBps = t.Rate
			}
			if s := a.Statistics; s != nil {
				if s.Basic != nil {
					st.Bytes, st.Packets = s.Basic.Bytes, s.Basic.Packets
				}
				if s.Queue != nil {
					st.Drops, st.Overlimits, st.Requeues, st.Backlog = s.Queue.Drops, s.Queue.Overlimits, s.Queue.Requeues, s.Queue.Backlog
				}
			}
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Node < out[j].Node || out[i].Node == out[j].Node && out[i].Iface < out[j].Iface
	})
	return out, nil
}
