package workers_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/workers"
	"github.com/ocsemu/ocsemu/workers/job"
)

// Environment of the launcher child of TestRanksDieWithTheirParent.
const (
	launchLabEnv = "WORKERS_TEST_LAUNCH_LAB"
	launchDirEnv = "WORKERS_TEST_LAUNCH_DIR"
)

// TestMain lets the test binary play the emu binary: Launch starts rank
// processes as `<exe> worker --spec <file>`, and a test can run a launch
// in a child process of its own.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "worker" && os.Args[2] == "--spec" {
		if err := workers.RunSpecFile(context.Background(), os.Args[3], nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if lab := os.Getenv(launchLabEnv); lab != "" {
		os.Exit(launchChild(lab, os.Getenv(launchDirEnv)))
	}
	os.Exit(m.Run())
}

// launchChild launches a long job on a deployed lab with rank processes,
// as `emu run` and `emu collective` do, until it ends or is killed.
func launchChild(lab, dir string) int {
	l, err := fabric.Open(lab, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer l.Close()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// About a minute of compute and small all-reduces.
	jobs := []job.Job{{Name: "long", Pattern: "ring", Workers: []string{"r0s0", "r1s0", "r2s0"}, Bytes: 64 << 10,
		ComputeNs: int64(50 * time.Millisecond), Iterations: 1200}}
	_, err = workers.Launch(context.Background(), &workers.Options{Lab: l, Jobs: jobs, Dir: dir, Exe: exe, TCPInfoEvery: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
