package main

import (
	"fmt"
	"strings"
)

// nOf is n and the noun, plural unless n is 1: "1 circuit", "3 circuits",
// "2 activities".
func nOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
