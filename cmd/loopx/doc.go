// Command loopx is the LoopX server (`loopx serve`) and its command-line client.
//
// This package reads the environment and flags, builds the logger, wires the packages
// together and runs them; it holds no business rules. main only calls run, which tests call
// the same way with their own environment. Long-running parts of `loopx serve` are
// components (serve.go) run under one errgroup: the first to fail stops the others, and a
// SIGINT or SIGTERM stops them all within the shutdown grace (5 s).
//
// CLI exit codes: 0 ok; 1 refused by the state (conflict, refused, forbidden); 2 usage or
// validation error (bad flags, invalid input, unknown goal); 3 server unreachable or failing.
package main
