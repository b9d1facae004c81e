package inc

import (
	"os"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
)

func udpErrs(t testing.TB, lab *fabric.Lab, node string) string {
	var out string
	_ = netns.Do(names.NSName(lab.Topo.Lab, node), func() error {
		b, _ := os.ReadFile("/proc/thread-self/net/snmp")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Udp:") {
				out += l + " | "
			}
		}
		return nil
	})
	return out
}
