package scheduler

// keepBusy claims every circuit of the previous slot that carries a flow
// in progress (at either end), so that no reconfiguration takes a circuit
// from under an active activity: its flows would lose what they had
// queued on it and stall in TCP's recovery (docs/fidelity.md). A circuit
// whose ports are already taken (the base ring's, which every slot has)
// needs nothing.
func (p *ports) keepBusy(l *loop) {
	busy := l.sim.BusyUplinks()
	for _, c := range l.prev.Circuits {
		if busy[c.A] || busy[c.B] {
			p.claim(c)
		}
	}
}
