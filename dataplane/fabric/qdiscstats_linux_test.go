package fabric_test

import (
	"context"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/probe"
)

// The shaped server links report their tbf with its rate, and a transfer
// shows up in the sender's egress counters: what `tc -s qdisc` would say.
func TestQdiscStatsCountTraffic(t *testing.T) {
	skipUnlessRoot(t)
	name := uniqueLab("qds")
	lab := deploy(t, spec(t, name, "{kind: eps, racks: 2, servers_per_rack: 1, rates: {server: 100Mbit}}"))
	before, err := lab.QdiscStats()
	if err != nil {
		t.Fatal(err)
	}
	hs := hosts(lab)
	res, err := probe.Transfer(context.Background(), hs[0], hs[1], probe.TransferOptions{Duration: 500 * time.Millisecond, CongestionControl: "cubic"})
	if err != nil {
		t.Fatal(err)
	}
	after, err := lab.QdiscStats()
	if err != nil {
		t.Fatal(err)
	}
	find := func(st []fabric.QdiscStat, node string) *fabric.QdiscStat {
		for i := range st {
			if st[i].Node == node && st[i].Kind == "tbf" {
				return &st[i]
			}
		}
		return nil
	}
	b, a := find(before, hs[0].Name), find(after, hs[0].Name)
	if a == nil || b == nil {
		t.Fatalf("no tbf on %s: %+v", hs[0].Name, after)
	}
	if a.RateBps != 100e6/8 {
		t.Errorf("tbf rate %d B/s, want %d", a.RateBps, uint64(100e6/8))
	}
	if sent := a.Bytes - b.Bytes; sent < uint64(res.Bytes) {
		t.Errorf("the sender's tbf counted %d bytes, less than the %d of payload that arrived", sent, res.Bytes)
	}
	t.Logf("%s:%s tbf: %d bytes, %d drops, %d overlimits", a.Node, a.Iface, a.Bytes-b.Bytes, a.Drops-b.Drops, a.Overlimits-b.Overlimits)
}
