// Package httpcheck sends the requests that tests make to a server and
// reads the answers whole, so that the tests of every wire package and
// command share one way of doing it.
package httpcheck

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Do sends a request with body, as JSON when body is not empty (a header
// may give another Content-Type), and header as name, value pairs; it
// returns the response with its body read and closed. A failure to send
// or read ends the test.
func Do(t testing.TB, method, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
