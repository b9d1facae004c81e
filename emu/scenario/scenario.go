// Package scenario reads and checks scenario files: the YAML description of
// an emulated optical data-center fabric (racks, servers, ToR uplinks, OCS
// switches or an electrical packet-switched core, port rates, MTU, TCP
// settings). A scenario is validated whole, with errors that name the field
// and the line, before anything touches the kernel.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ocsemu/ocsemu/dataplane/limits"
	"github.com/ocsemu/ocsemu/dataplane/loss"
	"github.com/ocsemu/ocsemu/dataplane/names"
	"github.com/ocsemu/ocsemu/dataplane/safefile"
	"github.com/ocsemu/ocsemu/dataplane/topo"
	"github.com/ocsemu/ocsemu/ocsfabric/reconfig"
)

// Version is the scenario format version this code reads.
const Version = 1

// Fabric kinds.
const (
	KindOCS    = topo.FabricOCS    // ToR uplinks go to optical circuit switches.
	KindEPS    = topo.FabricEPS    // ToR uplinks go to one electrical packet switch.
	KindHybrid = topo.FabricHybrid // ToRs have OCS uplinks and one EPS uplink (c-Through, Helios).
)

// Uplink spreads over OCS switches.
const (
	SpreadRoundRobin = topo.SpreadRoundRobin
	SpreadBlock      = topo.SpreadBlock
)

// Limits that keep names and addresses well formed.
const (
	MaxRacks          = limits.MaxRacks
	MaxServersPerRack = limits.MaxServersPerRack
	MaxUplinks        = limits.MaxUplinks
	MaxOCS            = limits.MaxOCS
	MaxNameLen        = limits.MaxLabName
)

// Scenario is a whole scenario file. Later format additions (jobs, the
// scheduler) are optional keys, so files written for version 1 stay valid.
type Scenario struct {
	Version     int    `yaml:"version" json:"version"`
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	Fabric      Fabric `yaml:"fabric" json:"fabric"`
	// Jobs are the training jobs (optional: a fabric alone can be deployed).
	Jobs []Job `yaml:"jobs,omitempty" json:"jobs,omitempty"`
	// Scheduler turns the scenario into a plan (`emu plan`).
	Scheduler Scheduler `yaml:"scheduler,omitempty" json:"scheduler,omitempty"`

	// RenamedFrom is the name the scenario was written with, when
	// Rename gave its lab another one (emu run/deploy --lab-name).
	RenamedFrom string `yaml:"-" json:"-"`

	// lines maps a dotted field path ("fabric.racks") to its line in the
	// source, for error messages. Empty for scenarios built in code.
	lines map[string]int
	// source names the file for error messages.
	source string
	// reported holds the fields Parse has already refused (or found
	// missing): Validate says nothing more about them or their children.
	reported map[string]bool
}

// Fabric describes the emulated network.
type Fabric struct {
	Kind           string `yaml:"kind" json:"kind"`
	Racks          int    `yaml:"racks" json:"racks"`
	ServersPerRack int    `yaml:"servers_per_rack" json:"servers_per_rack"`
	UplinksPerToR  int    `yaml:"uplinks_per_tor" json:"uplinks_per_tor"`
	OCS            OCS    `yaml:"ocs" json:"ocs"`
	EPS            EPS    `yaml:"eps" json:"eps"`
	Rates          Rates  `yaml:"rates" json:"rates"`
	MTU            int    `yaml:"mtu" json:"mtu"`
	TCP            TCP    `yaml:"tcp" json:"tcp"`
	INC            INC    `yaml:"inc" json:"inc"`
	// ServerQueue is how a server's shaped port queues what it sends:
	// "fifo" (the default: the shaper's one FIFO, which the TCP-aware
	// model is calibrated with) or "fair" (per destination, round-robin,
	// short TCP control segments first, as a Linux host's fq_codel);
	// dataplane/fairq.
	ServerQueue string `yaml:"server_queue" json:"server_queue"`
	// SwitchQueue is how a switch's shaped port (a ToR's to its servers
	// and uplinks, the packet core's) queues what it forwards: "fifo"
	// (the default: one FIFO, as a commodity switch's port, where TCP
	// shares by RTT) or "fair" (per pair of servers, round-robin: per-flow
	// fair queueing, the max-min sharing the fluid models assume);
	// dataplane/fairq.
	SwitchQueue string `yaml:"switch_queue" json:"switch_queue"`
	// Loss drops a random fraction of the frames on lab ports, applied at
	// deploy (dataplane/loss).
	Loss []Loss `yaml:"loss" json:"loss,omitempty"`
}

