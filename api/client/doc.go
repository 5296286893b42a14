// Package client is the Go client of LoopX's HTTP API (/v1, documented in docs/api.md).
// The CLI and the MCP server (package mcp) both call the API through it, so a program and a
// person see the same answers and the same errors.
//
// Guarantees:
//   - Every call carries the bearer token; a mutating call (any method but GET) carries the
//     Idempotency-Key the caller gives, and is refused locally when it has none, so a retry
//     with the same key replays the server's receipt instead of acting twice.
//   - A non-2xx answer is returned as an *api.Error (code, field, message, HTTP status); an
//     answer that never arrived is an error that errors.Is ErrUnreachable. Nothing is retried
//     here: the caller decides, with the same key.
//   - InProcess serves the calls from an http.Handler in the same process (the /mcp endpoint
//     of `loopx serve`), through the same authentication, receipts and metrics as the
//     network path.
package client
