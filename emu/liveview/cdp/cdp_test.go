package cdp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestEvalAndScreenshot drives a real headless Chromium over the pipe:
// a data: page, an expression, a promise, an exception, a screenshot.
func TestEvalAndScreenshot(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Launch(ctx, chromium, t.TempDir(), 400, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Navigate(ctx, "data:text/html,<p id=x>hello</p>"); err != nil {
		t.Fatal(err)
	}
	var got string
	for i := 0; i < 100; i++ {
		if err := b.Eval(ctx, `document.getElementById("x") ? document.getElementById("x").textContent : ""`, &got); err == nil && got == "hello" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "hello" {
		t.Fatalf("page text %q, want hello", got)
	}
	var n int
	if err := b.Eval(ctx, `new Promise(r => setTimeout(() => r(6 * 7), 10))`, &n); err != nil || n != 42 {
		t.Errorf("promise: %d, %v", n, err)
	}
	if err := b.Eval(ctx, `nosuchthing.x`, &n); err == nil {
		t.Error("an exception in the page was not reported")
	}
	shot := filepath.Join(t.TempDir(), "p.png")
	if err := b.Screenshot(ctx, shot); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(shot)
	if len(data) < 100 || string(data[1:4]) != "PNG" {
		t.Errorf("screenshot: %d bytes, not a PNG", len(data))
	}
	b.Close()
	if err := b.Eval(ctx, `1`, &n); err == nil {
		t.Error("Eval after Close did not fail")
	}
}
