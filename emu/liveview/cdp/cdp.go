// Package cdp drives a headless Chromium over the DevTools protocol on a
// pipe (--remote-debugging-pipe: commands on fd 3, replies on fd 4, each
// message JSON ended by a NUL byte), so tests can watch a live page
// change without a WebSocket library or chromedp. It knows the handful of
// commands the live-view test needs: navigate, evaluate, screenshot.
package cdp

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/ocsemu/ocsemu/dataplane/safefile"
)

// Browser is one headless Chromium with one page attached.
type Browser struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	mu      sync.Mutex
	next    int
	waiting map[int]chan reply
	session string
	done    chan struct{}
	readErr error

	closeOnce sync.Once
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Launch starts Chromium (the path of its binary) headless with a fresh
// profile under dir and attaches to a blank page of width x height.
func Launch(ctx context.Context, chromium, dir string, width, height int) (*Browser, error) {
	cmdR, cmdW, err := os.Pipe() // we write commands, Chromium reads fd 3
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe() // Chromium writes fd 4, we read
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--no-first-run", "--remote-debugging-pipe", "--user-data-dir="+dir, fmt.Sprintf("--window-size=%d,%d", width, height), "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, repW}
	// Its own process group, so Close can end the renderers and helpers
	// it forks too, which would otherwise keep writing into dir.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		cmdR.Close()
		cmdW.Close()
		repR.Close()
		repW.Close()
		return nil, fmt.Errorf("start %s: %w", chromium, err)
	}
	cmdR.Close()
	repW.Close()
	b := &Browser{cmd: cmd, in: cmdW, waiting: map[int]chan reply{}, done: make(chan struct{})}
	go b.read(repR)
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
		} `json:"targetInfos"`
	}
	if err := b.call(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		b.Close()
		return nil, err
	}
	target := ""
	for _, t := range targets.TargetInfos {
		if t.Type == "page" {
			target = t.TargetID
			break
		}
	}
	if target == "" {
		var created struct {
			TargetID string `json:"targetId"`
		}
		if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
			b.Close()
			return nil, err
		}
		target = created.TargetID
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target, "flatten": true}, &att); err != nil {
		b.Close()
		return nil, err
	}
	b.session = att.SessionID
	return b, nil
}

func (b *Browser) read(r io.ReadCloser) {
	defer r.Close()
	defer close(b.done)
	rd := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := rd.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = fmt.Errorf("chromium closed its pipe: %w", err)
			b.mu.Unlock()
			return
		}
		var m struct {
			ID int `json:"id"`
			reply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.reply
		}
	}
}

// call sends one command and decodes its result into out.
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan reply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	m := map[string]any{"id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	if session != "" {
		m["sessionId"] = session
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-b.done:
		b.mu.Lock()
		defer b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, b.readErr)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Navigate opens url in the page (it returns once navigation started).
func (b *Browser) Navigate(ctx context.Context, url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, b.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, r.ErrorText)
	}
	return nil
}

// Eval evaluates a JavaScript expression in the page and decodes its
// value into out.
func (b *Browser) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(ctx, b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluate %q: %s", expr, r.Exception.Text)
	}
	if len(r.Result.Value) == 0 {
		return errors.New("evaluate: no value")
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Screenshot writes a PNG of the whole page to path.
func (b *Browser) Screenshot(ctx context.Context, path string) error {
	var r struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, b.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return safefile.Write(path, png, 0o644)
}

// Close ends the browser and waits for it: it asks Chromium to close,
// and after 5 s kills it; then it kills whatever of its process group is
// left.
func (b *Browser) Close() error {
	b.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = b.call(ctx, "", "Browser.close", nil, nil)
		cancel()
		_ = b.in.Close()
		exited := make(chan struct{})
		go func() {
			_ = b.cmd.Wait()
			close(exited)
		}()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = b.cmd.Process.Kill()
			<-exited
		}
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	})
	return nil
}
