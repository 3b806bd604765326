// Package memlimit tells how much memory this process may still use, so that zoo can refuse
// a job that would not fit before it allocates anything, and carries a byte budget for a
// build through its context.
//
// The memory available is the room left under the cgroup's limit where one is set (cgroup v2
// memory.max minus memory.current, or v1 memory.limit_in_bytes minus memory.usage_in_bytes,
// inactive page cache not counted as used, since the kernel reclaims it before it kills),
// bounded by /proc/meminfo's MemAvailable (a cgroup limit larger than the machine does not
// make memory) and by the room under the address-space limit (ulimit -v) where one is set,
// and capped by ZOO_MEMORY_LIMIT when set.
package memlimit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/internal/env"
)

// Env is the environment variable that caps the memory zoo counts as available: bytes, or a
// number with a unit (512MiB, 2GiB, 1.5GB, 800M), or "off" to disable the checks.
const Env = env.MemoryLimit

// Info is the memory available to the process and where the figure comes from.
type Info struct {
	// Available is the number of bytes the process may still allocate; Unlimited when the
	// checks are off or the system says nothing.
	Available int64
	// Source says which limit set Available, e.g. "cgroup v2 memory.max" or "MemAvailable".
	Source string
}

// Unlimited is Info.Available when ZOO_MEMORY_LIMIT=off or nothing tells the limit.
const Unlimited = math.MaxInt64

// Off reports whether there is no limit to check against.
func (i Info) Off() bool { return i.Available == Unlimited }

// String is "12.3 GiB (MemAvailable)".
func (i Info) String() string {
	if i.Off() {
		return "unlimited (" + i.Source + ")"
	}
	return Bytes(i.Available) + " (" + i.Source + ")"
}

// System reads the memory limits of a Linux system from its files: /proc and /sys/fs/cgroup
// under Root ("" is the real root), so tests can point it at a fake tree.
type System struct{ Root string }

func (s System) path(p string) string { return filepath.Join(s.Root, "/", p) }

// Available returns the memory available to this process, not counting ZOO_MEMORY_LIMIT:
// Unlimited when neither a cgroup limit nor MemAvailable can be read (not Linux, or /proc not
// mounted). A file that exists but does not parse is an error naming it.
func (s System) Available() (Info, error) {
	var best *Info
	take := func(i Info) {
		if best == nil || i.Available < best.Available {
			best = &i
		}
	}
	cg, err := s.cgroup()
	if err != nil {
		return Info{}, err
	}
	if cg != nil {
		take(*cg)
	}
	mem, err := s.memAvailable()
	if err != nil {
		return Info{}, err
	}
	if mem != nil {
		take(*mem)
	}
	if s.Root == "" { // the process's own limit, not a file a test can point at
		if as := addressSpace(); as != nil {
			take(*as)
		}
	}
	if best == nil {
		// Not Linux, or /proc not mounted: nothing to go by, so nothing is refused.
		return Info{Available: Unlimited, Source: "no cgroup limit or /proc/meminfo to read"}, nil
	}
	return *best, nil
}

// memAvailable reads MemAvailable from /proc/meminfo; nil when the file is missing.
func (s System) memAvailable() (*Info, error) {
	data, err := os.ReadFile(s.path("/proc/meminfo"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb < 0 || (len(f) > 2 && f[2] != "kB") {
				return nil, fmt.Errorf("memory: /proc/meminfo: bad MemAvailable line %q", sc.Text())
			}
			return &Info{Available: kb * 1024, Source: "MemAvailable"}, nil
		}
	}
	return nil, nil // kernels before 3.14 have no MemAvailable
}

// cgroup returns the room left under the process's cgroup limit, the smallest over the
// cgroup and its ancestors; nil when no limit is set.
func (s System) cgroup() (*Info, error) {
	v2, v1 := s.cgroupPaths()
	if v2 != "" {
		return s.cgroupV2(v2)
	}
	if v1 != "" {
		return s.cgroupV1(v1)
	}
	return nil, nil
}

