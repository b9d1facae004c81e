package monoclock

import (
	"context"
	"testing"
	"time"
)

func TestSleepUntil(t *testing.T) {
	t0 := Now()
	for _, d := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		at := Now() + int64(d)
		if err := SleepUntil(context.Background(), at); err != nil {
			t.Fatal(err)
		}
		if now := Now(); now < at {
			t.Errorf("woke %d ns early", at-now)
		}
	}
	if Now() <= t0 {
		t.Error("clock did not advance")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SleepUntil(ctx, Now()+int64(time.Hour)); err == nil {
		t.Error("a cancelled wait returned no error")
	}
}
