package train

import (
	"errors"
	"fmt"
	"strings"

	zoo "github.com/zoo-dev/zoo"
)

// inputErr marks err as the caller's to fix, about option (nil stays nil; an *zoo.InputError
// is kept as it is).
func inputErr(option string, err error) error {
	if err == nil {
		return nil
	}
	var ie *zoo.InputError
	if errors.As(err, &ie) {
		return err
	}
	return &zoo.InputError{Option: option, Err: err}
}

// inputErrf formats an *zoo.InputError about option.
func inputErrf(option, format string, args ...any) error {
	return &zoo.InputError{Option: option, Err: fmt.Errorf(format, args...)}
}

// renamed returns err with the option name from replaced by to, in its text and as its
// Option: package zoo's helpers name their own options (zoo.ChooseWindow says
// EncoderOptions.Window), which a training run sets as one of its own.
func renamed(err error, from, to string) error {
	var ie *zoo.InputError
	if !errors.As(err, &ie) || ie.Option != from {
		return err
	}
	return &zoo.InputError{Option: to, Err: errors.New(strings.ReplaceAll(ie.Error(), from, to))}
}
