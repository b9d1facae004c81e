package job

// PatternDAG is the job kind whose iteration is a task graph (plan v2,
// paper 004): compute and transfer tasks with dependencies, each task a
// phase of its own.
const PatternDAG = "dag"

// MaxTasks is the most tasks one iteration of a task-graph job may have:
// the one bound the plan check, the workers and the graph synthesis share,
// so that a hostile input cannot exhaust memory.
const MaxTasks = 100_000

// Task kinds of a dag job.
const (
	TaskCompute  = "compute"
	TaskTransfer = "transfer"
)

// Task is one node of a dag job's task graph; its name is the phase name
// of its activity. The plan format uses this type as it is (plan.Task).
type Task struct {
	Name string `json:"name"`
	// Kind is "compute" (Server computes for ComputeNs) or "transfer"
	// (Src sends Bytes to Dst).
	Kind      string `json:"kind"`
	Server    string `json:"server,omitempty"`
	ComputeNs int64  `json:"compute_ns,omitempty"`
	Src       string `json:"src,omitempty"`
	Dst       string `json:"dst,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	// After lists the tasks (of the same iteration) this one waits for.
	After []string `json:"after,omitempty"`
}

// Involves reports whether server takes part in the task: computes it,
// sends it or receives it.
func (t *Task) Involves(server string) bool {
	if t.Kind == TaskCompute {
		return t.Server == server
	}
	return t.Src == server || t.Dst == server
}

// DAGPreds returns, for every phase of a dag job over all iterations
// (iteration i's tasks at i*len(tasks)+k), the indexes of the phases it
// waits for: its After tasks, and, for a task without any, every sink of
// the previous iteration (a task nothing waits for). Unknown names in
// After are skipped (the plan check refuses them).
func DAGPreds(tasks []Task, iterations int) [][]int {
	per := len(tasks)
	index := make(map[string]int, per)
	for i, t := range tasks {
		if _, dup := index[t.Name]; !dup {
			index[t.Name] = i
		}
	}
	waited := make([]bool, per)
	for _, t := range tasks {
		for _, a := range t.After {
			if k, ok := index[a]; ok {
				waited[k] = true
			}
		}
	}
	var sinks []int
	for i, w := range waited {
		if !w {
			sinks = append(sinks, i)
		}
	}
	out := make([][]int, max(iterations, 0)*per)
	for it := 0; it < iterations; it++ {
		base := it * per
		for i, t := range tasks {
			q := base + i
			for _, a := range t.After {
				if k, ok := index[a]; ok {
					out[q] = append(out[q], base+k)
				}
			}
			if len(t.After) == 0 && it > 0 {
				for _, s := range sinks {
					out[q] = append(out[q], base-per+s)
				}
			}
		}
	}
	return out
}
