// Package circuit is the pure model of optical circuit switches: ports are
// ToR uplinks cabled to an OCS, a circuit joins two ports of the same OCS,
// and a configuration is the set of circuits of every OCS. Circuits are
// full duplex (paper 001) or simplex, one direction only (paper 002's
// half-duplex stages). The diff of two configurations gives the ports that
// go dark. No kernel, no root: everything here is table-tested.
package circuit

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// Uplink is a ToR uplink port, written "tor<R>:<U>".
type Uplink struct {
	Rack int `json:"rack"`
	Port int `json:"port"`
}

func (u Uplink) String() string { return fmt.Sprintf("tor%d:%d", u.Rack, u.Port) }

// ParseUplink reads "tor2:1" (also "2:1").
func ParseUplink(s string) (Uplink, error) {
	r, p, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(s), "tor"), ":")
	if !ok {
		return Uplink{}, fmt.Errorf("uplink %q: want tor<rack>:<uplink>, e.g. tor0:1", s)
	}
	rack, err1 := strconv.Atoi(r)
	port, err2 := strconv.Atoi(p)
	if err1 != nil || err2 != nil || rack < 0 || port < 0 {
		return Uplink{}, fmt.Errorf("uplink %q: want tor<rack>:<uplink>, e.g. tor0:1", s)
	}
	return Uplink{Rack: rack, Port: port}, nil
}

// MarshalText writes "tor2:1".
func (u Uplink) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText reads "tor2:1".
func (u *Uplink) UnmarshalText(b []byte) error {
	v, err := ParseUplink(string(b))
	*u = v
	return err
}

// Circuit joins two uplinks through their OCS. A simplex circuit carries
// light from A to B only.
type Circuit struct {
	A       Uplink `json:"a" yaml:"a"`
	B       Uplink `json:"b" yaml:"b"`
	Simplex bool   `json:"simplex,omitempty" yaml:"simplex,omitempty"`
}

func (c Circuit) String() string {
	if c.Simplex {
		return c.A.String() + "->" + c.B.String()
	}
	return c.A.String() + "<->" + c.B.String()
}

// Config is the circuit map of every OCS at one moment.
type Config struct {
	Circuits []Circuit `json:"circuits" yaml:"circuits"`
}

// Layout is how uplinks are cabled to switches, taken from a fabric spec.
type Layout struct {
	Racks, Uplinks, Switches int
	HalfDuplex               bool
	// StrictHalfDuplex: each port is in at most one circuit per
	// configuration, in one direction (paper 002's eq. (6), paper 004's
	// eq. (8)); plain half duplex lets a port send into one simplex
	// circuit and receive from another.
	StrictHalfDuplex bool
	spec             topo.Spec
}

// LayoutOf returns the cabling of a validated fabric.
func LayoutOf(f topo.Spec) Layout {
	return Layout{Racks: f.Racks, Uplinks: f.UplinksPerToR, Switches: f.OCSSwitches, HalfDuplex: f.HalfDuplex || f.StrictHalfDuplex,
		StrictHalfDuplex: f.StrictHalfDuplex, spec: f}
}

// Switch returns the OCS switch and its port number an uplink is cabled to.
func (l Layout) Switch(u Uplink) (sw, port int) { return l.spec.UplinkSwitch(u.Rack, u.Port) }

// Ports returns every uplink of the fabric in rack-major order.
func (l Layout) Ports() []Uplink {
	var out []Uplink
	for r := 0; r < l.Racks; r++ {
		for u := 0; u < l.Uplinks; u++ {
			out = append(out, Uplink{r, u})
		}
	}
	return out
}

// Check validates an uplink against the layout.
func (l Layout) Check(u Uplink) error {
	if u.Rack >= l.Racks {
		return fmt.Errorf("%s: no rack %d (the fabric has %d racks)", u, u.Rack, l.Racks)
	}
	if u.Port >= l.Uplinks {
		return fmt.Errorf("%s: no uplink %d (ToRs have %d uplinks)", u, u.Port, l.Uplinks)
	}
	return nil
}

