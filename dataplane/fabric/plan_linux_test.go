package fabric

import (
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// The planned ifindexes: unique in each namespace, clear of lo and the
// fallback tunnel devices, different
// on the two ends of a pair (so carrier is reported at once), and OCS
// ports below the fast path's bound.
func TestPlanIndexes(t *testing.T) {
	for _, sp := range []topo.Spec{
		{Lab: "p", Kind: topo.FabricEPS, Racks: 3, ServersPerRack: 2, MTU: 1500},
		{Lab: "p", Kind: topo.FabricOCS, Racks: 64, ServersPerRack: 64, UplinksPerToR: 24, OCSSwitches: 1, Spread: topo.SpreadRoundRobin, MTU: 1500},
		{Lab: "p", Kind: topo.FabricHybrid, Racks: 4, ServersPerRack: 1, UplinksPerToR: 3, OCSSwitches: 2, Spread: topo.SpreadRoundRobin, MTU: 1500},
	} {
		tp := topo.Build(sp)
		idx := planIndexes(tp)
		for node, ifs := range idx {
			seen := map[int]string{}
			for iface, i := range ifs {
				// lo is 1; the kernel's fallback tunnel devices
				// (tunl0, gre0, sit0, ...) may hold the next ones.
				if i < farIfindexBase {
					t.Errorf("%s %s:%s: ifindex %d, below %d (lo and fallback tunnels)", sp.Kind, node, iface, i, farIfindexBase)
				}
				if other, dup := seen[i]; dup {
					t.Errorf("%s %s: %s and %s share ifindex %d", sp.Kind, node, iface, other, i)
				}
				seen[i] = iface
			}
		}
		for _, ln := range tp.Links {
			a, b := idx[ln.A.Node][ln.A.Iface], idx[ln.B.Node][ln.B.Iface]
			if a == 0 || b == 0 || a == b {
				t.Errorf("%s %s:%s <-> %s:%s: ifindexes %d and %d", sp.Kind, ln.A.Node, ln.A.Iface, ln.B.Node, ln.B.Iface, a, b)
			}
			if ln.Kind == topo.LinkUplink && b >= limits.MaxIfindex {
				t.Errorf("OCS port %s:%s: ifindex %d, the fast path takes < %d", ln.B.Node, ln.B.Iface, b, limits.MaxIfindex)
			}
		}
		if n := len(idx); n != len(tp.Nodes) {
			t.Errorf("%s: %d of %d nodes have ports planned", sp.Kind, n, len(tp.Nodes))
		}
	}
}
