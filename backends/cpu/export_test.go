package cpu

// LinearCuts exposes linearCuts to the external tests.
var LinearCuts = linearCuts
