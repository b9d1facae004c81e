package main

import "fmt"

// nOf is n and the noun, plural unless n is 1: "1 circuit", "3 circuits".
func nOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
