package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBodyTimeout: a body that trickles in is cut off with a 408 and its
// connection closed once BodyTimeout has passed (issue 30), while a
// streamed response read slowly, long past it, still arrives whole.
func TestBodyTimeout(t *testing.T) {
	fs := newFakeServer(t, Options{BodyTimeout: 300 * time.Millisecond}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello", "▁world", "!")
	conn, err := net.Dial("tcp", strings.TrimPrefix(fs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"hi","max_tokens":2}`
	if _, err := io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body[:5]); err != nil {
		t.Fatal(err)
	}
	// A byte now and then, as a trickling client sends it.
	start := time.Now()
	go func() {
		for i := 5; i < len(body)-1; i++ {
			time.Sleep(100 * time.Millisecond)
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "in time") {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the 408 came after %v", d)
	}
	// The server closes the connection: the rest of the body is not read.
	if _, err := bufio.NewReader(conn).ReadByte(); err == nil {
		t.Error("the connection stayed open")
	}

	// A slow reader of a stream.
	fs.eng.delay = 150 * time.Millisecond
	resp2, err := http.Post(fs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":6,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	time.Sleep(500 * time.Millisecond) // past BodyTimeout before reading anything
	all, err := io.ReadAll(resp2.Body)
	if err != nil || !strings.HasSuffix(string(all), "data: [DONE]\n\n") {
		t.Errorf("a slow reader's stream: %v %q", err, all)
	}
}
