// Package examples holds the agent scripts that docs/agents.md walks through. The demo
// agent is embedded so `loopx serve --sandbox` can seed and run it from any directory.
package examples

import _ "embed"

//go:embed demo-agent.sh
var demoAgent []byte

// DemoAgent returns the bundled demo agent script (examples/demo-agent.sh).
func DemoAgent() []byte { return append([]byte(nil), demoAgent...) }
