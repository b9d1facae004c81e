// Package loss describes random frame loss on lab ports: which port
// (node:iface, checked against the lab's blueprint), which direction, and
// what fraction, in parts per million. It is pure Go, so the scenario can
// check its loss settings anywhere; dataplane/loss/inject puts the rules
// into the kernel as a tc BPF program (this kernel has no netem).
package loss

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// Direction is the way frames cross a port, seen from the port's node.
type Direction string

const (
	// Ingress: frames the node receives on the port.
	Ingress Direction = "ingress"
	// Egress: frames the node sends on the port.
	Egress Direction = "egress"
	// Both: ingress and egress, two rules with the same fraction.
	Both Direction = "both"
)

// MaxPPM is 100%: every frame dropped.
const MaxPPM = limits.MaxLossPPM

// ParseDirection reads ingress, egress or both.
func ParseDirection(s string) (Direction, error) {
	switch d := Direction(s); d {
	case Ingress, Egress, Both:
		return d, nil
	}
	return "", fmt.Errorf("direction %q: want ingress, egress or both", s)
}

// Hooks returns the single directions d stands for.
func (d Direction) Hooks() []Direction {
	if d == Both {
		return []Direction{Ingress, Egress}
	}
	return []Direction{d}
}

// PercentToPPM converts a loss percentage (0 to 100) to parts per
// million, rounded to the nearest.
func PercentToPPM(p float64) (uint32, error) {
	if math.IsNaN(p) || p < 0 || p > 100 {
		return 0, fmt.Errorf("loss %v%%: want 0 to 100", p)
	}
	return uint32(math.Round(p * 1e4)), nil
}

// PPMToPercent is the percentage of a ppm fraction.
func PPMToPercent(ppm uint32) float64 { return float64(ppm) / 1e4 }

// Port is one interface of one lab node, with the blueprint's names.
type Port struct {
	Node  string `json:"node"`
	Iface string `json:"iface"`
	NS    string `json:"-"` // the node's namespace
}

func (p Port) String() string { return p.Node + ":" + p.Iface }

// Rule drops PPM parts per million of the frames that cross Port in
// Direction (a single direction: Ingress or Egress).
type Rule struct {
	Port      Port      `json:"port"`
	Direction Direction `json:"direction"`
	PPM       uint32    `json:"ppm"`
}

func (r Rule) String() string {
	return fmt.Sprintf("%s %s %g%%", r.Port, r.Direction, PPMToPercent(r.PPM))
}

// ErrBadPort is wrapped by every refusal of ParsePort.
var ErrBadPort = errors.New("invalid loss port")

// ParsePort checks a node:iface name against the blueprint and returns
// the port with the blueprint's own strings.
func ParsePort(t *topo.Topology, s string) (Port, error) {
	node, iface, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || node == "" || iface == "" {
		return Port{}, fmt.Errorf("%w: %q is not node:iface (e.g. %s)", ErrBadPort, s, strings.Join(examples(t), ", "))
	}
	n, ok := t.Node(node)
	if !ok {
		return Port{}, fmt.Errorf("%w: %q: lab %q has no node %q (e.g. %s)", ErrBadPort, s, t.Lab, node, strings.Join(examples(t), ", "))
	}
	ifs := t.Ifaces(n.Name)
	i := sort.SearchStrings(ifs, iface)
	if i == len(ifs) || ifs[i] != iface {
		return Port{}, fmt.Errorf("%w: %q: node %s has no interface %q (it has %s)", ErrBadPort, s, n.Name, iface, strings.Join(ifs, ", "))
	}
	return Port{Node: n.Name, Iface: ifs[i], NS: n.NS}, nil
}

// Ports lists every port of the blueprint (both ends of every link).
func Ports(t *topo.Topology) []Port {
	var out []Port
	for _, l := range t.Links {
		for _, e := range []topo.Endpoint{l.A, l.B} {
			n, _ := t.Node(e.Node)
			out = append(out, Port{Node: e.Node, Iface: e.Iface, NS: n.NS})
		}
	}
	return out
}

// Rules expands one setting (port, direction, percent) into rules, one
// per single direction.
func Rules(t *topo.Topology, port, direction string, percent float64) ([]Rule, error) {
	p, err := ParsePort(t, port)
	if err != nil {
		return nil, err
	}
	d, err := ParseDirection(direction)
	if err != nil {
		return nil, err
	}
	ppm, err := PercentToPPM(percent)
	if err != nil {
		return nil, err
	}
	var out []Rule
	for _, h := range d.Hooks() {
		out = append(out, Rule{Port: p, Direction: h, PPM: ppm})
	}
	return out, nil
}

func examples(t *topo.Topology) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range Ports(t) {
		n, _ := t.Node(p.Node)
		if !seen[n.Kind] {
			seen[n.Kind] = true
			out = append(out, p.String())
		}
	}
	return out
}
