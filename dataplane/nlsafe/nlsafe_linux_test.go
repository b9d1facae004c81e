package nlsafe

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestRetry(t *testing.T) {
	other := errors.New("no such device")
	tests := []struct {
		name      string
		failures  int   // interrupted replies before the answer
		final     error // the answer's error
		wantCalls int
		wantErr   string
	}{
		{"first try", 0, nil, 1, ""},
		{"interrupted twice", 2, nil, 3, ""},
		{"interrupted on every attempt but the last", Attempts - 1, nil, Attempts, ""},
		{"always interrupted", 100, nil, Attempts, "interrupted 5 times in a row"},
		{"other errors are not retried", 0, other, 1, "no such device"},
		{"wrapped interruptions are retried", 1, nil, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			got, err := Retry(func() ([]string, error) {
				calls++
				if calls <= tt.failures {
					return []string{"partial"}, fmt.Errorf("list links: %w", netlink.ErrDumpInterrupted)
				}
				return []string{"eth0", "lo"}, tt.final
			})
			if calls != tt.wantCalls {
				t.Errorf("%d calls, want %d", calls, tt.wantCalls)
			}
			switch {
			case tt.wantErr == "" && (err != nil || len(got) != 2):
				t.Errorf("got %v, %v; want the full answer", got, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.failures >= Attempts && (got != nil || !errors.Is(err, netlink.ErrDumpInterrupted)) {
				t.Errorf("gave up with %v, %v: want no partial results and an error that is ErrDumpInterrupted", got, err)
			}
		})
	}
}

func TestRetryArgs(t *testing.T) {
	n := 0
	byName := func(name string) (string, error) {
		if n++; n == 1 {
			return "", netlink.ErrDumpInterrupted
		}
		return "link " + name, nil
	}
	if got, err := Retry1(byName, "eth0"); got != "link eth0" || err != nil {
		t.Errorf("Retry1 = %q, %v", got, err)
	}
	list := func(link string, parent uint32) ([]string, error) { return []string{fmt.Sprint(link, parent)}, nil }
	if got, err := Retry2(list, "eth0", 7); len(got) != 1 || got[0] != "eth07" || err != nil {
		t.Errorf("Retry2 = %v, %v", got, err)
	}
}
