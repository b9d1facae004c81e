package liveview

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/workers/record"
)

// Timeline is the "timeline" event: the phases a run's ranks have
// finished so far, per job, from the records the workers write as they
// go (results/<lab>/latest/records/*.jsonl).
type Timeline struct {
	Dir     string        `json:"dir,omitempty"`
	Running bool          `json:"running"`
	Message string        `json:"message"`
	Jobs    []TimelineJob `json:"jobs"`
	SpanMs  float64       `json:"span_ms"`
}

// TimelineJob is one job's finished phases, in start order.
type TimelineJob struct {
	Job    string `json:"job"`
	Phases []Span `json:"phases"`
}

// Span is one phase of one iteration, from the first rank's start to the
// last rank's end so far, in ms after the run's first phase started.
type Span struct {
	Iteration int     `json:"iteration"`
	Phase     string  `json:"phase"`
	StartMs   float64 `json:"start_ms"`
	EndMs     float64 `json:"end_ms"`
	Ranks     int     `json:"ranks"`
}

// phaseLine is the part of a rank's JSONL record the timeline reads.
type phaseLine struct {
	Type      string `json:"type"`
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Phase     string `json:"phase"`
	StartNs   int64  `json:"start_ns"`
	EndNs     int64  `json:"end_ns"`
}

type spanKey struct {
	job   string
	iter  int
	phase string
}

type spanNs struct {
	start, end int64
	ranks      int
}

// timeline follows a run directory's records, reading each file from
// where it stopped the last time.
type timeline struct {
	link    string        // results/<lab>/latest; "" when unset
	resolve func() string // a link that overrides it when it returns one
	dir     string        // what it resolved to
	offsets map[string]int64
	spans   map[spanKey]*spanNs
}

func newTimeline(link string) *timeline { return &timeline{link: link} }

// maxRecordLine bounds one JSONL line; longer ones are skipped.
const maxRecordLine = 1 << 20

func (t *timeline) read() Timeline {
	if t.resolve != nil {
		if l := t.resolve(); l != "" {
			t.link = l
		}
	}
	if t.link == "" {
		return Timeline{Message: "no run directory given (--results): no job timeline", Jobs: []TimelineJob{}}
	}
	dir, err := filepath.EvalSymlinks(t.link)
	if err != nil {
		return Timeline{Message: fmt.Sprintf("no run of this lab yet (%s does not exist): the job timeline appears while `emu run` executes the lab's scenario", t.link), Jobs: []TimelineJob{}}
	}
	if dir != t.dir { // a new run: start over
		t.dir, t.offsets, t.spans = dir, map[string]int64{}, map[spanKey]*spanNs{}
	}
	files, _ := record.Files(filepath.Join(dir, "records"))
	for _, f := range files {
		if err := t.follow(f); err != nil {
			return Timeline{Dir: dir, Message: err.Error(), Jobs: []TimelineJob{}}
		}
	}
	out := t.build()
	out.Dir = dir
	_, err = os.Stat(filepath.Join(dir, "measurement.json"))
	out.Running = errors.Is(err, os.ErrNotExist)
	switch {
	case len(out.Jobs) == 0 && out.Running:
		out.Message = "run " + filepath.Base(dir) + ": no phase finished yet"
	case len(out.Jobs) == 0:
		out.Message = "run " + filepath.Base(dir) + " recorded no phases"
	case out.Running:
		out.Message = "run " + filepath.Base(dir) + " in progress (or stopped before writing its measurement)"
	default:
		out.Message = "run " + filepath.Base(dir) + " finished"
	}
	return out
}

// follow reads the complete lines appended to one records file.
func (t *timeline) follow(path string) error {
	// Opened as it is checked, without following a link or waiting on a
	// pipe: the results directory may be a student's, and the view runs
	// as root.
	f, err := safefile.OpenNoLink(path)
	if err != nil {
		return nil // gone, or not a plain file: never followed
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	off := t.offsets[path]
	if fi.Size() < off {
		off = 0
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("records: %w", err)
	}
	rd := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: skip to its end.
			n := int64(len(line))
			for errors.Is(err, bufio.ErrBufferFull) && n < maxRecordLine {
				line, err = rd.ReadSlice('\n')
				n += int64(len(line))
			}
			if err != nil {
				break
			}
			off += n
			continue
		}
		if err != nil {
			break // an incomplete last line is read next time
		}
		off += int64(len(line))
		if !strings.Contains(string(line), `"type":"phase"`) {
			continue
		}
		var p phaseLine
		if json.Unmarshal(line, &p) != nil || p.Type != "phase" || p.EndNs < p.StartNs {
			continue
		}
		k := spanKey{p.Job, p.Iteration, p.Phase}
		sp := t.spans[k]
		if sp == nil {
			sp = &spanNs{start: p.StartNs, end: p.EndNs}
			t.spans[k] = sp
		}
		sp.start = min(sp.start, p.StartNs)
		sp.end = max(sp.end, p.EndNs)
		sp.ranks++
	}
	t.offsets[path] = off
	return nil
}

// build turns the spans into the event, times relative to the earliest start.
func (t *timeline) build() Timeline {
	out := Timeline{Jobs: []TimelineJob{}}
	if len(t.spans) == 0 {
		return out
	}
	var zero, last int64 = -1, 0
	for _, sp := range t.spans {
		if zero < 0 || sp.start < zero {
			zero = sp.start
		}
		last = max(last, sp.end)
	}
	byJob := map[string][]Span{}
	for k, sp := range t.spans {
		byJob[k.job] = append(byJob[k.job], Span{Iteration: k.iter, Phase: k.phase, Ranks: sp.ranks,
			StartMs: float64(sp.start-zero) / 1e6, EndMs: float64(sp.end-zero) / 1e6})
	}
	for job, spans := range byJob {
		sort.Slice(spans, func(i, j int) bool {
			if spans[i].StartMs != spans[j].StartMs {
				return spans[i].StartMs < spans[j].StartMs
			}
			return spans[i].Phase < spans[j].Phase
		})
		out.Jobs = append(out.Jobs, TimelineJob{Job: job, Phases: spans})
	}
	sort.Slice(out.Jobs, func(i, j int) bool { return out.Jobs[i].Job < out.Jobs[j].Job })
	out.SpanMs = float64(last-zero) / 1e6
	return out
}
