package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// stdinArg is the --input value that means standard input; stdinName is how reports and
// errors then name the input.
const (
	stdinArg  = "-"
	stdinName = "stdin"
)

// inputFile resolves the --input of a verb that needs a file it can stat and read (zoo run
// sizes its windows, its output file and the memory guard by the input's size before it
// reads a byte). A path comes back as it is, as both the name to show and the file. "-" is
// standard input: it is copied to a temporary file, which cleanup removes, and named
// "stdin"; an empty one is then the same error as an empty file. The copy stops when ctx
// is cancelled (Ctrl-C at a terminal that sends no end of input).
func inputFile(ctx context.Context, path string, stdin io.Reader, stderr io.Writer) (name, file string, cleanup func(), err error) {
	if path != stdinArg {
		return path, path, func() {}, nil
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintln(stderr, "zoo: reading the input from the terminal; end it with Ctrl-D")
	}
	tmp, err := os.CreateTemp("", "zoo-stdin-*")
	if err != nil {
		return "", "", nil, failed(fmt.Errorf("input -: a temporary file for standard input: %w", err))
	}
	cleanup = func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	in := &readErr{r: stdin}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(tmp, in)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	if err == nil {
		err = tmp.Close()
	}
	switch {
	case err == nil:
		return stdinName, tmp.Name(), cleanup, nil
	case in.err != nil:
		err = badInputf("input -: reading standard input: %w", in.err)
	case ctx.Err() == nil:
		err = failed(fmt.Errorf("input -: copying standard input to %s: %w", tmp.Name(), err))
	}
	cleanup()
	return "", "", nil, err
}

// readErr remembers its reader's error (other than io.EOF), to tell it from a write error.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
