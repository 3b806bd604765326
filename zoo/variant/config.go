package variant

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/internal/suggest"
)

// Config holds hyperparameter values keyed by name; values are int64, float64, bool or string
// as the schema's Kind says. Resolve produces one with every schema entry present.
type Config map[string]any

// Int returns an int hyperparameter; it returns 0 when absent or of another kind.
func (c Config) Int(name string) int {
	v, _ := c[name].(int64)
	return int(v)
}

// Float returns a float hyperparameter; it returns 0 when absent or of another kind.
func (c Config) Float(name string) float64 {
	v, _ := c[name].(float64)
	return v
}

// Bool returns a bool hyperparameter; it returns false when absent or of another kind.
func (c Config) Bool(name string) bool {
	v, _ := c[name].(bool)
	return v
}

// String returns a string hyperparameter; it returns "" when absent or of another kind.
func (c Config) String(name string) string {
	v, _ := c[name].(string)
	return v
}

// JSON returns the config as a JSON object with sorted keys.
func (c Config) JSON() string {
	b, _ := json.Marshal(map[string]any(c))
	return string(b)
}

// Keys returns the config's names, sorted.
func (c Config) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Resolve applies layers of values over the schema's defaults, in order (registry defaults,
// preset, --set overrides), and returns a complete typed config. Values may be Go values (from
// YAML) or strings (from the command line). An unknown name, a value of the wrong type, a
// value below its minimum or outside its choices is an error naming the parameter.
func Resolve(d Description, layers ...map[string]any) (Config, error) {
	cfg := Config{}
	for _, p := range d.Params {
		cfg[p.Name] = p.Default
	}
	for _, layer := range layers {
		keys := make([]string, 0, len(layer))
		for k := range layer {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == TrainingKey {
				return nil, fmt.Errorf("%s: %q is reserved (zoo train asks for training graphs); it is not a hyperparameter", d.Name, k)
			}
			p, ok := d.Param(k)
			if !ok {
				return nil, fmt.Errorf("%s has no hyperparameter %q%s", d.Name, k, suggest.DidYouMean(k, paramNames(d)))
			}
			v, err := coerce(p, layer[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %s=%v: %w", d.Name, k, layer[k], err)
			}
			cfg[k] = v
		}
	}
	return cfg, nil
}

func paramNames(d Description) []string {
	out := make([]string, len(d.Params))
	for i, p := range d.Params {
		out[i] = p.Name
	}
	return out
}

// errNotBool answers a boolean given for a number, e.g. scale=false from before scale was a
// number in every variant.
var errNotBool = errors.New("want a number, not true or false (the parameter's doc says what its values mean)")

func coerce(p Param, v any) (any, error) {
	var out any
	switch p.Kind {
	case KindInt:
		switch x := v.(type) {
		case int:
			out = int64(x)
		case int64:
			out = x
		case float64:
			if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				return nil, fmt.Errorf("want an integer")
			}
			out = int64(x)
		case string:
			n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("want an integer")
			}
			out = n
		default:
			return nil, fmt.Errorf("want an integer, got %T", v)
		}
		if p.Min != nil && float64(out.(int64)) < *p.Min {
			return nil, fmt.Errorf("must be at least %v", *p.Min)
		}
	case KindFloat:
		switch x := v.(type) {
		case int:
			out = float64(x)
		case int64:
			out = float64(x)
		case float64:
			out = x
		case bool:
			return nil, errNotBool
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				if _, isBool := strconv.ParseBool(strings.TrimSpace(x)); isBool == nil {
					return nil, errNotBool
				}
				return nil, fmt.Errorf("want a number")
			}
			out = f
		default:
			return nil, fmt.Errorf("want a number, got %T", v)
		}
		f := out.(float64)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("want a finite number")
		}
		if p.Min != nil && f < *p.Min {
			return nil, fmt.Errorf("must be at least %v", *p.Min)
		}
	case KindBool:
		switch x := v.(type) {
		case bool:
			out = x
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			if err != nil {
				return nil, fmt.Errorf("want true or false")
			}
			out = b
		default:
			return nil, fmt.Errorf("want true or false, got %T", v)
		}
	case KindString:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a string, got %T", v)
		}
		if len(p.Choices) > 0 {
			found := false
			for _, c := range p.Choices {
				found = found || c == s
			}
			if !found {
				return nil, fmt.Errorf("want one of %s", strings.Join(p.Choices, ", "))
			}
		}
		out = s
	default:
		return nil, fmt.Errorf("schema has unknown kind %q", p.Kind)
	}
	return out, nil
}

// MinOf returns a pointer to v for Param.Min.
func MinOf(v float64) *float64 { return &v }
