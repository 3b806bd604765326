package memlimit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/env"
)

func TestSystemAvailable(t *testing.T) {
	const mi = 8388608 * 1024 // MemAvailable of every fake meminfo
	cases := []struct {
		tree    string
		want    int64
		source  string // prefix of Info.Source
		wantErr string
	}{
		{"v2-limit", 1<<30 - (512<<20 - 128<<20), "cgroup v2 memory.max 1.0 GiB", ""},
		{"v2-max", mi, "MemAvailable", ""},
		{"v2-nested", 256<<20 - 64<<20, "cgroup v2 memory.max 256.0 MiB", ""},
		{"v2-roomy", mi, "MemAvailable", ""},
		{"v2-bad", 0, "", "memory.max: want a byte count or max"},
		{"v1-limit", 2<<30 - (1<<30 - 512<<20), "cgroup v1 memory.limit_in_bytes 2.0 GiB", ""},
		{"v1-unlimited", mi, "MemAvailable", ""},
		{"v1-hier", 500<<20 - 100<<20, "cgroup v1 memory.limit_in_bytes 500.0 MiB", ""},
		{"meminfo-only", mi, "MemAvailable", ""},
		{"empty", Unlimited, "no cgroup limit", ""},
	}
	for _, c := range cases {
		t.Run(c.tree, func(t *testing.T) {
			got, err := System{Root: filepath.Join("testdata", c.tree)}.Available()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Available != c.want || !strings.HasPrefix(got.Source, c.source) {
				t.Fatalf("got %d (%s), want %d (%s)", got.Available, got.Source, c.want, c.source)
			}
		})
	}
}

func TestAvailableWithEnv(t *testing.T) {
	const mi = 8388608 * 1024
	cases := []struct {
		tree, env string
		want      int64
		source    string
		wantErr   bool
	}{
		{"meminfo-only", "", mi, "MemAvailable", false},
		{"meminfo-only", "512MiB", 512 << 20, Env + "=512MiB", false},
		{"meminfo-only", "100GiB", mi, "MemAvailable", false}, // a cap above what there is changes nothing
		{"empty", "1GB", 1e9, Env + "=1GB", false},            // the cap stands in when nothing can be read
		{"empty", "off", Unlimited, Env + "=off", false},
		{"meminfo-only", "OFF", Unlimited, Env + "=off", false},
		{"meminfo-only", "abc", 0, "", true},
		{"meminfo-only", "0", 0, "", true},
		{"meminfo-only", "-5MiB", 0, "", true},
		{"empty", "", Unlimited, "no cgroup limit or /proc/meminfo to read", false},
		{"v2-bad", "", 0, "", true},
		{"v2-bad", "1GiB", 1 << 30, Env + "=1GiB", false},
	}
	for _, c := range cases {
		got, err := available(System{Root: filepath.Join("testdata", c.tree)}, c.env)
		if c.wantErr {
			if err == nil {
				t.Errorf("%s %q: got %v, want an error", c.tree, c.env, got)
			}
			continue
		}
		if err != nil || got.Available != c.want || got.Source != c.source {
			t.Errorf("%s %q: got %d (%s), %v; want %d (%s)", c.tree, c.env, got.Available, got.Source, err, c.want, c.source)
		}
	}
}

func TestParseBytes(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"123", 123, true}, {"512MiB", 512 << 20, true}, {"512 mib", 512 << 20, true}, {"2GiB", 2 << 30, true},
		{"1.5GB", 1.5e9, true}, {"800M", 800 << 20, true}, {"4k", 4096, true}, {"1TB", 1e12, true}, {"7B", 7, true},
		{"", 0, false}, {"MiB", 0, false}, {"12 parsecs", 0, false}, {"1.2.3G", 0, false}, {"99999999999TiB", 0, false},
	}
	for _, c := range cases {
		got, err := ParseBytes(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestBudgetContext(t *testing.T) {
	if b := BudgetFrom(context.Background()); b != 0 {
		t.Fatalf("no budget: got %d", b)
	}
	if b := BudgetFrom(WithBudget(context.Background(), 1<<20)); b != 1<<20 {
		t.Fatalf("got %d, want 1 MiB", b)
	}
	e := error(&OverBudget{What: "vanilla", Needed: 3 << 30, Budget: 1 << 30, First: "fc.weight", Estimated: true})
	var ob *OverBudget
	if !errors.As(e, &ob) || !strings.Contains(e.Error(), "need about 3.0 GiB, more than the 1.0 GiB") {
		t.Fatalf("error %q", e)
	}
}

// TestAddressSpaceLimit: under ulimit -v the memory available is at most the room left under
// it (a child process, so that the limit binds it alone). Without it, a 2 GiB allocation under
// a smaller cap killed zoo with the Go runtime's out-of-memory stack dump instead of the
// guard's one line.
func TestAddressSpaceLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_AS is read on Linux")
	}
	if os.Getenv(env.TestChild) == "memlimit-as" {
		info, err := System{}.Available()
		fmt.Println(info.Available, err, info.Source)
		os.Exit(0)
	}
	const limitKB = 3 << 20 // 3 GiB
	cmd := exec.Command("/bin/sh", "-c", `ulimit -v `+strconv.Itoa(limitKB)+` && exec "$0" -test.run='^TestAddressSpaceLimit$'`, os.Args[0])
	cmd.Env = append(os.Environ(), env.TestChild+"=memlimit-as")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		t.Fatalf("child said %q", out)
	}
	avail, _ := strconv.ParseInt(f[0], 10, 64)
	if avail <= 0 || avail >= limitKB<<10 || f[1] != "<nil>" || !strings.Contains(string(out), "ulimit -v (RLIMIT_AS) 3.0 GiB") {
		t.Errorf("under ulimit -v 3 GiB: %q", out)
	}
}
