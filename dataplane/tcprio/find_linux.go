package tcprio

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
)

// ErrNoMap is FindMap's error when the program is there without the map
// (one loaded by an older emu).
var ErrNoMap = errors.New("no such map")

// FindMap opens the map named mapName of the emu program attached at
// priority prio on link's hook parent (netlink.HANDLE_MIN_INGRESS or
// HANDLE_MIN_EGRESS) through h; prog, if not "", must be the program's
// name. It returns nil, nil when the hook has no such program, and
// ErrNoMap (wrapped) when the program is there without the map.
func FindMap(h *netlink.Handle, link netlink.Link, parent uint32, prio uint16, prog, mapName string) (*ebpf.Map, error) {
	name := link.Attrs().Name
	filters, err := nlsafe.Retry2(h.FilterList, link, parent)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) { // no clsact
			return nil, nil
		}
		return nil, fmt.Errorf("list filters of %s: %w", name, err)
	}
	for _, f := range filters {
		bf, ok := f.(*netlink.BpfFilter)
		if !ok || bf.Id == 0 || bf.Attrs().Priority != prio {
			continue
		}
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(bf.Id))
		if err != nil {
			return nil, fmt.Errorf("open program %d on %s: %w", bf.Id, name, err)
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			return nil, fmt.Errorf("program %d on %s: %w", bf.Id, name, err)
		}
		if prog != "" && info.Name != prog {
			continue
		}
		ids, _ := info.MapIDs()
		for _, id := range ids {
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				return nil, fmt.Errorf("open map %d on %s: %w", id, name, err)
			}
			if mi, err := m.Info(); err == nil && mi.Name == mapName {
				return m, nil
			}
			m.Close()
		}
		return nil, fmt.Errorf("program %s on %s: map %s: %w", info.Name, name, mapName, ErrNoMap)
	}
	return nil, nil
}
