package mcp

// Explain is the text a model reads when tool fails with err in a session of opts: how the
// tests check the advice for errors no tool of a session can meet (answering or cancelling a
// gate is not a tool).
func Explain(opts Options, tool string, err error) string {
	return explain(tool, &server{api: opts.API, goal: opts.GoalID, agent: opts.AgentID}, err).Error()
}
