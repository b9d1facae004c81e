// Package plural writes a count with its noun, as messages print them.
package plural

import (
	"fmt"
	"strings"
)

// Of is n and the noun, plural unless n is 1: "1 circuit", "3 circuits",
// "2 activities".
func Of(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") && !strings.HasSuffix(noun, "ay") && !strings.HasSuffix(noun, "ey") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
