package capture

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ocsemu/ocsemu/dataplane/fabric/fabrictest"
	"github.com/ocsemu/ocsemu/dataplane/probe"
)

// TestCaptureTransfer captures a server's eth0 during a 1 s TCP transfer
// and reads the pcap back.
func TestCaptureTransfer(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	lab := fabrictest.Deploy(t, fabrictest.Fabric(t, fabrictest.UniqueLab("pcap"),
		"{kind: eps, racks: 1, servers_per_rack: 2, rates: {server: 200Mbit}}"))
	ports, err := ParsePorts(lab.Topo, "r0s0:eth0")
	if err != nil {
		t.Fatal(err)
	}
	hs := fabrictest.Hosts(lab)
	src, dst := hs[0], hs[1]
	const snaplen = 128
	dir := t.TempDir()
	g, err := StartAll(context.Background(), ports, dir, Options{Snaplen: snaplen})
	if err != nil {
		t.Fatal(err)
	}
	res, terr := probe.Transfer(context.Background(), src, dst, probe.TransferOptions{Duration: time.Second})
	stats, err := g.Stop()
	if terr != nil {
		t.Fatal(terr)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := stats[0]
	if want := filepath.Join(dir, "r0s0-eth0.pcap"); st.Path != want {
		t.Fatalf("path %s, want %s", st.Path, want)
	}
	t.Logf("transfer %.0f Mbit/s; capture: %d packets written, %d dropped, file %d bytes", res.GoodputBps/1e6, st.Packets, st.Dropped, st.Bytes)

	f, err := os.Open(st.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("pcap does not parse: %v", err)
	}
	if r.LinkType() != layers.LinkTypeEthernet || r.Snaplen() != snaplen {
		t.Fatalf("header: link type %v, snaplen %d", r.LinkType(), r.Snaplen())
	}
	var records, tcp, truncated int
	var first, last time.Time
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("record %d: %v", records, err)
		}
		records++
		if ci.CaptureLength > snaplen || ci.CaptureLength != len(data) || ci.Length < ci.CaptureLength {
			t.Fatalf("record %d: capture length %d (data %d), original length %d, snaplen %d", records, ci.CaptureLength, len(data), ci.Length, snaplen)
		}
		if ci.Length > ci.CaptureLength {
			truncated++
		}
		if first.IsZero() {
			first = ci.Timestamp
		}
		if ci.Timestamp.Before(last.Add(-time.Second)) {
			t.Errorf("record %d: timestamp %v goes back from %v", records, ci.Timestamp, last)
		}
		last = ci.Timestamp
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if ip == nil || p.Layer(layers.LayerTypeTCP) == nil {
			continue
		}
		a, b := ip.SrcIP.String(), ip.DstIP.String()
		if (a == src.Addr.String() && b == dst.Addr.String()) || (a == dst.Addr.String() && b == src.Addr.String()) {
			tcp++
		}
	}
	t.Logf("read back: %d records, %d TCP segments between %s and %s, %d truncated to the snaplen, spanning %v",
		records, tcp, src.Addr, dst.Addr, truncated, last.Sub(first).Round(time.Millisecond))
	if uint64(records) != st.Packets {
		t.Errorf("read %d records, capture reported %d written", records, st.Packets)
	}
	if uint64(tcp) != st.Packets {
		t.Errorf("read %d TCP segments between the servers, capture reported %d packets written", tcp, st.Packets)
	}
	if tcp < 500 {
		t.Errorf("only %d TCP segments captured during a 1 s transfer", tcp)
	}
	if truncated == 0 {
		t.Errorf("no record was cut to the snaplen: the data segments should be")
	}
	if d := time.Since(first); first.Before(time.Now().Add(-time.Minute)) || d < 0 {
		t.Errorf("first timestamp %v is not recent", first)
	}
}

// TestCaptureStartErrors: a missing namespace or interface fails at start
// and leaves no file.
func TestCaptureStartErrors(t *testing.T) {
	fabrictest.SkipUnlessRoot(t)
	dir := t.TempDir()
	_, err := StartAll(context.Background(), []Port{{Node: "r0s0", Iface: "eth0", NS: "emu-nosuchlab.r0s0"}}, dir, Options{})
	if err == nil {
		t.Fatal("capture in a missing namespace started")
	}
	if _, serr := os.Stat(filepath.Join(dir, "r0s0-eth0.pcap")); !os.IsNotExist(serr) {
		t.Errorf("file left after a failed start: %v", serr)
	}
	if _, err := StartAll(context.Background(), []Port{{Node: "r0s0", Iface: "eth0", NS: "x"}}, dir, Options{Snaplen: 10}); err == nil {
		t.Error("snaplen 10 accepted")
	}
}
