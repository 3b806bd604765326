package zoo

import (
	"errors"
	"fmt"
)

// InputError is an error the caller can fix: a reference that names no model, an option out of
// range, a weights file that does not fit, a text longer than the window. Option is the option
// at fault ("LoadOptions.Weights", "EncoderOptions.Window"; "" when the input itself is), and
// the message names it the same way, so that a command-line front end can render it with its
// flag's name. Every other error of this package is a failure of the job.
type InputError struct {
	Option string
	Err    error
}

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// IsInput reports whether err is, or wraps, an *InputError.
func IsInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// inputErr marks err as the caller's to fix (nil stays nil; an InputError is kept).
func inputErr(option string, err error) error {
	if err == nil {
		return nil
	}
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	return &InputError{Option: option, Err: err}
}

// inputErrf formats an InputError about option.
func inputErrf(option, format string, args ...any) error {
	return &InputError{Option: option, Err: fmt.Errorf(format, args...)}
}

// Option names, as messages write them.
const (
	optPreset    = "LoadOptions.Preset"
	optSet       = "LoadOptions.Set"
	optSeed      = "LoadOptions.Seed"
	optWeights   = "LoadOptions.Weights"
	optTokenizer = "LoadOptions.Tokenizer"
	optBackend   = "LoadOptions.Backend"
	optPrecision = "LoadOptions.Precision"
	optThreads   = "LoadOptions.Threads"
	optFeeds     = "EncoderOptions.Feeds"
	optPool      = "EncoderOptions.Pool"
	optNormalize = "EncoderOptions.Normalize"
	optWindow    = "EncoderOptions.Window"
	optBatch     = "EncoderOptions.Batch"
	optTruncate  = "EncoderOptions.Truncate"
	optRegistry  = "LoadOptions.Registries"
	optMaxWin    = "EncoderOptions.MaxWindows"
)

// OptionNames lists every option name that messages may carry, for front ends that render them
// with their own names (zoo's CLI maps each to its flag).
func OptionNames() []string {
	return []string{optPreset, optSet, optSeed, optWeights, optTokenizer, optBackend, optPrecision,
		optThreads, optFeeds, optPool, optNormalize, optWindow, optBatch, optTruncate, optRegistry, optMaxWin,
		optEmbeddingOutput, optMaxTokens}
}
