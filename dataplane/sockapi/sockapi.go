// Package sockapi is the client side of emu's JSON control APIs on unix
// sockets (the OCS process, the INC aggregators): one request, JSON in and
// out, with the two ways it can fail kept apart.
package sockapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Client sends requests to the API serving on Socket.
type Client struct {
	Socket string
	http   *http.Client
}

// New returns a client of the API on socket; timeout 0 means none.
func New(socket string, timeout time.Duration) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{Socket: socket, http: &http.Client{Transport: tr, Timeout: timeout}}
}

// UnreachableError is a request that did not reach the server (no socket,
// nobody listening, the connection broken).
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// StatusError is an answer with a status of 300 or more.
type StatusError struct {
	Code int
	Body []byte // at most 4 KiB, trimmed
}

func (e *StatusError) Error() string { return fmt.Sprintf("status %d: %s", e.Code, e.Body) }

// Do sends in (if not nil) as JSON and decodes the answer into out (if not
// nil). A request that did not reach the server fails with an
// *UnreachableError; a refusal with a *StatusError.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// Stream GETs path and returns the answer's body for the caller to read
// as it comes (and close); it fails as Do does.
func (c *Client) Stream(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (c *Client) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://api"+path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Not `Get "http://api/stats": dial unix ...`: the URL is a
		// placeholder; the dial error names the socket tried.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &UnreachableError{fmt.Errorf("%s %s: %w", method, path, err)} // err names the socket
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &StatusError{Code: resp.StatusCode, Body: bytes.TrimSpace(msg)}
	}
	return resp, nil
}
