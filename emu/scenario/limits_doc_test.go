package scenario

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ocsemu/ocsemu/dataplane/limits"
)

// TestLimitsTable compares the limits table of docs/scenario.md with
// dataplane/limits: each row's first numbers must be the constants, and
// every limit must have its row.
func TestLimitsTable(t *testing.T) {
	want := map[string][]int64{
		"racks":                          {limits.MaxRacks},
		"servers per rack":               {limits.MaxServersPerRack},
		"uplinks per ToR":                {limits.MaxUplinks},
		"OCS switches":                   {limits.MaxOCS},
		"ports per OCS switch":           {limits.MaxPortsPerOCS},
		"workers per job":                {limits.MaxWorkers},
		"ranks per job in `emu run`":     {limits.MaxRanks},
		"bytes per worker per iteration": {limits.MaxBytes},
		"bytes alignment in `emu run`":   {limits.ByteAlign},
		"iterations per job":             {limits.MaxIterations},
		"flows of all jobs":              {limits.MaxFlows},
		"reconfiguration delay":          {limits.MinReconfigDelayNs, limits.MaxReconfigDelayNs},
		"lab and job name length":        {limits.MaxLabName},
		"loss per port and direction":    {0, limits.MaxLossPPM},
	}
	rows := limitsTable(t, "../../docs/scenario.md")
	num := regexp.MustCompile(`\d[\d,]*`)
	for name, w := range want {
		cell, ok := rows[name]
		if !ok {
			t.Errorf("docs/scenario.md: the limits table has no row %q", name)
			continue
		}
		var got []int64
		for _, m := range num.FindAllString(cell, len(w)) {
			v, _ := strconv.ParseInt(strings.ReplaceAll(m, ",", ""), 10, 64)
			got = append(got, v)
		}
		if len(got) != len(w) {
			t.Errorf("row %q: value %q, want the numbers %v", name, cell, w)
			continue
		}
		for i := range w {
			if got[i] != w[i] {
				t.Errorf("row %q: value %q says %d, dataplane/limits says %d", name, cell, got[i], w[i])
			}
		}
	}
	for name := range rows {
		if _, ok := want[name]; !ok {
			t.Errorf("row %q of the limits table is compared with no constant: add it to this test", name)
		}
	}
}

// limitsTable reads the "| limit | value | ... |" table under "## Limits".
func limitsTable(t *testing.T, path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Limits"
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) < 2 {
				continue
			}
			name, value := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
			if name == "limit" || strings.HasPrefix(name, "---") {
				continue
			}
			if _, dup := rows[name]; dup {
				t.Errorf("row %q twice in the limits table", name)
			}
			rows[name] = value
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no limits table under \"## Limits\"", path)
	}
	return rows
}
