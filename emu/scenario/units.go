package scenario

import "github.com/ocsemu/ocsemu/dataplane/units"

// The quantities of a scenario file, defined once in dataplane/units.
type (
	Rate     = units.Rate
	Duration = units.Duration
	ByteSize = units.ByteSize
)

// Unlimited is the Rate of an unshaped link.
const Unlimited = units.Unlimited

// Parsers of the quantities, for flags that take the same forms.
var (
	ParseRate     = units.ParseRate
	ParseDuration = units.ParseDuration
	ParseByteSize = units.ParseByteSize
)
