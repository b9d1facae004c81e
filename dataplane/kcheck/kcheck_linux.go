// Package kcheck finds out what this machine's kernel can do for emu
// (`emu doctor`): it tries each feature for real in throwaway namespaces
// (veth, qdiscs, clsact, cls_bpf, bridge, congestion controls) and measures
// how much TCP throughput one veth pair carries, the budget every scenario
// has to fit in. Nothing is touched in the root namespace.
package kcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
	"github.com/ocsemu/ocsemu/dataplane/probe"
)

// Check is one line of the doctor's report.
type Check struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Required bool   `json:"required"` // emu cannot work without it
	Detail   string `json:"detail"`
}

// Report is the doctor's full finding.
type Report struct {
	Checks []Check `json:"checks"`
	// VethGbps is the measured single-stream TCP goodput over an
	// unshaped veth pair, in Gbit/s (0 if not measured).
	VethGbps float64   `json:"veth_gbps"`
	When     time.Time `json:"when"`
}

// OK reports whether every required check passed.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if c.Required && !c.OK {
			return false
		}
	}
	return true
}

// ReportPath is where the last report is kept, for capacity warnings.
var ReportPath = "/run/emu/doctor.json"

// Options tune Run.
type Options struct {
	Measure time.Duration // veth throughput measurement; 0 skips it
}

