package plugin

import (
	"encoding/json"
	"strings"
	"sync"
)

// tailWriter keeps the last lines a plugin wrote on stderr (and the first panic line), for
// error reports.
type tailWriter struct {
	mu      sync.Mutex
	max     int
	partial []byte
	lines   []string
	panic   string
}

func newTail(max int) *tailWriter { return &tailWriter{max: max} }

// Write splits p into lines and keeps the last max of them.
func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range p {
		if c != '\n' {
			if len(t.partial) < 4096 {
				t.partial = append(t.partial, c)
			}
			continue
		}
		t.addLine(string(t.partial))
		t.partial = t.partial[:0]
	}
	return len(p), nil
}

func (t *tailWriter) addLine(line string) {
	line = readableLine(line)
	if line == "" {
		return
	}
	if t.panic == "" && (strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") || strings.Contains(line, "panic in Build: ")) {
		t.panic = line
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// readableLine shows the message of an hclog JSON line, and a plain line as it is.
func readableLine(line string) string {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			if msg, ok := m["@message"].(string); ok {
				if lvl, ok := m["@level"].(string); ok {
					return "[" + strings.ToUpper(lvl) + "] " + msg
				}
				return msg
			}
		}
	}
	return line
}

// last returns what to show for a crash: the panic line if there was one, else the last n
// lines.
func (t *tailWriter) last(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(append([]string(nil), lines...), readableLine(string(t.partial)))
	}
	if t.panic != "" {
		return []string{t.panic}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return append([]string(nil), lines...)
}
