package plugin

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/plugin/pluginpb"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// describeSeed is a full Describe answer: every kind, a minimum, choices, capabilities.
func describeSeed() variant.Description {
	one := variant.MinOf(1)
	return variant.Description{Name: "seed", Version: "1.2.3", Summary: "a seed variant", Paper: "https://arxiv.org/abs/1706.03762", Complexity: "O(n²)",
		Params: []variant.Param{
			{Name: "d_model", Kind: variant.KindInt, Default: int64(64), Doc: "width", Min: one},
			{Name: "max_len", Kind: variant.KindInt, Default: int64(128), Doc: "longest sequence", Min: one},
			{Name: "dropout", Kind: variant.KindFloat, Default: 0.1, Doc: "dropout"},
			{Name: "pre_ln", Kind: variant.KindBool, Default: true, Doc: "pre-LN"},
			{Name: "act", Kind: variant.KindString, Default: "relu", Doc: "activation", Choices: []string{"relu", "gelu"}},
		},
		Caps: variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true}}
}

// FuzzDescribeResponse decodes any bytes as a plugin's Describe answer: DescriptionFromProto
// must accept a description whose strings are printable and whose defaults resolve, and
// which converts to the wire form and back unchanged, or refuse it; never panic.
func FuzzDescribeResponse(f *testing.F) {
	r, err := DescriptionToProto(describeSeed())
	if err != nil {
		f.Fatal(err)
	}
	b, _ := proto.Marshal(r)
	f.Add(b)
	r.Summary = "\x1b[2Jcleared"
	b, _ = proto.Marshal(r)
	f.Add(b)
	r.Summary, r.Params[4].Default = "bad default", &pluginpb.Value{Value: &pluginpb.Value_IntValue{IntValue: 3}}
	b, _ = proto.Marshal(r)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var r pluginpb.DescribeResponse
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		d, err := DescriptionFromProto(&r)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, s := range []string{d.Name, d.Version, d.Summary, d.Paper, d.Complexity} {
			if strings.IndexFunc(s, unicode.IsControl) >= 0 {
				t.Fatalf("accepted a control character in %q", s)
			}
		}
		_, _ = variant.Resolve(d)
		back, err := DescriptionToProto(d)
		if err != nil {
			t.Fatalf("accepted description does not convert back: %v", err)
		}
		again, err := DescriptionFromProto(back)
		if err != nil || !reflect.DeepEqual(again, d) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, d, again)
		}
	})
}

// FuzzDescribeCache reads any bytes as the describe cache file: Lookup must not fail on it,
// and Store must then rewrite a cache that gives back what it stored.
func FuzzDescribeCache(f *testing.F) {
	dir := f.TempDir()
	exe := filepath.Join(dir, "plugin")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		f.Fatal(err)
	}
	good := &DescribeCache{Path: filepath.Join(dir, "good.json")}
	if err := good.Store(exe, describeSeed()); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(good.Path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(strings.Replace(string(seed), `"version": 1`, `"version": 2`, 1)))
	f.Add([]byte(`{"version":1,"plugins":null}`))
	f.Add([]byte(`{"version":1,"plugins":{"/nonexistent":{"size":1,"mtime_ns":1,"sha256":"x","describe":{"name":"n"}}}}`))
	want := CachedDescription{Name: "seed", Version: "1.2.3", Summary: "a seed variant", Paper: "https://arxiv.org/abs/1706.03762", Complexity: "O(n²)"}
	path := filepath.Join(dir, "cache.json") // one per worker process, whose inputs run one at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c := &DescribeCache{Path: path}
		if got, ok := c.Lookup(exe); ok {
			for _, s := range []string{got.Name, got.Version, got.Summary, got.Paper, got.Complexity} {
				if strings.IndexFunc(s, unicode.IsControl) >= 0 {
					t.Fatalf("Lookup gave a control character to print: %q", s)
				}
			}
		}
		if err := c.Store(exe, describeSeed()); err != nil {
			t.Fatalf("Store over a corrupt cache: %v", err)
		}
		if got, ok := c.Lookup(exe); !ok || got != want {
			t.Fatalf("after Store, Lookup = %+v, %v", got, ok)
		}
	})
}

// TestDescribeControlCharacters: a Describe answer with a control character in a string that
// zoo list or zoo show print (an escape sequence that clears the screen, a newline that forges
// a row) is refused.
func TestDescribeControlCharacters(t *testing.T) {
	for _, mut := range []func(r *pluginpb.DescribeResponse){
		func(r *pluginpb.DescribeResponse) { r.Summary = "\x1b[2Jcleared" },
		func(r *pluginpb.DescribeResponse) { r.Name = "a\nb" },
		func(r *pluginpb.DescribeResponse) { r.Params[0].Doc = "x\u0085y" },
		func(r *pluginpb.DescribeResponse) { r.Params[4].Choices[1] = "\x07" },
	} {
		r, _ := DescriptionToProto(describeSeed())
		mut(r)
		if _, err := DescriptionFromProto(r); err == nil || !strings.Contains(err.Error(), "with a control character") {
			t.Errorf("%v", err)
		}
	}
	r, _ := DescriptionToProto(describeSeed())
	if _, err := DescriptionFromProto(r); err != nil {
		t.Fatal(err)
	}
}