// Run performs every check. It needs root for all but the first.
func Run(ctx context.Context, o Options) (*Report, error) {
	r := &Report{When: time.Now()}
	add := func(name string, required bool, err error, okDetail string) {
		c := Check{Name: name, Required: required, OK: err == nil, Detail: okDetail}
		if err != nil {
			c.Detail = err.Error()
		}
		r.Checks = append(r.Checks, c)
	}
	root := os.Geteuid() == 0
	add("root", true, boolErr(root, "not root: run emu with sudo"), "running as root")
	if !root {
		return r, nil
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	lab := "doctor" + hex.EncodeToString(b)
	nsA, nsB := "emu-"+lab+".a", "emu-"+lab+".b"
	defer func() { _ = netns.Delete(nsA); _ = netns.Delete(nsB) }()
	for _, n := range []string{nsA, nsB} {
		if err := netns.Create(n, netns.LoopbackUp); err != nil {
			add("network namespaces", true, err, "")
			return r, nil
		}
	}
	add("network namespaces", true, nil, "created under "+netns.RunDir)
	hA, hB, err := handles(nsA, nsB)
	if err != nil {
		add("netlink", true, err, "")
		return r, nil
	}
	defer hA.Close()
	defer hB.Close()

	va, err := veth(hA, hB, nsB)
	add("veth", true, err, "veth pair with peer created in another namespace")
	if err != nil {
		return r, nil
	}
	for _, q := range []struct {
		name     string
		required bool
		why      string
		qdisc    netlink.Qdisc
	}{
		{"tbf", true, "rate shaping of every link", &netlink.Tbf{Rate: 125e6, Limit: 1 << 20, Buffer: netlink.Xmittime(125e6, 1<<16)}},
		{"htb", false, "fabric.server_queue and fabric.switch_queue: fair (per-flow queues under a port's tbf)", netlink.NewHtb(netlink.QdiscAttrs{})},
		{"netem", false, "delay/loss emulation (optional; often present on VMs)", &netlink.Netem{Latency: 1000}},
		{"fq", false, "pacing qdisc (optional)", &netlink.Fq{}},
		{"fq_codel", false, "AQM (optional)", &netlink.FqCodel{}},
	} {
		attrs := q.qdisc.Attrs()
		attrs.LinkIndex, attrs.Parent, attrs.Handle = va.Attrs().Index, netlink.HANDLE_ROOT, netlink.MakeHandle(1, 0)
		err := hA.QdiscReplace(q.qdisc)
		add("qdisc "+q.name, q.required, missing(err), q.why)
		if err == nil {
			_ = hA.QdiscDel(q.qdisc)
		}
	}
	clsact := &netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: va.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}
	err = hA.QdiscAdd(clsact)
	add("qdisc clsact", true, missing(err), "hook for the OCS fast path")
	if err == nil {
		add("cls_bpf (direct-action)", true, bpfFilter(hA, va), "tc BPF program on ingress: the OCS circuit fast path")
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	add("bridge", false, missing(hA.LinkAdd(br)), "Linux bridge")
	add("tcp congestion control", false, ccCheck(), ccDetail())

	if o.Measure > 0 {
		res, err := probe.Transfer(ctx,
			probe.Host{Name: "a", NS: nsA, Addr: netip.MustParseAddr("10.99.0.1")},
			probe.Host{Name: "b", NS: nsB, Addr: netip.MustParseAddr("10.99.0.2")},
			probe.TransferOptions{Duration: o.Measure, Warmup: 200 * time.Millisecond})
		if err == nil {
			r.VethGbps = res.GoodputBps / 1e9
		}
		add("veth throughput", false, err, fmt.Sprintf("%.1f Gbit/s single TCP stream, unshaped (the machine's budget for all emulated traffic)", r.VethGbps))
	}
	return r, nil
}

// Save writes the report for later runs to compare demand against.
func Save(r *Report) error {
	if err := os.MkdirAll(filepath.Dir(ReportPath), 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(r, "", "  ")
	return os.WriteFile(ReportPath, data, 0o644)
}

// Load reads the last saved report.
func Load() (*Report, error) {
	data, err := os.ReadFile(ReportPath)
	if err != nil {
		return nil, err
	}
	var r Report
	return &r, json.Unmarshal(data, &r)
}

func boolErr(ok bool, msg string) error {
	if ok {
		return nil
	}
	return errors.New(msg)
}

// missing turns the kernel's answer for an absent module into a clear word.
func missing(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("missing from this kernel (%v)", err)
	}
	return err
}

func handles(a, b string) (*netlink.Handle, *netlink.Handle, error) {
	open := netns.Handle
	hA, err := open(a)
	if err != nil {
		return nil, nil, err
	}
	hB, err := open(b)
	if err != nil {
		hA.Close()
		return nil, nil, err
	}
	return hA, hB, nil
}

func veth(hA, hB *netlink.Handle, nsB string) (netlink.Link, error) {
	fd, err := netns.Open(nsB)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va"}, PeerName: "vb", PeerNamespace: netlink.NsFd(fd)}
	if err := hA.LinkAdd(v); err != nil {
		return nil, fmt.Errorf("create veth: %w", err)
	}
	for i, h := range []*netlink.Handle{hA, hB} {
		name, addr := []string{"va", "vb"}[i], []string{"10.99.0.1/24", "10.99.0.2/24"}[i]
		l, err := nlsafe.Retry1(h.LinkByName, name)
		if err != nil {
			return nil, err
		}
		a, _ := netlink.ParseAddr(addr)
		if err := h.AddrAdd(l, a); err != nil {
			return nil, err
		}
		if err := h.LinkSetUp(l); err != nil {
			return nil, err
		}
	}
	return nlsafe.Retry1(hA.LinkByName, "va")
}

// bpfFilter loads the smallest tc program ("pass") and attaches it in
// direct-action mode on clsact ingress, as the OCS fast path does.
func bpfFilter(h *netlink.Handle, l netlink.Link) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("load BPF program: %w", err)
	}
	defer prog.Close()
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: "emu-doctor", DirectAction: true,
	}
	if err := h.FilterAdd(f); err != nil {
		return missing(fmt.Errorf("attach cls_bpf: %w", err))
	}
	return nil
}

func ccCheck() error {
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(string(avail)), "cubic") {
		return errors.New("cubic is not available; scenarios must name one of: " + strings.TrimSpace(string(avail)))
	}
	return nil
}

func ccDetail() string {
	avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	allowed, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	out := fmt.Sprintf("available: %s; allowed as namespace default: %s (others are set per socket by emu)",
		strings.TrimSpace(string(avail)), strings.TrimSpace(string(allowed)))
	if !slices.Contains(strings.Fields(string(allowed)), "cubic") && slices.Contains(strings.Fields(string(avail)), "cubic") {
		// emu's workers set cubic per socket; iperf3 and the like in a lab
		// get the namespace default, which cubic cannot be.
		def, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
		out += "; cubic, the scenarios' default, is not allowed, so programs you run in a lab (iperf3) use " + firstField(def) +
			": `sysctl -w net.ipv4.tcp_allowed_congestion_control=\"" + strings.TrimSpace(string(allowed)) + " cubic\"` allows it"
	}
	return out
}

// firstField is the first word of b, or "the host's default".
func firstField(b []byte) string {
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "the host's default"
}