// Loss is random frame loss on one port of the lab.
type Loss struct {
	// Port is node:iface as the blueprint names it (tor0:up0, r0s0:eth0,
	// ocs0:tor1u0, tor1:s0, eps:tor0).
	Port string `yaml:"port" json:"port"`
	// Direction is ingress, egress or both (default), seen from the node.
	Direction string `yaml:"direction" json:"direction"`
	// Percent of the frames dropped, 0 to 100, in steps of 0.0001 (1 ppm).
	Percent float64 `yaml:"percent" json:"percent"`
}

// OCS configures the optical circuit switches.
type OCS struct {
	// Switches is the number of OCS switches the uplinks spread over.
	Switches int `yaml:"switches" json:"switches"`
	// Spread is how uplinks map to switches: round-robin or block.
	Spread string `yaml:"spread" json:"spread"`
	// ReconfigDelay is the dark period of a port whose circuit changes.
	ReconfigDelay Duration `yaml:"reconfig_delay" json:"reconfig_delay"`
	// Duplex is "full" (paper 001), "half" (paper 002: simplex circuits;
	// a port may send into one and receive from another) or "half-strict"
	// (a port is in one circuit per stage, in one direction: paper 002's
	// eq. (6), paper 004's eq. (8)).
	Duplex string `yaml:"duplex" json:"duplex"`
}

// DuplexHalfStrict is the strict half-duplex mode of fabric.ocs.duplex.
const DuplexHalfStrict = "half-strict"

// HalfDuplex says whether circuits are simplex: duplex "half" or
// "half-strict".
func (o OCS) HalfDuplex() bool { return o.Duplex == "half" || o.Duplex == DuplexHalfStrict }

// EPS configures the electrical packet-switched core.
type EPS struct {
	// Oversubscription is the ratio of a rack's server bandwidth to its
	// core uplink bandwidth; 1 is a non-blocking ("ideal") core.
	Oversubscription float64 `yaml:"oversubscription" json:"oversubscription"`
}

// Rates are the port rates of the fabric.
type Rates struct {
	Server Rate `yaml:"server" json:"server"` // server <-> ToR
	Uplink Rate `yaml:"uplink" json:"uplink"` // ToR <-> OCS, per port
}

// TCP holds the TCP settings of server namespaces.
type TCP struct {
	CongestionControl string `yaml:"congestion_control" json:"congestion_control"`
}

// Error is one problem found in a scenario file.
type Error struct {
	Source string // file name, may be empty
	Line   int    // 0 if unknown
	Field  string // dotted path, may be empty
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxFileBytes bounds a scenario file.
const MaxFileBytes = limits.MaxScenarioFileBytes

// Load reads and validates a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := safefile.Read(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes and validates scenario YAML. source names the input in
// error messages. The returned error joins every problem found, in the
// order of their lines: bad values, missing sections and the checks of
// the fabric and the jobs all come in one go.
func Parse(data []byte, source string) (*Scenario, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Source: source, Msg: "empty file: a scenario needs at least \"name\" and \"fabric\" (see docs/scenario.md)"}
		}
		return nil, &Error{Source: source, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, &Error{Source: source, Line: 1, Msg: "a scenario must be a YAML mapping with at least \"name\" and \"fabric\""}
	}
	s := &Scenario{lines: map[string]int{}, source: source}
	var errs []error
	// checkKeys reports bad keys and values and blanks them out of the
	// tree, so that the decoder below reads the rest and the checks after
	// it still run: every problem is reported at once.
	budget := 2*countNodes(doc.Content[0]) + aliasAllowance
	checkKeys(doc.Content[0], reflect.TypeOf(*s), "", source, s.lines, &errs, &budget)
	if budget < 0 {
		return nil, joinByLine(errs)
	}
	if err := doc.Content[0].Decode(s); err != nil {
		s.checkRequired(&errs)
		errs = append(errs, &Error{Source: source, Msg: strings.TrimPrefix(err.Error(), "yaml: ")})
		return nil, joinByLine(errs)
	}
	s.checkRequired(&errs) // after decoding: what is required depends on a job's pattern
	s.checkExplicitZeros(&errs)
	s.reported = map[string]bool{}
	for _, e := range errs {
		var se *Error
		if errors.As(e, &se) {
			s.reported[se.Field] = true
		}
	}
	s.ApplyDefaults()
	if err := s.Validate(); err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, j.Unwrap()...)
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, joinByLine(errs)
	}
	s.reported = nil
	return s, nil
}

