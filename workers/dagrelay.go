package workers

import (
	"fmt"
	"strconv"

	"github.com/ocsemu/ocsemu/workers/job"
	"github.com/ocsemu/ocsemu/workers/taskgraph"
)

// taskRelay knows, for every task of the task-graph jobs, which ranks
// must hear that it has finished (taskgraph.Graph.Needers): the
// coordinator forwards a task's done to them.
type taskRelay struct {
	jobs map[string]*relayJob
}

type relayJob struct {
	g          *taskgraph.Graph
	iterations int
	// to[k][last] are the "job/rank" names told of task k's end; last:
	// in the final iteration (no next iteration's roots wait for it).
	to [][2][]string
}

// newTaskRelay prepares the relay of the task-graph jobs among jobs (nil
// when there are none).
func newTaskRelay(jobs []job.Job) (*taskRelay, error) {
	var r *taskRelay
	for _, j := range jobs {
		if j.Pattern != job.PatternDAG {
			continue
		}
		g, err := taskgraph.New(j.Tasks, j.Workers)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.Name, err)
		}
		rank := map[string]int{}
		for i, w := range j.Workers {
			rank[w] = i
		}
		rj := &relayJob{g: g, iterations: j.Iterations, to: make([][2][]string, len(j.Tasks))}
		for k := range j.Tasks {
			for last, more := range []bool{true, false} {
				for _, s := range g.Needers(k, more) {
					rj.to[k][last] = append(rj.to[k][last], j.Name+"/"+strconv.Itoa(rank[s]))
				}
			}
		}
		if r == nil {
			r = &taskRelay{jobs: map[string]*relayJob{}}
		}
		r.jobs[j.Name] = rj
	}
	return r, nil
}

// needers returns the ranks to tell of a done message (none for phases of
// other jobs).
func (r *taskRelay) needers(m Msg) []string {
	if r == nil {
		return nil
	}
	rj, ok := r.jobs[m.Job]
	if !ok {
		return nil
	}
	k, ok := rj.g.Index[m.Phase]
	if !ok {
		return nil
	}
	last := 0
	if m.Iteration == rj.iterations-1 {
		last = 1
	}
	return rj.to[k][last]
}
