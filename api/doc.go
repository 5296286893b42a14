// Package api is LoopX's HTTP JSON API under /v1, the surface the `loopx` CLI and agent hosts
// use. Every endpoint is listed in routes.go and documented in docs/api.md.
//
// Guarantees:
//   - Authentication: every request carries a bearer token: the admin token (compared in
//     constant time) or an agent token issued at registration (looked up by its hash). No
//     token or an unknown one is 401.
//   - Authorization before action: an agent token acts only on its own goal and only as its
//     own agent; anything else is 403, and the refusal is written to the audit before the
//     answer. Admin-only endpoints refuse agent tokens the same way. Gate answers are checked
//     by the store against the goal's owners, gate cancels against the asking agent (the
//     store's ErrForbidden: 403, audited).
//   - Idempotency: every mutating call (POST, PATCH) must carry an Idempotency-Key header.
//     The key travels to the store operation, which writes the state change and its receipt in
//     one transaction: a replay returns the original result (same status, same body) and
//     writes nothing; the same key with a different request is 409 conflict.
//   - Errors are JSON {"error": {"code", "field", "reason", "message"}}; the code and status
//     come from the table of error kinds (store.ErrorKinds), the one mapping of the store's
//     sentinel errors, and "reason" carries the store's Reason constant where one was set (see
//     errors.go); bad input changes nothing.
//   - Files are read like what they belong to (GET /v1/files/{id}): a deliverable by any agent
//     of its goal, a file that came with (or answers) an inbox item only by that item's agent;
//     anything else is 404, audited. Bodies that carry a file (evidence, inbox reply) may be as
//     large as the store's file cap, base64-encoded; the content is staged before the
//     operation that records it.
//   - Request bodies are limited (Options.MaxBodyBytes, default 256 KiB) and unknown JSON
//     fields are rejected, naming the field.
package api