// joinByLine joins errors in the order of their lines (errors without a
// line first).
func joinByLine(errs []error) error {
	line := func(e error) int {
		var se *Error
		if errors.As(e, &se) {
			return se.Line
		}
		return 0
	}
	sort.SliceStable(errs, func(i, j int) bool { return line(errs[i]) < line(errs[j]) })
	return errors.Join(errs...)
}

// required lists, per section, the keys a scenario must give: they have
// no default. "jobs[]" stands for every job.
var required = []struct{ section, key, hint string }{
	{"", "name", "the lab name, e.g. name: my-lab"},
	{"", "fabric", "the fabric section: at least racks and servers_per_rack"},
	{"fabric", "racks", fmt.Sprintf("1..%d", limits.MaxRacks)},
	{"fabric", "servers_per_rack", fmt.Sprintf("1..%d", limits.MaxServersPerRack)},
	{"jobs[]", "name", "a job name"},
	{"jobs[]", "pattern", "ps, ring, alltoall, hd or dag"},
	{"jobs[]", "workers", "the servers of the job, e.g. [r0s0, r1s0]"},
	{"jobs[]", "bytes", "per worker per iteration, e.g. 64MiB (not for dag jobs)"},
	{"jobs[]", "iterations", fmt.Sprintf("1..%d", limits.MaxIterations)},
}

// checkRequired reports required keys that the file does not give, at
// the line of their section. A section that is itself missing or broken
// is reported once, not once per key.
func (s *Scenario) checkRequired(errs *[]error) {
	broken := map[string]bool{}
	for _, e := range *errs {
		var se *Error
		if errors.As(e, &se) {
			broken[se.Field] = true
		}
	}
	for _, r := range required {
		sections := []string{r.section}
		if r.section == "jobs[]" {
			sections = nil
			for i := 0; ; i++ {
				p := fmt.Sprintf("jobs[%d]", i)
				if _, ok := s.lines[p]; !ok {
					break
				}
				sections = append(sections, p)
			}
		}
		for _, sec := range sections {
			if _, ok := s.lines[sec]; sec != "" && (!ok || broken[sec]) {
				continue
			}
			p := join(sec, r.key)
			if _, ok := s.lines[p]; ok || broken[p] {
				continue
			}
			if i := jobIndex(sec); r.key == "bytes" && i >= 0 && i < len(s.Jobs) && s.Jobs[i].Pattern == PatternDAG {
				continue // a task graph's bytes are its transfers'
			}
			*errs = append(*errs, &Error{Source: s.source, Line: s.lines[sec], Field: p, Msg: "required (" + r.hint + ")"})
		}
	}
}

