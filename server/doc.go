// Package server is `loopx serve`: the one loader of its settings (LoadConfig, every variable
// read and checked before anything starts) and the wiring that builds every part once and
// runs them (Run).
//
// Guarantees:
//   - One entry point, Run(ctx, cfg): it takes LOOPX_HOME's lock when it runs the private
//     database there, opens or starts the database, migrates it under a database lock, and
//     builds the templates, the card set, the change kernel, the inbox, the should-run service
//     and the digests once, handing the same objects to every area (API, chat, workspace,
//     MCP, scheduler).
//   - Long-running parts are components (serve.go) under one errgroup: the first to fail
//     stops the others; ctx's end stops them all within ShutdownGrace, stopping intake
//     first and letting in-flight work finish.
//   - Each area is wired in a file of its own (wire_<area>.go) and may be switched off by its
//     setting; /healthz, /readyz (the database, its migrations and each area's check) and
//     /metrics are served on the one listener.
//   - The binary knows which build it is (Build: version, commit, date, the schema it knows):
//     serve logs it at start, /healthz answers it and the database records it (release_seen).
//     A database migrated by a later release is refused at start, with both versions and the
//     way back.
//   - Secrets (database URL, admin token, Lark secrets, the secret key) never reach a log
//     line or an error message.
//   - Once listening, serve records under LOOPX_HOME where it can be reached (Serving: its
//     pid, the API's and the sandbox's URLs, never a secret) and removes the record at a clean
//     stop, so clients on the same machine find it whatever LOOPX_LISTEN and
//     LOOPX_SANDBOX_ADDR say.
//   - The other commands that own the server's state (migrate, secrets rotate-key, reset) go
//     through the same loader and the same lock (Migrate, RotateKey, LockHome).
package server
