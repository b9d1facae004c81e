package liveview

import (
	"encoding/json"
	"fmt"
	"sync"
)

// hub fans server-sent events out to the open pages. It keeps the newest
// message of each sticky kind (topology, status, circuits, timeline) so a
// page that connects later starts from the current picture.
type hub struct {
	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	sticky map[string][]byte
	order  []string
}

func newHub() *hub { return &hub{subs: map[chan []byte]struct{}{}, sticky: map[string][]byte{}} }

// subBuffer is how many messages a page may lag behind before it is
// dropped (its EventSource reconnects and gets the sticky state again).
const subBuffer = 64

func (h *hub) subscribe() (<-chan []byte, [][]byte, func()) {
	ch := make(chan []byte, subBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[ch] = struct{}{}
	var initial [][]byte
	for _, k := range h.order {
		initial = append(initial, h.sticky[k])
	}
	return ch, initial, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// publish sends one event to every page; sticky events are also kept for
// pages that connect later.
func (h *hub) publish(event string, v any, sticky bool) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", event, err)
	}
	msg := []byte("event: " + event + "\ndata: " + string(data) + "\n\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	if sticky {
		if _, ok := h.sticky[event]; !ok {
			h.order = append(h.order, event)
		}
		h.sticky[event] = msg
	}
	for ch := range h.subs {
		select {
		case ch <- msg:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
	return nil
}

// subscribers is the number of open pages.
func (h *hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