// checkKeys walks a YAML node against a Go type, refuses keys the type does
// not have, repeated keys and values the field cannot hold (a decimal or an
// exponent in an integer field, which the YAML decoder would truncate),
// and records the line of every field it sees. Every node it refuses is
// blanked (made null; for an alias, the alias, not its anchor), so that
// decoding the tree afterwards leaves that field at its zero value instead
// of failing. budget bounds the values it walks, aliases expanded: below
// zero, it has refused the file.
func checkKeys(n *yaml.Node, t reflect.Type, path, source string, lines map[string]int, errs *[]error, budget *int) {
	if *budget--; *budget < 0 {
		if *budget == -1 {
			*errs = append(*errs, &Error{Source: source, Line: n.Line, Field: path,
				Msg: "the file's aliases (*name) expand to too many values: write them out, or use fewer"})
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	orig := n
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	refuse := func(msg string) { // at the line of the value, or of the alias to it
		*errs = append(*errs, &Error{Source: source, Line: orig.Line, Field: path, Msg: msg})
		*orig = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: orig.Line, Column: orig.Column}
	}
	switch {
	case t.Kind() == reflect.Struct && !isLeaf(t):
		if n.Kind != yaml.MappingNode {
			refuse("must be a mapping of keys")
			return
		}
		fields := yamlFields(t)
		seen := map[string]int{}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				*errs = append(*errs, &Error{Source: source, Line: k.Line, Field: p,
					Msg: fmt.Sprintf("mapping key %q already defined at line %d", k.Value, first)})
				continue
			}
			seen[k.Value] = k.Line
			kept = append(kept, k, v)
			f, ok := fields[k.Value]
			if !ok {
				// A long key is no misspelt one (a file that is no
				// scenario at all): its start is enough to find it.
				key := shortKey(k.Value)
				*errs = append(*errs, &Error{Source: source, Line: k.Line, Field: join(path, key),
					Msg: fmt.Sprintf("unknown key %q%s (known keys: %s)", key, suggest(k.Value, fields), strings.Join(sortedKeys(fields), ", "))})
				continue
			}
			lines[p] = k.Line
			checkKeys(v, f.Type, p, source, lines, errs, budget)
		}
		n.Content = kept
	case isLeaf(t) || isScalarKind(t.Kind()):
		if msg := notInteger(n, t); msg != "" {
			refuse(msg)
			return
		}
		// Decode the value alone, so that a bad value is reported with
		// its field path and line.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			refuse(lineRE.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  "), ""))
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = c.Line
			checkKeys(c, t.Elem(), p, source, lines, errs, budget)
		}
	case t.Kind() == reflect.Slice && n.ShortTag() != "!!null":
		refuse("must be a list, e.g. [a, b]")
	}
}

// aliasAllowance and twice the values of the file bound the values
// checkKeys walks, aliases expanded: a few kilobytes of nested aliases can
// expand to billions, which would take hours to check.
const aliasAllowance = 100_000

// countNodes counts the nodes of a YAML tree, aliases not expanded.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

var leadingZeroRE = regexp.MustCompile(`^[-+]?0[0-9_]+$`)

// notInteger explains why an integer field's scalar is not a plain
// integer: the YAML decoder would silently truncate 4.5 to 4, read 1e1 as
// 10 and 010 as octal 8. Empty for anything else.
func notInteger(n *yaml.Node, t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return ""
	}
	if isLeaf(t) || n.Kind != yaml.ScalarNode {
		return ""
	}
	switch {
	case n.ShortTag() == "!!float":
		if v, err := strconv.ParseFloat(n.Value, 64); err == nil && v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return fmt.Sprintf("must be a whole number written in digits: write %d, not %s", int64(v), n.Value)
		}
		return fmt.Sprintf("must be a whole number, got %s", n.Value)
	case n.ShortTag() == "!!int" && n.Style == 0 && leadingZeroRE.MatchString(n.Value):
		return fmt.Sprintf("%s has a leading zero, which YAML reads as an octal number: write it without the zero", n.Value)
	case n.ShortTag() == "!!str" || n.ShortTag() == "!!bool":
		if _, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return fmt.Sprintf("must be a number, not text: write %s without quotes", n.Value)
		}
		return fmt.Sprintf("must be a whole number written in digits, got %q", n.Value)
	}
	return ""
}

var lineRE = regexp.MustCompile(`^line \d+: `)

