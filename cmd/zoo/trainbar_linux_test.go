package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the master end, which reads what is written to the
// terminal, and the terminal itself.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	return m, s
}

// TestTrainBarCount runs zoo train with stderr on a terminal, where it draws its progress
// bar, and checks every frame: the step count is written once ("step k/N"), and the bar adds
// no count of its own ("(k/N)", which repeated it, one step off).
func TestTrainBarCount(t *testing.T) {
	master, tty := openPTY(t)
	defer master.Close()
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		io.Copy(&screen, master) // until the terminal closes (EIO)
		close(read)
	}()
	defer func(d time.Duration) { stepBarInterval = d }(stepBarInterval)
	stepBarInterval = 0 // draw every step
	out := filepath.Join(t.TempDir(), "m.safetensors")
	var stdout bytes.Buffer
	code := run(append([]string{"zoo"}, trainArgs("--steps", "6", "-o", out)...), &stdout, tty)
	tty.Close()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	if code != 0 {
		t.Fatalf("exit %d; terminal:\n%q", code, screen.String())
	}
	step := regexp.MustCompile(`step (\d+)/6\b`)
	frames := 0
	seen := map[string]bool{}
	for _, frame := range strings.FieldsFunc(screen.String(), func(r rune) bool { return r == '\r' || r == '\n' }) {
		if !strings.Contains(frame, "step ") {
			continue
		}
		frames++
		if m := step.FindAllStringSubmatch(frame, -1); len(m) != 1 {
			t.Errorf("frame %q: want one step k/6", frame)
		} else {
			seen[m[0][1]] = true
		}
		if c := regexp.MustCompile(`\d+/\d+`).FindAllString(frame, -1); len(c) != 1 {
			t.Errorf("frame %q shows the count %d times (%v), want once", frame, len(c), c)
		}
	}
	if frames == 0 || !seen["5"] {
		t.Errorf("no frame for step 5 of 6 (saw steps %v); terminal:\n%q", seen, screen.String())
	}
}
