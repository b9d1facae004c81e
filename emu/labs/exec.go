package labs

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// command runs a program with a time limit and returns its combined
// output; the error says what ran and how it ended.
func command(ctx context.Context, limit time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() == context.DeadlineExceeded {
		return string(out), fmt.Errorf("`%s %s` did not finish within %v", name, strings.Join(args, " "), limit)
	}
	if err != nil {
		return string(out), fmt.Errorf("`%s %s`: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// inNS runs a program inside a named network namespace.
func inNS(ctx context.Context, ns string, name string, args ...string) (string, error) {
	return command(ctx, 20*time.Second, nil, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// tail returns the last n lines of s, for failure reasons.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