func isScalarKind(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64, reflect.String:
		return true
	}
	return false
}

// isLeaf reports types that decode themselves from a scalar.
func isLeaf(t reflect.Type) bool {
	_, ok := reflect.New(t).Interface().(yaml.Unmarshaler)
	return ok
}

func yamlFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f
	}
	return m
}

func sortedKeys(m map[string]reflect.StructField) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// suggest offers the closest known key for a misspelt one.
func suggest(k string, fields map[string]reflect.StructField) string {
	best, bestD := "", 3
	for _, f := range sortedKeys(fields) {
		if d := EditDistance(strings.ToLower(k), f); d < bestD {
			best, bestD = f, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}

// EditDistance is the optimal-string-alignment distance (Levenshtein plus
// adjacent transpositions, so "rakcs" is one step from "racks").
func EditDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+c)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkExplicitZeros refuses a 0 written out where leaving the field out
// gives a default: ApplyDefaults cannot tell the two apart, so
// `uplinks_per_tor: 0` would quietly become 1 and `slot: 0ms` 1 s.
func (s *Scenario) checkExplicitZeros(errs *[]error) {
	f := &s.Fabric
	for _, z := range []struct {
		field, def string
		zero       bool
	}{
		{"fabric.uplinks_per_tor", "1", f.UplinksPerToR == 0 && f.Kind != KindEPS},
		{"fabric.ocs.switches", "1", f.OCS.Switches == 0 && f.Kind != KindEPS},
		{"fabric.eps.oversubscription", "1, non-blocking", f.EPS.Oversubscription == 0},
		{"fabric.mtu", "1500", f.MTU == 0},
		{"fabric.inc.capacity", "4 jobs per ToR", f.INC.Capacity == 0},
		{"scheduler.slot", "1s", s.Scheduler.Slot == 0},
	} {
		if line, written := s.lines[z.field]; written && z.zero {
			*errs = append(*errs, &Error{Source: s.source, Line: line, Field: z.field, Msg: "0 is not allowed: give a value, or leave the key out for the default (" + z.def + ")"})
		}
	}
}

// ApplyDefaults fills the fields a scenario may leave out.
func (s *Scenario) ApplyDefaults() {
	if s.Version == 0 {
		s.Version = Version
	}
	f := &s.Fabric
	if f.Kind == "" {
		f.Kind = KindOCS
	}
	if f.UplinksPerToR == 0 && f.Kind != KindEPS {
		f.UplinksPerToR = 1
	}
	if f.OCS.Switches == 0 && f.Kind != KindEPS {
		f.OCS.Switches = 1
	}
	if f.OCS.Spread == "" {
		f.OCS.Spread = SpreadRoundRobin
	}
	if f.OCS.Duplex == "" {
		f.OCS.Duplex = "full"
	}
	if f.EPS.Oversubscription == 0 {
		f.EPS.Oversubscription = 1
	}
	if f.MTU == 0 {
		f.MTU = 1500
	}
	if f.TCP.CongestionControl == "" {
		f.TCP.CongestionControl = "cubic"
	}
	if f.SwitchQueue == "" {
		f.SwitchQueue = topo.QueueFIFO
	}
	if f.ServerQueue == "" {
		f.ServerQueue = topo.QueueFIFO
	}
	if f.INC.Capacity == 0 {
		f.INC.Capacity = 4
	}
	for i := range f.Loss {
		if f.Loss[i].Direction == "" {
			f.Loss[i].Direction = string(loss.Both)
		}
	}
	if s.Scheduler.Name == "" {
		s.Scheduler.Name = "fcfs"
	}
	if s.Scheduler.Slot == 0 {
		s.Scheduler.Slot = Duration(time.Second)
	}
}

var ccRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// Validate checks the whole scenario and returns every problem at once.
func (s *Scenario) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		if s.alreadyReported(field) {
			return
		}
		errs = append(errs, &Error{Source: s.source, Line: s.lineOf(field), Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if s.Version != Version {
		bad("version", "unsupported version %d (this emu reads version %d)", s.Version, Version)
	}
	if err := names.ValidLab(s.Name); err != nil {
		bad("name", "%v", err)
	}
	f := &s.Fabric
	switch f.Kind {
	case KindOCS, KindEPS, KindHybrid:
	default:
		bad("fabric.kind", "unknown kind %q (want %q, %q or %q)", f.Kind, KindOCS, KindEPS, KindHybrid)
	}
	if f.Racks < 1 || f.Racks > MaxRacks {
		bad("fabric.racks", "must be between 1 and %d, got %d", MaxRacks, f.Racks)
	}
	if f.ServersPerRack < 1 || f.ServersPerRack > MaxServersPerRack {
		bad("fabric.servers_per_rack", "must be between 1 and %d, got %d", MaxServersPerRack, f.ServersPerRack)
	}
	if f.Kind == KindEPS {
		if f.UplinksPerToR != 0 {
			bad("fabric.uplinks_per_tor", "an eps fabric has one core link per ToR; remove uplinks_per_tor or use kind %q", KindHybrid)
		}
	} else {
		if f.UplinksPerToR < 1 || f.UplinksPerToR > MaxUplinks {
			bad("fabric.uplinks_per_tor", "must be between 1 and %d, got %d", MaxUplinks, f.UplinksPerToR)
		}
		if f.OCS.Switches < 1 || f.OCS.Switches > MaxOCS {
			bad("fabric.ocs.switches", "must be between 1 and %d, got %d", MaxOCS, f.OCS.Switches)
		} else if f.UplinksPerToR >= 1 && f.OCS.Switches > f.UplinksPerToR {
			bad("fabric.ocs.switches", "%d switches but only %d uplinks per ToR: some switches would have no ports", f.OCS.Switches, f.UplinksPerToR)
		}
		if f.Racks < 2 && f.Racks >= 1 {
			bad("fabric.racks", "an %s fabric needs at least 2 racks to form a circuit", f.Kind)
		}
	}
	switch f.OCS.Spread {
	case SpreadRoundRobin, SpreadBlock:
	default:
		bad("fabric.ocs.spread", "unknown spread %q (want %q or %q)", f.OCS.Spread, SpreadRoundRobin, SpreadBlock)
	}
	if f.OCS.Spread == SpreadBlock && f.OCS.Switches > 0 && f.UplinksPerToR%f.OCS.Switches != 0 {
		bad("fabric.ocs.spread", "block spread needs uplinks_per_tor (%d) to be a multiple of switches (%d)", f.UplinksPerToR, f.OCS.Switches)
	}
	switch f.OCS.Duplex {
	case "full", "half", DuplexHalfStrict:
	default:
		bad("fabric.ocs.duplex", "unknown duplex %q (want \"full\", \"half\" or %q)", f.OCS.Duplex, DuplexHalfStrict)
	}
	if err := reconfig.CheckDelay(f.OCS.ReconfigDelay.D()); err != nil {
		bad("fabric.ocs.reconfig_delay", "%v", err)
	}
	s.checkPortsPerOCS(bad)
	if f.EPS.Oversubscription < 1 || f.EPS.Oversubscription > 1000 {
		bad("fabric.eps.oversubscription", "must be between 1 (non-blocking) and 1000, got %g", f.EPS.Oversubscription)
	}
	if f.MTU < 576 || f.MTU > 9000 {
		bad("fabric.mtu", "must be between 576 and 9000, got %d", f.MTU)
	}
	if !ccRE.MatchString(f.TCP.CongestionControl) {
		bad("fabric.tcp.congestion_control", "%q is not a congestion control name (e.g. cubic, reno, bbr)", f.TCP.CongestionControl)
	}
	switch {
	case f.ServerQueue != topo.QueueFair && f.ServerQueue != topo.QueueFIFO:
		bad("fabric.server_queue", "%q: want %s (one FIFO) or %s (per destination, round-robin)", f.ServerQueue, topo.QueueFIFO, topo.QueueFair)
	case f.ServerQueue == topo.QueueFair && f.Rates.Server == 0:
		bad("fabric.server_queue", "%s queues under a server port's shaper, and fabric.rates.server is unlimited", topo.QueueFair)
	}
	switch {
	case f.SwitchQueue != topo.QueueFair && f.SwitchQueue != topo.QueueFIFO:
		bad("fabric.switch_queue", "%q: want %s (one FIFO) or %s (per pair of servers, round-robin)", f.SwitchQueue, topo.QueueFIFO, topo.QueueFair)
	case f.SwitchQueue == topo.QueueFair && f.Rates.Server == 0 && (f.Kind == topo.FabricEPS || f.Rates.Uplink == 0):
		// A ToR's ports to its servers and the core's run at the server
		// rate (the core's divided by the oversubscription); uplinks exist
		// on OCS and hybrid fabrics only.
		bad("fabric.switch_queue", "%s queues under a switch port's shaper, and fabric.rates leaves every switch port unlimited", topo.QueueFair)
	}
	fabricOK := len(errs) == 0
	s.validateLoss(fabricOK, bad)
	s.validateJobs(bad)
	return errors.Join(errs...)
}

// validateLoss checks every loss setting; the ports are checked against
// the blueprint when the fabric itself is valid.
func (s *Scenario) validateLoss(fabricOK bool, bad func(field, format string, a ...any)) {
	if len(s.Fabric.Loss) == 0 {
		return
	}
	var t *topo.Topology
	if fabricOK {
		t = topo.Build(s.Spec())
	}
	seen := map[string]string{}
	for i, l := range s.Fabric.Loss {
		p := fmt.Sprintf("fabric.loss[%d]", i)
		d, err := loss.ParseDirection(l.Direction)
		if err != nil {
			bad(p+".direction", "%v", err)
		}
		if _, err := loss.PercentToPPM(l.Percent); err != nil {
			bad(p+".percent", "%v", err)
		}
		if t == nil {
			continue
		}
		port, err := loss.ParsePort(t, l.Port)
		if err != nil {
			bad(p+".port", "%v", err)
			continue
		}
		for _, h := range d.Hooks() {
			k := port.String() + " " + string(h)
			if prev, ok := seen[k]; ok {
				bad(p, "%s %s is already set by %s", port, h, prev)
			}
			seen[k] = p
		}
	}
}

// LossRules are the scenario's loss settings as rules on the blueprint t
// (one per port and single direction), for dataplane/loss/inject.
func (s *Scenario) LossRules(t *topo.Topology) ([]loss.Rule, error) {
	var out []loss.Rule
	for i, l := range s.Fabric.Loss {
		rs, err := loss.Rules(t, l.Port, l.Direction, l.Percent)
		if err != nil {
			return nil, fmt.Errorf("fabric.loss[%d]: %w", i, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// alreadyReported says whether Parse has refused the field or a section
// holding it.
func (s *Scenario) alreadyReported(field string) bool {
	for p := field; p != ""; {
		if s.reported[p] {
			return true
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}

// checkPortsPerOCS refuses a fabric whose OCS switches would carry more
// ports (racks x uplinks cabled to one switch) than limits.MaxPortsPerOCS:
// the BPF fast path indexes its circuit map by the ports' ifindex.
func (s *Scenario) checkPortsPerOCS(bad func(field, format string, a ...any)) {
	f := &s.Fabric
	if !f.HasOCS() || f.Racks < 1 || f.Racks > MaxRacks || f.UplinksPerToR < 1 || f.UplinksPerToR > MaxUplinks ||
		f.OCS.Switches < 1 || f.OCS.Switches > f.UplinksPerToR {
		return // the counts themselves are wrong, and reported
	}
	for sw := 0; sw < f.OCS.Switches; sw++ {
		if n := f.Racks * f.PortsPerToROn(sw); n > limits.MaxPortsPerOCS {
			bad("fabric.ocs.switches", "OCS switch %d would carry %d ports (%d racks x %d uplinks each), more than the %d one OCS switch can hold: spread the uplinks over more switches, or use fewer racks or uplinks",
				sw, n, f.Racks, f.PortsPerToROn(sw), limits.MaxPortsPerOCS)
			return
		}
	}
}

// lineOf returns the line of a field, or of its closest parent that has one.
func (s *Scenario) lineOf(field string) int {
	for p := field; p != ""; {
		if l, ok := s.lines[p]; ok {
			return l
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// CoreRate is the rate of a ToR's link to the EPS core: the rack's server
// bandwidth divided by the oversubscription ratio. Unlimited if servers are.
func (f *Fabric) CoreRate() Rate {
	if f.Rates.Server == Unlimited {
		return Unlimited
	}
	return Rate(float64(f.Rates.Server) * float64(f.ServersPerRack) / f.EPS.Oversubscription)
}

// Spec is the resolved fabric of a lab named lab: what the kernel side
// and the OCS are built from. This is the one conversion from scenario to
// the lower layers.
func (f *Fabric) Spec(lab string) topo.Spec {
	return topo.Spec{
		Lab: lab, Kind: f.Kind, Racks: f.Racks, ServersPerRack: f.ServersPerRack, UplinksPerToR: f.UplinksPerToR,
		OCSSwitches: f.OCS.Switches, Spread: f.OCS.Spread, HalfDuplex: f.OCS.HalfDuplex(),
		StrictHalfDuplex: f.OCS.Duplex == DuplexHalfStrict,
		ReconfigDelay:    f.OCS.ReconfigDelay, ServerRate: f.Rates.Server, UplinkRate: f.Rates.Uplink, CoreRate: f.CoreRate(),
		MTU: f.MTU, CongestionControl: f.TCP.CongestionControl, ServerQueue: f.ServerQueue, SwitchQueue: f.SwitchQueue,
	}
}

// Spec is the resolved fabric of the scenario's lab.
func (s *Scenario) Spec() topo.Spec { return s.Fabric.Spec(s.Name) }

// HasOCS reports whether the fabric has optical circuit switches.
func (f *Fabric) HasOCS() bool { return f.Kind == KindOCS || f.Kind == KindHybrid }

// HasEPS reports whether the fabric has an electrical packet core.
func (f *Fabric) HasEPS() bool { return f.Kind == KindEPS || f.Kind == KindHybrid }

// UplinkSwitch says which OCS switch, and which port on it, ToR uplink u
// of rack r is cabled to (topo.Spec.UplinkSwitch).
func (f *Fabric) UplinkSwitch(r, u int) (sw, port int) {
	sp := f.Spec("")
	return sp.UplinkSwitch(r, u)
}

// PortsPerToROn is the number of uplinks of each ToR cabled to switch sw.
func (f *Fabric) PortsPerToROn(sw int) int {
	sp := f.Spec("")
	return sp.PortsPerToROn(sw)
}

// jobIndex reads i from "jobs[i]" (-1 for another section).
func jobIndex(sec string) int {
	var i int
	if n, err := fmt.Sscanf(sec, "jobs[%d]", &i); n != 1 || err != nil {
		return -1
	}
	return i
}

// shortKey cuts a key longer than 24 characters to its first 8 and "...":
// enough to find the line, too little to echo a secret in it.
func shortKey(k string) string {
	if r := []rune(k); len(r) > 24 {
		return string(r[:8]) + "..."
	}
	return k
}

// Rename deploys the scenario as a lab of another name (several people
// on one machine, or two copies of one scenario). The scenario's own name
// stays in RenamedFrom, so that plans made for it still fit.
func (s *Scenario) Rename(lab string) error {
	if err := names.ValidLab(lab); err != nil {
		return fmt.Errorf("lab name: %w", err)
	}
	if lab == s.Name {
		return nil
	}
	if s.RenamedFrom == "" {
		s.RenamedFrom = s.Name
	}
	s.Name = lab
	return nil
}

// Fits says whether a plan made for the named scenario fits this one:
// its own name, or the name it was written with before Rename.
func (s *Scenario) Fits(planScenario string) bool {
	return planScenario == s.Name || (s.RenamedFrom != "" && planScenario == s.RenamedFrom)
}
