// Package nlsafe retries netlink calls that the kernel interrupted.
//
// A netlink dump (LinkList, FilterList, RouteList, AddrList, NeighList,
// QdiscList, ...) spans several messages; if the table changes meanwhile
// the kernel flags the reply (NLM_F_DUMP_INTR) and
// github.com/vishvananda/netlink, since v1.2.1, returns
// netlink.ErrDumpInterrupted together with results that may be
// inconsistent. LinkByName falls back to such a dump on kernels that
// cannot look a link up by name. As the CNI plugins' netlinksafe package
// does, every such call goes through Retry, which repeats it a few times.
// Unlike netlinksafe, a call still interrupted after the last attempt
// returns the error rather than the possibly inconsistent results.
package nlsafe

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// Attempts is how many times a call is made before giving up.
const Attempts = 5

// Retry calls f until it returns something other than
// netlink.ErrDumpInterrupted, at most Attempts times. Pass the call as a
// method value: nlsafe.Retry(h.LinkList).
func Retry[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range Attempts {
		v, err = f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	var zero T
	return zero, fmt.Errorf("netlink dump interrupted %d times in a row, the kernel table kept changing: %w", Attempts, err)
}

// Retry1 is Retry for calls with one argument: nlsafe.Retry1(h.LinkByName, "eth0").
func Retry1[A, T any](f func(A) (T, error), a A) (T, error) {
	return Retry(func() (T, error) { return f(a) })
}

// Retry2 is Retry for calls with two arguments: nlsafe.Retry2(h.FilterList, link, parent).
func Retry2[A, B, T any](f func(A, B) (T, error), a A, b B) (T, error) {
	return Retry(func() (T, error) { return f(a, b) })
}