// Validate checks a configuration: ports exist, both ends of a circuit are
// on the same OCS, a circuit does not loop a ToR to itself, every port
// transmits into at most one circuit and receives from at most one (on a
// strict half-duplex fabric: is in at most one circuit at all), and the
// duplex mode matches the fabric.
func (l Layout) Validate(c Config) error {
	var errs []error
	tx := map[Uplink]Circuit{}
	rx := map[Uplink]Circuit{}
	inUse := map[Uplink]Circuit{} // strict half duplex
	for i, ci := range c.Circuits {
		where := fmt.Sprintf("circuit %d (%s)", i, ci)
		if err := errors.Join(l.Check(ci.A), l.Check(ci.B)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if ci.A.Rack == ci.B.Rack {
			errs = append(errs, fmt.Errorf("%s: both ends are on rack %d", where, ci.A.Rack))
			continue
		}
		swA, _ := l.Switch(ci.A)
		swB, _ := l.Switch(ci.B)
		if swA != swB {
			errs = append(errs, fmt.Errorf("%s: %s is cabled to ocs%d but %s to ocs%d; a circuit stays inside one switch", where, ci.A, swA, ci.B, swB))
			continue
		}
		if l.HalfDuplex && !ci.Simplex {
			errs = append(errs, fmt.Errorf("%s: the fabric is half duplex, so circuits must be simplex (one direction per stage)", where))
			continue
		}
		if !l.HalfDuplex && ci.Simplex {
			errs = append(errs, fmt.Errorf("%s: simplex circuits need ocs.duplex: half in the scenario", where))
			continue
		}
		use := func(m map[Uplink]Circuit, u Uplink, dir string) {
			if prev, ok := m[u]; ok {
				errs = append(errs, fmt.Errorf("%s: %s already %s circuit %s", where, u, dir, prev))
				return
			}
			m[u] = ci
		}
		if l.StrictHalfDuplex {
			strict := func(u Uplink, dir string) {
				if prev, ok := inUse[u]; ok {
					errs = append(errs, fmt.Errorf("%s: %s already %s circuit %s; the fabric is strictly half duplex, so a port is in one circuit per stage, in one direction", where, u, dir, prev))
					return
				}
				inUse[u] = ci
			}
			strict(ci.A, "is in")
			strict(ci.B, "is in")
			continue
		}
		if ci.Simplex {
			use(tx, ci.A, "transmits into")
			use(rx, ci.B, "receives from")
			continue
		}
		// A full-duplex circuit takes both directions of both ports: one
		// port in two circuits is one problem, not one per direction.
		for _, u := range []Uplink{ci.A, ci.B} {
			prev, ok := tx[u]
			if !ok {
				prev, ok = rx[u]
			}
			if ok {
				errs = append(errs, fmt.Errorf("%s: %s is already in circuit %s", where, u, prev))
				continue
			}
			tx[u], rx[u] = ci, ci
		}
	}
	return errors.Join(errs...)
}

// Edges returns the directed light paths: frames a ToR sends on uplink
// `from` arrive on uplink `to` of the other ToR.
func (c Config) Edges() map[Uplink]Uplink {
	e := map[Uplink]Uplink{}
	for _, ci := range c.Circuits {
		e[ci.A] = ci.B
		if !ci.Simplex {
			e[ci.B] = ci.A
		}
	}
	return e
}

// Dark returns the uplinks whose circuit changes between two
// configurations: those whose transmit or receive peer differs. They carry
// nothing for the reconfiguration delay. The result is sorted.
func Dark(old, new Config) []Uplink {
	oe, ne := old.Edges(), new.Edges()
	orx, nrx := invert(oe), invert(ne)
	changed := map[Uplink]bool{}
	for _, m := range []struct{ a, b map[Uplink]Uplink }{{oe, ne}, {ne, oe}, {orx, nrx}, {nrx, orx}} {
		for u, p := range m.a {
			if q, ok := m.b[u]; !ok || q != p {
				changed[u] = true
			}
		}
	}
	out := make([]Uplink, 0, len(changed))
	for u := range changed {
		out = append(out, u)
	}
	SortUplinks(out)
	return out
}

func invert(e map[Uplink]Uplink) map[Uplink]Uplink {
	r := make(map[Uplink]Uplink, len(e))
	for a, b := range e {
		r[b] = a
	}
	return r
}

// SortUplinks sorts rack-major.
func SortUplinks(us []Uplink) {
	sort.Slice(us, func(i, j int) bool {
		if us[i].Rack != us[j].Rack {
			return us[i].Rack < us[j].Rack
		}
		return us[i].Port < us[j].Port
	})
}

// Connect returns c with a full-duplex (or, on half-duplex fabrics,
// simplex a->b) circuit between a and b, removing whatever circuits used
// either port before, as a lab user expects from "connect".
func (c Config) Connect(a, b Uplink, simplex bool) Config {
	out := Config{}
	for _, ci := range c.Circuits {
		if touches(ci, a) || touches(ci, b) {
			continue
		}
		out.Circuits = append(out.Circuits, ci)
	}
	out.Circuits = append(out.Circuits, Circuit{A: a, B: b, Simplex: simplex})
	return out
}

// Disconnect returns c without the circuits that use u.
func (c Config) Disconnect(u Uplink) (Config, bool) {
	out := Config{}
	found := false
	for _, ci := range c.Circuits {
		if touches(ci, u) {
			found = true
			continue
		}
		out.Circuits = append(out.Circuits, ci)
	}
	return out, found
}

func touches(c Circuit, u Uplink) bool { return c.A == u || c.B == u }

// RackGraph returns, for each rack, the uplinks that lead to each other
// rack over one circuit: graph[a][b] lists a's uplinks whose light reaches
// rack b. The routing controller builds its routes from it.
func (c Config) RackGraph() map[int]map[int][]Uplink {
	g := map[int]map[int][]Uplink{}
	for from, to := range c.Edges() {
		if g[from.Rack] == nil {
			g[from.Rack] = map[int][]Uplink{}
		}
		g[from.Rack][to.Rack] = append(g[from.Rack][to.Rack], from)
	}
	for _, m := range g {
		for _, us := range m {
			SortUplinks(us)
		}
	}
	return g
}
