// Package hosts writes, for one agent host (Claude Code, Codex, Cursor, OpenCode, Gemini CLI,
// Qwen Code, GitHub Copilot CLI, Pi) and one scope (the project, or the user's home), the
// host's entry for the `loopx mcp` server (Pi: an extension that runs it), the host's own
// turn command (/loopx, $loopx) whose steps come from the loop contract
// (templates.LoopSteps), and, for Claude Code and Codex, the permission hook (`loopx hook
// permission`).
//
// Guarantees:
//   - Shared files are merged, never overwritten: JSON files member by member (the order
//     and indentation of the user's members are kept), TOML and Markdown files with one
//     block between marker lines, and whole files only when they carry the marker. Anything
//     of the same name the install did not write is a ConflictError and nothing is written.
//   - An install is idempotent: the second one plans no change. A plan can be printed as a
//     unified diff instead of applied (--dry-run).
//   - The manifest (hosts.json in the user's config directory) records what each install
//     added (not what was there before); uninstall removes exactly that, leaves what changed
//     since, deletes files and folders only when the install created them and they are
//     empty again.
//   - No token is ever written: `loopx mcp` reads the agent's token from the user's config
//     directory (or LOOPX_TOKEN) at run time. Files a project usually commits name no path
//     of this machine (they run loopx from PATH unless --command says otherwise).
//   - Texts read in every session (Cursor's rule, the AGENTS.md block, descriptions) describe
//     LoopX and never gate an ordinary request; the marker a file carries comes after what
//     a model reads.
package hosts
