package main

// stdinArg is the --input value that means standard input; stdinName is how reports and
// errors then name the input.
const (
	stdinArg  = "-"
	stdinName = "stdin"
)
