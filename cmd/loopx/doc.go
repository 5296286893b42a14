// Command loopx is the LoopX server (`loopx serve`) and its command-line client.
//
// This package is main and the client commands only: it parses flags, calls package server
// for `loopx serve` (and migrate, secrets, reset), the HTTP API through api/client for every
// client command, package mcp for `loopx mcp`, package hosts for host installs and project
// onboarding, and the sandbox's chat client for `loopx chat`; it holds no business rules.
// main only calls run, which tests call the same way with their own environment.
//
// CLI exit codes: 0 ok; 1 refused by the state or not allowed (conflict, refused, full,
// forbidden); 2 usage or validation error (bad flags, invalid input, unknown goal); 3 server
// unreachable or failing. An API error's exit code is its kind's in the table of error kinds
// (store.ErrorKinds).
package main
