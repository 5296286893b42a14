// Command loopx is the LoopX server (`loopx serve`) and its command-line client.
//
// This package is main and the client commands only: it parses flags, calls package server
// for `loopx serve` (and migrate, secrets, reset), the HTTP API through api/client for every
// client command, package mcp for `loopx mcp`, package hosts for host installs and project
// onboarding, and the sandbox's chat client for `loopx chat`; it holds no business rules.
// main only calls run, which tests call the same way with their own environment.
//
// Where a client calls and with which token has one home, the client settings
// (settings.go): every client command, `loopx chat`, `loopx doctor` and `loopx mcp` use them,
// and nothing else reads LOOPX_URL, LOOPX_TOKEN, LOOPX_SANDBOX_URL or LOOPX_SANDBOX_TOKEN. The
// admin token kept under LOOPX_HOME is sent only to this machine's serve.
//
// CLI exit codes: 0 ok; 1 refused by the state or not allowed (conflict, refused, full,
// forbidden); 2 usage or validation error (bad flags, invalid input, unknown goal); 3 server
// unreachable or failing. An API error's exit code is its kind's in the table of error kinds
// (store.ErrorKinds).
package main
