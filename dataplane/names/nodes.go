package names

import (
	"fmt"
	"strconv"
	"strings"
)

// NSPrefix starts the name of every namespace emu creates.
const NSPrefix = "emu-"

// NSName is the namespace of a lab node. Lab names hold no '.', so the
// prefix "emu-<lab>." belongs to exactly one lab.
func NSName(lab, node string) string { return LabPrefix(lab) + node }

// LabPrefix is the namespace-name prefix of one lab.
func LabPrefix(lab string) string { return NSPrefix + lab + "." }

// LabOfNS returns the lab a namespace name belongs to, if it is one of
// ours and its lab part is a valid lab name.
func LabOfNS(ns string) (string, bool) {
	rest, ok := strings.CutPrefix(ns, NSPrefix)
	if !ok {
		return "", false
	}
	lab, _, ok := strings.Cut(rest, ".")
	return lab, ok && ValidLab(lab) == nil
}

// ServerName is the node name of server s in rack r.
func ServerName(r, s int) string { return "r" + strconv.Itoa(r) + "s" + strconv.Itoa(s) }

// ToRName is the node name of rack r's ToR.
func ToRName(r int) string { return "tor" + strconv.Itoa(r) }

// OCSName is the node name of OCS switch k.
func OCSName(k int) string { return "ocs" + strconv.Itoa(k) }

// EPSName is the node name of the packet core.
const EPSName = "eps"

// UplinkIface is the ToR-side name of uplink u.
func UplinkIface(u int) string { return "up" + strconv.Itoa(u) }

// ServerIface is a server's one interface, cabled to its ToR.
const ServerIface = "eth0"

// ToRServerIface is the ToR-side name of the port cabled to server i.
func ToRServerIface(i int) string { return "s" + strconv.Itoa(i) }

// CoreIface is a ToR's port to the packet core; the core names its
// port to rack r ToRName(r).
const CoreIface = "core"

// OCSPortIface is the OCS-side name of the port cabled to uplink u of rack r.
func OCSPortIface(r, u int) string { return fmt.Sprintf("tor%du%d", r, u) }

// ParseServer reads a server name "r<rack>s<index>" in the canonical form
// ServerName writes (no sign, no leading zeros).
func ParseServer(name string) (rack, idx int, ok bool) {
	rest, ok := strings.CutPrefix(name, "r")
	if !ok {
		return 0, 0, false
	}
	r, s, ok := strings.Cut(rest, "s")
	if !ok {
		return 0, 0, false
	}
	rack, ok1 := canonicalInt(r)
	idx, ok2 := canonicalInt(s)
	return rack, idx, ok1 && ok2
}

// ParseToR reads a ToR name "tor<rack>".
func ParseToR(name string) (rack int, ok bool) {
	rest, ok := strings.CutPrefix(name, "tor")
	if !ok {
		return 0, false
	}
	return canonicalInt(rest)
}

// canonicalInt reads a non-negative decimal without sign or leading zeros.
func canonicalInt(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
