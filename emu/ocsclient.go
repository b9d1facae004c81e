package main

// The CLI side of the OCS process: the --delay flag, the reading of apply
// and schedule files, what to say when the process is gone, and the
// process rows of `emu inspect`.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/fabric"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/netns"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/emu/plural"
	"github.com/ocsemu/ocsemu/ocsfabric/ocs"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
)

// delayValue is the --delay flag: a duration within the reconfiguration
// bounds every way into the OCS shares (reconfig.MinDelay..MaxDelay).
type delayValue struct{ d *time.Duration }

func delayFlag(d *time.Duration) delayValue { return delayValue{d} }

// String is "" until set, so that help shows no misleading default: an
// unset --delay means the scenario's delay, not 0.
func (v delayValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v delayValue) Set(s string) error {
	d, err := reconfig.ParseDelay(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v delayValue) Type() string { return "duration" }

// readStrict reads an `emu ocs apply` file into a ConfigRequest or an
// `emu ocs schedule` file into a Schedule; errors give file:line and the
// expected form.
func readStrict(path string, v any) error {
	data, err := safefile.Read(path, ocs.MaxBodyBytes)
	if err != nil {
		return err
	}
	switch p := v.(type) {
	case *ocs.ConfigRequest:
		*p, err = ocs.ParseApplyFile(data, path)
	case *ocs.Schedule:
		*p, err = ocs.ParseScheduleFile(data, path)
	default:
		err = fmt.Errorf("readStrict: no parser for %T", v)
	}
	return err
}

// ocsClient returns a client of a lab's OCS process that, when the
// process cannot be reached, says whether it runs and what to do.
func ocsClient(lab string) *ocs.Client {
	return ocs.NewClient(fabric.LabFile(lab, "ocs.sock")).OnUnreachable(func(err error) error {
		return ocsDown(lab, err)
	})
}

// ocsDown explains why the OCS process of a lab did not answer.
func ocsDown(lab string, err error) error {
	st, serr := fabric.ReadState(lab)
	switch {
	case errors.Is(serr, fabric.ErrNoLab):
		return fmt.Errorf("no lab named %q is deployed (see `emu inspect`)", lab)
	case serr == nil && !st.Spec.HasOCS():
		return fmt.Errorf("lab %s is an %s fabric: it has no OCS", lab, st.Spec.Kind)
	}
	p := ocsProcessOf(lab)
	if p.Running {
		return fmt.Errorf("the OCS process of lab %s (pid %d) runs but does not answer on %s: %v; see its log %s",
			lab, p.PID, fabric.LabFile(lab, "ocs.sock"), err, fabric.LabFile(lab, "ocs.log"))
	}
	return errors.New(p.Status)
}

// labProcess is one process of a lab, as `emu inspect <lab>` shows it.
type labProcess struct {
	Name      string `json:"name"`
	PID       int    `json:"pid,omitempty"` // the running process, or the last one
	Running   bool   `json:"running"`
	Answering bool   `json:"answering"`
	Status    string `json:"status"`
}

// ocsProcessOf says whether the OCS process of a lab runs: it holds the
// lab's "ocs" lock while it lives, and the lock file keeps its pid.
func ocsProcessOf(lab string) labProcess {
	p := labProcess{Name: "ocs"}
	p.PID, p.Running = fabric.Held(lab, "ocs")
	if !p.Running {
		b, _ := os.ReadFile(fabric.LabFile(lab, "ocs.lock"))
		p.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		gone := "it was never started"
		switch _, err := os.Stat(fabric.LabFile(lab, "ocs.log")); {
		case p.PID > 0:
			gone = fmt.Sprintf("pid %d exited", p.PID)
		case err == nil:
			gone = "it ended; its log says how" // its lock keeps no pid once it lets go
		}
		p.Status = fmt.Sprintf("the OCS process of lab %s is not running (%s); redeploy or `emu ocs serve --lab %s`; its log: %s",
			lab, gone, lab, fabric.LabFile(lab, "ocs.log"))
		if st, err := fabric.ReadState(lab); err == nil && st.Status == fabric.StatusInterrupted {
			p.Status = fmt.Sprintf("the OCS process of lab %s is not running (%s), and the lab's deploy was interrupted: `emu destroy %s`, then deploy it again",
				lab, gone, lab)
		}
	}
	return p
}

// labProcesses returns the processes a lab runs between commands (its OCS
// process) and whether each answers.
func labProcesses(ctx context.Context, st *fabric.State) []labProcess {
	var out []labProcess
	if st.Spec.HasOCS() {
		out = append(out, ocsProcess(ctx, st))
	}
	// A workload on the lab (emu run, emu collective) holds its use lock,
	// and the ToRs' aggregators (emu run starts them for INC jobs; by
	// hand, emu agg serve) each hold their ToR's lock while they run.
	workload, busy := fabric.Held(st.Lab, fabric.UseLock)
	for r := 0; r < st.Spec.Racks; r++ {
		tor := names.ToRName(r)
		pid, held := fabric.Held(st.Lab, "agg-"+tor)
		if !held {
			continue
		}
		state := fmt.Sprintf("running, with no run in progress: started by hand, or left by a run that was killed (emu agg stats %s %s)", st.Lab, tor)
		if busy {
			state = fmt.Sprintf("running (emu agg stats %s %s)", st.Lab, tor)
		}
		out = append(out, labProcess{Name: "agg " + tor, PID: pid, Running: true, Status: state})
	}
	if busy {
		out = append(out, labProcess{Name: "workload", PID: workload, Running: true, Status: "emu run or emu collective in progress"})
	}
	if pid, held := fabric.Held(st.Lab, fabric.CheckLock); held {
		out = append(out, labProcess{Name: "check", PID: pid, Running: true, Status: "the private copy of an emu lab check in progress (it destroys the copy itself)"})
	}
	return out
}

// ocsProcess says whether a lab's OCS process runs and answers.
func ocsProcess(ctx context.Context, st *fabric.State) labProcess {
	p := ocsProcessOf(st.Lab)
	if !p.Running {
		p.Status = strings.TrimPrefix(p.Status, "the OCS process of lab "+st.Lab+" is ")
		return p
	}
	sock := fabric.LabFile(st.Lab, "ocs.sock")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl := ocs.NewClient(sock)
	if err := cl.Ping(ctx); err != nil {
		p.Status = fmt.Sprintf("running, not answering on %s: %v (log: %s)", sock, err, fabric.LabFile(st.Lab, "ocs.log"))
		return p
	}
	p.Answering = true
	p.Status = "answering on " + sock
	// The circuit map waits while a change is pending: best effort.
	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer ccancel()
	if v, err := cl.Config(cctx); err == nil {
		p.Status += fmt.Sprintf(", %s (emu ocs show)", plural.Of(len(v.Circuits), "circuit"))
	}
	return p
}

// labHealth is what `emu inspect` adds to an up lab's status when one of
// its processes is not running.
func labHealth(st *fabric.State) string {
	if st.Status != fabric.StatusUp || !st.Spec.HasOCS() {
		return ""
	}
	if _, running := fabric.Held(st.Lab, "ocs"); !running {
		return ", OCS process not running"
	}
	return ""
}

// serveInOCSNamespace starts the OCS process in the lab's ocs0 namespace,
// as deploy does, when `emu ocs serve` runs anywhere else (a user
// restarting a dead one): there destroy ends it with the lab. It returns
// false when this process already runs in ocs0 and should serve. lock is
// this process's OCS lock, released for the new process.
func (a *app) serveInOCSNamespace(ctx context.Context, lab *fabric.Lab, lock *fabric.LabLock) (bool, error) {
	f := lab.Topo.Spec
	if !f.HasOCS() {
		return true, fmt.Errorf("lab %s is an %s fabric: it has no OCS", lab.Topo.Lab, f.Kind)
	}
	want, err := netns.Inode(names.NSName(lab.Topo.Lab, names.OCSName(0)))
	if err != nil {
		return true, err
	}
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return true, err
	}
	if self.Ino == want {
		return false, nil
	}
	lock.Release()
	return true, a.startOCSProcess(ctx, lab)
}
