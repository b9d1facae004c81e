package fabric

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// vethEnd is one end of a veth pair to create.
type vethEnd struct {
	nsFd    int // the namespace it is created in
	name    string
	index   int // its ifindex in that namespace
	mac     net.HardwareAddr
	mtu     int
	up      bool
	txqueue int
}

// newVeth creates a veth pair in one RTM_NEWLINK request: each end
// directly in its namespace, with its ifindex, MAC and MTU, and up if
// asked. Knowing both ifindexes spares a lookup per end afterwards, and
// bringing ends up here spares a request each. (vishvananda/netlink's
// LinkAdd can set neither the peer's ifindex nor its flags.)
func newVeth(a, b vethEnd) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	req.AddData(ifInfo(a))
	for _, at := range endAttrs(a) {
		req.AddData(at)
	}
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("veth"))
	data := info.AddRtAttr(nl.IFLA_INFO_DATA, nil)
	peer := data.AddRtAttr(nl.VETH_INFO_PEER, ifInfo(b).Serialize())
	for _, at := range endAttrs(b) {
		peer.AddChild(at)
	}
	req.AddData(info)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("RTM_NEWLINK veth %s (ifindex %d) <-> %s (ifindex %d): %w", a.name, a.index, b.name, b.index, err)
	}
	return nil
}

func ifInfo(e vethEnd) *nl.IfInfomsg {
	m := nl.NewIfInfomsg(unix.AF_UNSPEC)
	m.Index = int32(e.index)
	if e.up {
		m.Flags, m.Change = unix.IFF_UP, unix.IFF_UP
	}
	return m
}

func endAttrs(e vethEnd) []*nl.RtAttr {
	at := []*nl.RtAttr{
		nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(e.name)),
		nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(e.mtu))),
		nl.NewRtAttr(unix.IFLA_ADDRESS, []byte(e.mac)),
		nl.NewRtAttr(unix.IFLA_TXQLEN, nl.Uint32Attr(uint32(e.txqueue))),
	}
	if e.nsFd >= 0 {
		at = append(at, nl.NewRtAttr(unix.IFLA_NET_NS_FD, nl.Uint32Attr(uint32(e.nsFd))))
	}
	return at
}
