//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ruvllm/ruvllm/internal/shared"
)

// openPTY opens a pseudo-terminal: the master the test types into and
// reads from, and the terminal the child gets.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	var unlock int32
	var n uint32
	for _, op := range []struct {
		req uintptr
		arg unsafe.Pointer
	}{{syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)}, {syscall.TIOCGPTN, unsafe.Pointer(&n)}} {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), op.req, uintptr(op.arg)); errno != 0 {
			master.Close()
			t.Skipf("pseudo-terminal ioctl: %v", errno)
		}
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	return master, tty
}

// TestRunTerminal holds a chat in a real (pseudo-)terminal, as a user
// does: run sees the terminal (prompts), keeps two turns, a Ctrl-C typed
// while the answer is written stops the answer and not the chat, and the
// chat ends on /bye, on Ctrl-D, or on two Ctrl-C at the prompt.
func TestRunTerminal(t *testing.T) {
	stories := shared.Path(t, "models", "stories260K.gguf")
	tests := []struct {
		name string
		// end are the keys that end the chat, typed one after the other,
		// each after the prompt that the one before brings back.
		end []string
		say string // what the ending writes before the chat ends
	}{
		{"/bye", []string{"/bye\r"}, ""},
		{"Ctrl-D", []string{"\x04"}, ""},
		{"Ctrl-C twice", []string{"\x03", "\x03"}, "Use Ctrl + d or /bye to exit."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			master, tty := openPTY(t)
			defer master.Close()
			args, _ := json.Marshal([]string{"run", stories, "--temp", "0", "--ctx", "2048", "--chat-template", concatTemplate})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childArgsEnv+"="+string(args), "TERM=xterm")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			tty.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					<-exited
				}
			}()
			var screen syncBuffer
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					screen.Write(buf[:n])
					if err != nil {
						return
					}
				}
			}()
			typeIn := func(s string) {
				t.Helper()
				if _, err := master.WriteString(s); err != nil {
					t.Fatal(err)
				}
			}
			// prompts counts the prompts on the screen.
			prompts := func() int { return strings.Count(screen.String(), ">>> ") }
			waitPrompt := func(n int) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for prompts() < n {
					if time.Now().After(deadline) {
						t.Fatalf("no prompt %d on the screen:\n%s", n, screen.String())
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			waitPrompt(1)
			typeIn("/set num_predict 20\r")
			waitPrompt(2)
			typeIn("Once upon a time\r")
			waitPrompt(3)
			typeIn("She\r")
			waitPrompt(4)
			typeIn("/show history\r")
			waitPrompt(5)
			if !strings.Contains(screen.String(), "user: Once upon a time\r\nassistant: "+storiesGreedy+"\r\nuser: She\r\nassistant: ") {
				t.Errorf("two turns are not in the history:\n%s", screen.String())
			}
			// A long answer, stopped by Ctrl-C as soon as it shows.
			typeIn("/set num_predict -1\r")
			waitPrompt(6)
			typeIn("/clear\r")
			waitPrompt(7)
			before := len(screen.String())
			typeIn("Once upon a time\r")
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(screen.String()[before:], ", there was a little girl named Lily") {
				if time.Now().After(deadline) {
					t.Fatalf("no answer on the screen:\n%s", screen.String())
				}
				time.Sleep(time.Millisecond)
			}
			typeIn("\x03")
			waitPrompt(8)
			if answer := screen.String()[before:]; len(answer) > 2000 || !strings.Contains(answer, "^C") {
				t.Errorf("the answer went on after Ctrl-C (%d bytes):\n%s", len(answer), answer)
			}
			select {
			case err := <-exited:
				t.Fatalf("Ctrl-C during an answer ended the chat: %v\n%s", err, screen.String())
			default:
			}
			for i, keys := range tt.end {
				typeIn(keys)
				if i < len(tt.end)-1 {
					waitPrompt(9 + i)
				}
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("the chat ended with %v:\n%s", err, screen.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%q did not end the chat:\n%s", tt.end, screen.String())
			}
			if !strings.Contains(screen.String(), tt.say) {
				t.Errorf("the screen lacks %q:\n%s", tt.say, screen.String())
			}
		})
	}
}
