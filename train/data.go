package train

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	zoo "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/lmdata"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// TextSource is text a run reads, as bytes (zoo's byte tokenizer: one token per byte): the
// bytes [Offset, Offset+Size) of the file Path (Size 0: to its end), or Text when Path is "".
// It is cut into windows of Config.Window tokens as `zoo run` cuts text.
type TextSource struct {
	// Name is how messages name the source ("Data.Train" or "Data.Held" when empty); a front
	// end names it as its user gave it ("--input").
	Name string
	// Path is the file; Offset and Size select a part of it.
	Path         string
	Offset, Size int64
	// Text is the text when Path is "".
	Text []byte
}

// File is the source of all of path's bytes.
func File(path string) TextSource { return TextSource{Path: path} }

// Text is the source of text held in memory.
func Text(text []byte) TextSource { return TextSource{Text: text} }

// Data is what a run trains on and, when Held is set, evaluates on.
type Data struct {
	Train TextSource
	// Held is the held-out text: its loss and bits per byte before training, every
	// Config.EvalEvery steps and at the end. The zero value: no evaluation.
	Held TextSource
}

// HasHeld reports whether d has held-out text.
func (d Data) HasHeld() bool { return d.Held.set() }

func (s TextSource) set() bool { return s.Path != "" || s.Text != nil }

// named returns s with its default name when it has none.
func (s TextSource) named(name string) TextSource {
	if s.Name == "" {
		s.Name = name
	}
	return s
}

// String names the source as messages do: "Data.Train corpus.txt", or "Data.Train
// corpus.txt (bytes 900–999)" for a part of the file; in-memory text by its name alone.
func (s TextSource) String() string {
	if s.Path == "" {
		return s.Name
	}
	name := s.Path
	if s.Name != "" {
		name = s.Name + " " + s.Path
	}
	if s.Offset == 0 && s.Size <= 0 {
		return name
	}
	end := s.Offset + s.Size - 1
	if s.Size <= 0 {
		if st, err := os.Stat(s.Path); err == nil {
			end = st.Size() - 1
		}
	}
	return fmt.Sprintf("%s (bytes %d–%d)", name, s.Offset, end)
}

// describe is String, for messages.
func (s TextSource) describe() string { return s.String() }

// Check checks that the source has text: a file that exists, is not a directory and is not
// empty, or in-memory text that is not empty. Its *zoo.InputError names the source.
func (s TextSource) Check() error { return s.check("train on") }

// check is Check, with what an empty source leaves nothing to do ("train on", "score").
func (s TextSource) check(what string) error {
	if s.Path == "" {
		if len(s.Text) == 0 {
			return inputErrf(s.Name, "%s is empty: nothing to %s", s.describe(), what)
		}
		return nil
	}
	st, err := os.Stat(s.Path)
	switch {
	case err != nil:
		return inputErrf(s.Name, "%s %s: %w", s.Name, s.Path, errors.Unwrap(err))
	case st.IsDir():
		return inputErrf(s.Name, "%s %s is a directory; give a text file", s.Name, s.Path)
	case st.Size() == 0:
		return inputErrf(s.Name, "%s %s is empty (0 bytes): nothing to %s", s.Name, s.Path, what)
	}
	return nil
}

// windowSource returns the source's windows of window tokens, read on demand (a file's
// through the operating system's page cache: a text of any size trains in bounded memory),
// and the function that releases them.
func (s TextSource) windowSource(window int) (lmdata.Source, func(), error) {
	if s.Path == "" {
		src, err := lmdata.NewByteFile(bytes.NewReader(s.Text), 0, int64(len(s.Text)), window)
		return src, func() {}, err
	}
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, nil, inputErrf(s.Name, "%s %s: %w", s.Name, s.Path, errors.Unwrap(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", s.describe(), err)
	}
	size := s.Size
	if size <= 0 || s.Offset+size > st.Size() {
		size = st.Size() - s.Offset
	}
	src, err := lmdata.NewByteFile(f, s.Offset, max(size, 0), window)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return src, func() { f.Close() }, nil
}

// loader returns a loader over the source's windows of window tokens, and the function that
// releases it.
func (s TextSource) loader(window int, opt lmdata.Options, shuffle bool) (*lmdata.Loader, func(), error) {
	src, release, err := s.windowSource(window)
	if err != nil {
		switch {
		case zoo.IsInput(err):
			return nil, nil, err
		case errors.Is(err, tokenize.ErrEmpty):
			return nil, nil, inputErrf(s.Name, "%s is empty: nothing to train on", s.describe())
		}
		return nil, nil, fmt.Errorf("%s: %w", s.describe(), err)
	}
	opt.Shuffle = shuffle
	l, err := lmdata.NewLoaderFrom(src, opt)
	if err != nil {
		release()
		return nil, nil, inputErrf(s.Name, "%s: %w", s.describe(), err)
	}
	return l, release, nil
}
