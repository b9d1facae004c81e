package reproduce

import (
	"context"
	"testing"

	"github.com/ocsemu/ocsemu/emu/scenario"
)

// BenchmarkPaper003 plans and simulates 1,000 iterations of paper 003's
// ODDL design.
func BenchmarkPaper003(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := p003Run(context.Background(), scenario.KindOCS, 1000, 200e6, nil); err != nil {
			b.Fatal(err)
		}
	}
}
