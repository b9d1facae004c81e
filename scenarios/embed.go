// Package scenarios holds the ready-made scenario files and embeds them in
// the emu binary, so that `emu run` works without a checkout.
package scenarios

import "embed"

// Files holds every *.yaml file of this folder.
//
//go:embed *.yaml
var Files embed.FS

// Default is the scenario `emu run` uses when none is given.
const Default = "quickstart.yaml"

// Labs holds the teaching labs, labs/<nn-name>/ (README, scenario,
// starting point, solution); emu/labs holds their checks.
//
//go:embed all:labs
var Labs embed.FS
