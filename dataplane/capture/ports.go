// Package capture writes pcap files of lab interfaces. A port is named
// node:iface (tor0:up0, r0s0:eth0, ocs0:tor1u0); ParsePorts checks every
// name against the lab's blueprint before anything touches the kernel, and
// a pcap file's name is built only from the blueprint's own node and
// interface names, never from the user's string. The capture itself
// (capture_linux.go) reads an AF_PACKET socket opened inside the node's
// namespace and writes records with gopacket's pcapgo writer.
package capture

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/topo"
)

// Port is one interface of one lab node, as the blueprint names it.
type Port struct {
	Node  string // short node name: r0s0, tor1, ocs0, eps
	Iface string // interface name inside the node: eth0, s1, up0, tor1u0, core
	NS    string // the node's namespace
}

func (p Port) String() string { return p.Node + ":" + p.Iface }

// safeRE is what a node or interface name may hold to become part of a
// file name. Blueprint names always match it; the check guards the rule.
var safeRE = regexp.MustCompile(`^[a-z0-9]+$`)

// FileName is the pcap file name of a port, "<node>-<iface>.pcap".
func (p Port) FileName() (string, error) {
	if !safeRE.MatchString(p.Node) || !safeRE.MatchString(p.Iface) {
		return "", fmt.Errorf("port %q: node and interface names must hold only a-z and 0-9 to name a file", p.String())
	}
	return p.Node + "-" + p.Iface + ".pcap", nil
}

// ErrBadPort is wrapped by every refusal of ParsePorts.
var ErrBadPort = errors.New("invalid capture port")

// Ifaces returns the interfaces of a node, sorted, from the blueprint's links.
func Ifaces(t *topo.Topology, node string) []string {
	return t.Ifaces(node)
}

// Examples returns a few valid port names of a blueprint, one per kind of
// node where there is one, for error messages and help.
func Examples(t *topo.Topology) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range t.Links {
		for _, e := range []topo.Endpoint{l.A, l.B} {
			n, _ := t.Node(e.Node)
			if !seen[n.Kind] {
				seen[n.Kind] = true
				out = append(out, e.Node+":"+e.Iface)
			}
		}
	}
	return out
}

// ParsePorts reads a comma-separated list of node:iface names and checks
// each against the blueprint. It reports every bad name at once, with
// valid examples. The ports it returns carry the blueprint's strings.
func ParsePorts(t *topo.Topology, list string) ([]Port, error) {
	var ports []Port
	var errs []error
	seen := map[string]bool{}
	items := strings.Split(list, ",")
	if strings.TrimSpace(list) == "" {
		items = nil
	}
	for _, raw := range items {
		s := strings.TrimSpace(raw)
		node, iface, ok := strings.Cut(s, ":")
		switch {
		case s == "":
			errs = append(errs, fmt.Errorf("%w: empty name in %q", ErrBadPort, list))
			continue
		case !ok || node == "" || iface == "":
			errs = append(errs, fmt.Errorf("%w: %q is not node:iface (e.g. %s)", ErrBadPort, s, strings.Join(Examples(t), ", ")))
			continue
		}
		n, ok := t.Node(node)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %q: lab %q has no node %q (e.g. %s)", ErrBadPort, s, t.Lab, node, strings.Join(Examples(t), ", ")))
			continue
		}
		ifs := Ifaces(t, n.Name)
		i := sort.SearchStrings(ifs, iface)
		if i == len(ifs) || ifs[i] != iface {
			errs = append(errs, fmt.Errorf("%w: %q: node %s has no interface %q (it has %s)", ErrBadPort, s, n.Name, iface, strings.Join(ifs, ", ")))
			continue
		}
		p := Port{Node: n.Name, Iface: ifs[i], NS: n.NS}
		if _, err := p.FileName(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrBadPort, err))
			continue
		}
		if seen[p.String()] {
			errs = append(errs, fmt.Errorf("%w: %q is named twice", ErrBadPort, s))
			continue
		}
		seen[p.String()] = true
		ports = append(ports, p)
	}
	if len(items) == 0 {
		errs = append(errs, fmt.Errorf("%w: no port named; name them as node:iface, comma-separated (e.g. %s)", ErrBadPort, strings.Join(Examples(t), ",")))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ports, nil
}
