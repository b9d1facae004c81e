package flowmodel

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/ocsemu/ocsemu/emu/plan"
	"github.com/ocsemu/ocsemu/emu/scenario"
	"github.com/ocsemu/ocsemu/workers/record"
)

// A replay reports, per phase and link, the phase's own payload and what
// the others sent over the link while it ran: b's push really started at
// 0.5 s, so a (0-1.5 s) and b (0.5-2 s) each shared the circuit with the
// other for a second, at half the rate.
func TestReplayPhaseLinks(t *testing.T) {
	p, s := twoPushes(t)
	run, err := Replay(p, s, Ideal, map[plan.Key]int64{{Job: "b", Iteration: 0, Phase: "push"}: 500 * ms})
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]record.PhaseLink{}
	for _, pl := range run.PhaseLinks {
		got[[2]string{pl.Job + " " + pl.Phase, pl.Link}] = pl
	}
	const rate = 125e6 // 1 Gbit/s, ideal: the line rate
	for _, tc := range []struct {
		phase, link string
		own, others float64
		window      int64
		rateBps     float64
	}{
		{"a push", "tor1:up0", S, S / 2, 1500 * ms, rate},
		{"b push", "tor1:up0", S, S / 2, 1500 * ms, rate},
		{"a push", "r1s0:eth0", S, 0, 1500 * ms, 10 * rate},
		{"a push", "tor0:s0", S, 0, 1500 * ms, 10 * rate},
		{"b push", "r1s1:eth0", S, 0, 1500 * ms, 10 * rate},
		// a's pull runs 1.5-3 s, b's from 2 s: half of each shared.
		{"a pull", "tor0:up0", S, S / 2, 1500 * ms, rate},
	} {
		pl, ok := got[[2]string{tc.phase, tc.link}]
		if !ok {
			t.Errorf("%s: no figures for %s (have %v)", tc.phase, tc.link, run.PhaseLinks)
			continue
		}
		if math.Abs(pl.OwnBytes-tc.own) > 1e3 || math.Abs(pl.OtherBytes-tc.others) > 1e3 || !near(pl.WindowNs, tc.window) || pl.RateBps != tc.rateBps {
			t.Errorf("%s on %s: %+v, want own %.0f, others %.0f, window %d ms, rate %.0f", tc.phase, tc.link, pl, tc.own, tc.others, tc.window/ms, tc.rateBps)
		}
	}
	// Computes cross no link; pushes and pulls cross the circuit's two
	// directions, so no push shares a link with a pull.
	for k, pl := range got {
		if k[0] == "a compute" || k[0] == "b compute" || (k[0] == "a pull" || k[0] == "b pull") && k[1] == "tor1:up0" {
			t.Errorf("%s has figures on %s: %+v", k[0], k[1], pl)
		}
	}
	// Only a replay traces links.
	pred, err := SimulateModel(p, s, Ideal)
	if err != nil {
		t.Fatal(err)
	}
	if len(pred.PhaseLinks) != 0 {
		t.Errorf("a prediction traced links: %v", pred.PhaseLinks)
	}
}

// The TCP-aware replay also reports each link's mean standing queue over
// the phase's window: the circuit both pushes fill holds the standing
// queue of a saturated 1 Gbit/s link while a runs, except while its slow
// start ramps; a's 10 Gbit/s server link is never full and holds none.
func TestReplayPhaseLinkQueues(t *testing.T) {
	p, s := twoPushes(t)
	run, err := Replay(p, s, TCPAware, map[plan.Key]int64{{Job: "b", Iteration: 0, Phase: "push"}: 500 * ms})
	if err != nil {
		t.Fatal(err)
	}
	full := StandingQueueNs(s.Fabric.Rates.Uplink, s.Fabric.MTU)
	var up, srv *record.PhaseLink
	for i, pl := range run.PhaseLinks {
		if pl.Job == "a" && pl.Phase == "push" {
			switch pl.Link {
			case "tor1:up0":
				up = &run.PhaseLinks[i]
			case "r1s0:eth0":
				srv = &run.PhaseLinks[i]
			}
		}
	}
	if up == nil || srv == nil {
		t.Fatalf("no figures for a's push: %+v", run.PhaseLinks)
	}
	if up.QueueNs < full*9/10 || up.QueueNs > full {
		t.Errorf("circuit's mean queue %d ns, want within 10%% below the standing queue %d", up.QueueNs, full)
	}
	t.Logf("circuit %d ns (standing %d), server link %d", up.QueueNs, full, srv.QueueNs)
	if srv.QueueNs != 0 {
		t.Errorf("server link's mean queue %d ns, want 0", srv.QueueNs)
	}
}

// An unlimited link has no shaper to compare with and no finite rate to
// write: the replay leaves it out, and its record still marshals.
func TestReplayPhaseLinksSkipUnlimited(t *testing.T) {
	p, s := twoPushes(t)
	s.Fabric.Rates.Server = scenario.Unlimited
	run, err := Replay(p, s, TCPAware, map[plan.Key]int64{{Job: "b", Iteration: 0, Phase: "push"}: 500 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(run); err != nil {
		t.Fatalf("the replay does not marshal: %v", err)
	}
	links := map[string]bool{}
	for _, pl := range run.PhaseLinks {
		links[pl.Link] = true
	}
	if !links["tor1:up0"] || links["r1s0:eth0"] || links["tor0:s0"] {
		t.Errorf("links %v: want the circuit, not the unlimited server links", links)
	}
}
