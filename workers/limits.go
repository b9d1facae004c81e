package workers

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Limits of the worker side, for the scenario and plan checks to share.
const (
	// MaxRanks is the most worker ranks one job may have. Nothing in the
	// workers is sized by it: ports are handed out per server (BasePort),
	// a rank holds one connection per peer it talks to, and the
	// verification sums stay far inside int32. It is the scenario's own
	// bound on workers per job, up to which the worker logic is tested:
	// TestSpecsAtMaxRanks (ports and specs of three 4096-rank jobs that
	// share servers) and TestCollectivesAtScale (hd and ps over 4096
	// in-memory ranks, exact sums); TCP runs of 64 to 128 ranks in
	// TestLoopbackJobsBeyond62Ranks and TestLaunchBeyond62Ranks (a lab).
	MaxRanks = limits.MaxRanks
	// ByteAlign: ranks exchange int32 elements, so a job's bytes per rank
	// per iteration must be a multiple of ByteAlign and at least
	// ByteAlign per rank (one element of every rank's chunk).
	ByteAlign = limits.ByteAlign
	// MaxTasks is the most tasks one iteration of a task-graph job may
	// have (the plan's bound).
	MaxTasks = job.MaxTasks
	// MaxTaskPhases bounds iterations x tasks of a task-graph job.
	MaxTaskPhases = 1_000_000
)

// CheckBytes says whether a job of n ranks can move bytes per rank per
// iteration.
func CheckBytes(bytes int64, n int) error {
	if bytes%ByteAlign != 0 || bytes < int64(ByteAlign)*int64(max(n, 1)) {
		return fmt.Errorf("bytes (%d) must be a multiple of %d and at least %d per rank (%d for %d ranks): ranks exchange int32 elements",
			bytes, ByteAlign, ByteAlign, int64(ByteAlign)*int64(max(n, 1)), n)
	}
	return nil
}

// BufferBytes estimates the memory a job's rank processes hold: every
// worker keeps two buffers of the job's bytes (its gradient and the base
// it is rebuilt from, or all-to-all's send and receive chunks) and a
// 1 MiB piece for reductions; a parameter server keeps the sum and a piece
// per worker. Float, so that hostile sizes cannot overflow.
func BufferBytes(pattern string, ranks int, bytes int64) float64 {
	const piece = 1 << 20
	b := float64(ranks) * (2*float64(bytes) + piece)
	if pattern == job.PatternPS {
		b += float64(bytes) + float64(ranks)*piece
	}
	return b
}

// MemAvailable is the memory the kernel says can be allocated without
// swapping (MemAvailable in /proc/meminfo), in bytes.
func MemAvailable() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}

// CheckMemory refuses jobs whose buffers cannot fit in the memory
// available: the ranks would be killed by the OOM killer half-way.
func CheckMemory(need float64) error {
	avail, err := MemAvailable()
	if err != nil {
		return nil // cannot tell: let the run try
	}
	if need > float64(avail) {
		return fmt.Errorf("the ranks need about %s of buffers, but this machine has %s available (MemAvailable)", HumanBytes(need), HumanBytes(float64(avail)))
	}
	return nil
}

// HumanBytes writes a byte count with a binary unit, e.g. "3.2 GiB".
func HumanBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