// cgroupPaths returns the process's cgroup directories, from /proc/self/cgroup, for v2 (the
// "0::" line) and for v1's memory controller; "" when there is none. Inside a container
// with its own cgroup namespace the path is "/" and the mount is the container's cgroup.
func (s System) cgroupPaths() (v2, v1 string) {
	data, err := os.ReadFile(s.path("/proc/self/cgroup"))
	if err != nil {
		return "", ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			if _, err := os.Stat(s.path("/sys/fs/cgroup/cgroup.controllers")); err == nil {
				v2 = s.mounted("/sys/fs/cgroup", parts[2], "memory.max")
			}
		case hasController(parts[1], "memory"):
			v1 = s.mounted("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		}
	}
	return v2, v1
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// mounted returns the directory of cgroup path rel under mount: mount/rel when it holds
// file, else mount itself (a container whose cgroup is mounted at the root while
// /proc/self/cgroup shows the host's path), else "".
func (s System) mounted(mount, rel, file string) string {
	for _, dir := range []string{filepath.Join(mount, rel), mount} {
		if _, err := os.Stat(s.path(filepath.Join(dir, file))); err == nil {
			return dir
		}
	}
	return ""
}

// cgroupV2 walks from dir up to the mount root and returns the smallest room
// memory.max − (memory.current − inactive_file) of any cgroup with a limit.
func (s System) cgroupV2(dir string) (*Info, error) {
	var best *Info
	for d := dir; ; d = filepath.Dir(d) {
		limit, ok, err := s.readLimit(filepath.Join(d, "memory.max"))
		if err != nil {
			return nil, err
		}
		if ok {
			used, err := s.readUsed(filepath.Join(d, "memory.current"), filepath.Join(d, "memory.stat"), "inactive_file")
			if err != nil {
				return nil, err
			}
			if room := max(limit-used, 0); best == nil || room < best.Available {
				best = &Info{Available: room, Source: "cgroup v2 memory.max " + Bytes(limit)}
			}
		}
		if d == "/sys/fs/cgroup" || d == "/" || d == "." {
			return best, nil
		}
	}
}

// cgroupV1 returns memory.limit_in_bytes − (memory.usage_in_bytes − total_inactive_file)
// of dir, taking memory.stat's hierarchical_memory_limit (the smallest limit of the
// ancestors) when it is lower.
func (s System) cgroupV1(dir string) (*Info, error) {
	limit, ok, err := s.readLimit(filepath.Join(dir, "memory.limit_in_bytes"))
	if err != nil {
		return nil, err
	}
	stat := filepath.Join(dir, "memory.stat")
	if h, found, err := s.statField(stat, "hierarchical_memory_limit"); err != nil {
		return nil, err
	} else if found && h < noLimitV1 && (!ok || h < limit) {
		limit, ok = h, true
	}
	if !ok {
		return nil, nil
	}
	used, err := s.readUsed(filepath.Join(dir, "memory.usage_in_bytes"), stat, "total_inactive_file")
	if err != nil {
		return nil, err
	}
	return &Info{Available: max(limit-used, 0), Source: "cgroup v1 memory.limit_in_bytes " + Bytes(limit)}, nil
}

// noLimitV1 is the smallest value cgroup v1 shows for "no limit" (math.MaxInt64 rounded down
// to a page; anything this large is no limit in practice).
const noLimitV1 = 1 << 62

// readLimit reads a limit file: "max" (v2) or a value of at least noLimitV1 (v1) is no limit,
// a missing file too.
func (s System) readLimit(p string) (int64, bool, error) {
	data, err := os.ReadFile(s.path(p))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("memory: %w", err)
	}
	v := strings.TrimSpace(string(data))
	if v == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("memory: %s: want a byte count or max, got %q", p, clip(v))
	}
	return n, n < noLimitV1, nil
}

// readUsed reads a usage file and subtracts the stat file's reclaimable field.
func (s System) readUsed(usage, stat, reclaimable string) (int64, error) {
	data, err := os.ReadFile(s.path(usage))
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("memory: %s: want a byte count, got %q", usage, clip(strings.TrimSpace(string(data))))
	}
	if r, ok, err := s.statField(stat, reclaimable); err != nil {
		return 0, err
	} else if ok {
		n = max(n-r, 0)
	}
	return n, nil
}

