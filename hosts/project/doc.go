// Package project is a project folder's link to LoopX: the connection in .loopx/ (server
// URL, goal, agent; never a secret), the agent tokens kept in the user's config directory,
// `loopx connect` (find or create the goal, register the agent, store both) and the status
// screen of `loopx status`.
//
// Guarantees:
//   - A token is only ever written to the credentials file in the user's config directory
//     (LOOPX_CONFIG_DIR, else $XDG_CONFIG_HOME/loopx, else ~/.config/loopx), mode 0600 in a
//     0700 directory; never to a file inside the project.
//   - Files are replaced atomically (write aside, rename), and only when their content
//     changes: a second connect with nothing new writes nothing.
//   - Connect reuses what exists (goal, agent, stored token, connection) and never
//     overwrites it: a connection to another goal, or an agent whose token this machine
//     lacks, is refused with what to do instead.
package project