// statField reads one "name value" line of a memory.stat file; a missing file or field is
// not an error.
func (s System) statField(p, name string) (int64, bool, error) {
	data, err := os.ReadFile(s.path(p))
	if err != nil {
		return 0, false, nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				// v1 prints hierarchical_memory_limit as an unsigned 2^64−1 when unlimited.
				if u, uerr := strconv.ParseUint(f[1], 10, 64); uerr == nil && u > math.MaxInt64 {
					return math.MaxInt64, true, nil
				}
				return 0, false, fmt.Errorf("memory: %s: bad %s value %q", p, name, clip(f[1]))
			}
			return n, true, nil
		}
	}
	return 0, false, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Available returns the memory available to this process: the system's figure capped by
// ZOO_MEMORY_LIMIT. A bad ZOO_MEMORY_LIMIT is an error naming it; ZOO_MEMORY_LIMIT=off
// returns Unlimited without reading the system.
func Available() (Info, error) {
	v, _ := env.Get(Env)
	return available(System{}, v)
}

func available(sys System, env string) (Info, error) {
	capBytes, set, err := ParseLimit(env)
	if err != nil {
		return Info{}, err
	}
	if set && capBytes == Unlimited {
		return Info{Available: Unlimited, Source: Env + "=off"}, nil
	}
	info, err := sys.Available()
	if err != nil && !set {
		return Info{}, err
	}
	if set && (err != nil || capBytes < info.Available) {
		// A broken cgroup file does not stand in the way of a limit the user gave.
		return Info{Available: capBytes, Source: Env + "=" + strings.TrimSpace(env)}, nil
	}
	return info, nil
}

// ParseLimit parses a ZOO_MEMORY_LIMIT value: "" is unset (set false), "off" is Unlimited,
// else a byte count with an optional unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (K, M, G
// and T alone are binary, as in Kubernetes' Ki but also GOMEMLIMIT's MiB; KB, MB, GB and TB
// are decimal). It returns an error naming the variable for anything else or a value below 1.
func ParseLimit(s string) (int64, bool, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false, nil
	}
	if strings.EqualFold(s, "off") {
		return Unlimited, true, nil
	}
	n, err := ParseBytes(s)
	if err != nil || n < 1 {
		return 0, false, fmt.Errorf("%s=%q: want a size such as 512MiB, 8GiB or 2000000000 (bytes), or off", Env, s)
	}
	return n, true, nil
}

// ParseBytes parses "123", "512MiB", "1.5 GB", "800M". It returns an error for anything else.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') && s[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	}[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}

// Bytes formats n as "512 B", "3.0 KiB", "1.25 GiB", "2.0 TiB".
func Bytes(n int64) string {
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

type budgetKey struct{}

// WithBudget returns a context that carries a byte budget for the weights a build may
// allocate (see BudgetFrom); bytes ≤ 0 means no budget.
func WithBudget(ctx context.Context, bytes int64) context.Context {
	return context.WithValue(ctx, budgetKey{}, bytes)
}

// BudgetFrom returns the budget WithBudget put in ctx, or 0 (none).
func BudgetFrom(ctx context.Context) int64 {
	if ctx == nil {
		return 0
	}
	b, _ := ctx.Value(budgetKey{}).(int64)
	return max(b, 0)
}

// OverBudget is the error of a build whose weights exceed its budget. Needed may grow after
// the error is recorded: the builder keeps counting the parameters it no longer allocates,
// so the message gives the whole model's size.
type OverBudget struct {
	// What is being built, e.g. "vanilla".
	What string
	// Needed is the bytes the weights need (at least; an estimate when Estimated).
	Needed int64
	// Budget is the bytes allowed.
	Budget int64
	// First is the parameter whose allocation would have passed the budget.
	First string
	// Estimated is set when part of Needed was extrapolated rather than counted.
	Estimated bool
}

func (e *OverBudget) Error() string {
	about := ""
	if e.Estimated {
		about = "about "
	}
	return fmt.Sprintf("the weights of %s need %s%s, more than the %s they may take (%s passes it)", e.What, about, Bytes(e.Needed), Bytes(e.Budget), e.First)
}
