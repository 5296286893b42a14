package api

// routes maps the whole /v1 surface. Every mutating route (POST, PATCH) requires an
// Idempotency-Key header; see docs/api.md for bodies and answers. Other packages add their
// endpoints with one line here and a handler file of their own (inbox.go).
func (s *Server) routes() {
	s.handle("POST /v1/goals", s.createGoal)
	s.handle("GET /v1/goals", s.listGoals)
	s.handle("GET /v1/goals/{goal}", s.showGoal)
	s.handle("PATCH /v1/goals/{goal}", s.setGoal)
	s.handle("POST /v1/goals/{goal}/stop", s.stopGoal)
	s.handle("POST /v1/goals/{goal}/resume", s.resumeGoal)
	s.handle("POST /v1/goals/{goal}/done", s.doneGoal)
	s.handle("POST /v1/goals/{goal}/reopen", s.reopenGoal)
	s.handle("POST /v1/goals/{goal}/replan", s.replanGoal)
	s.handle("GET /v1/goals/{goal}/trail", s.listTrail)
	s.handle("POST /v1/goals/{goal}/waivers", s.waive)
	s.handle("GET /v1/defaults", s.showDefaults)
	s.handle("PATCH /v1/defaults", s.setDefaults)
	s.handle("POST /v1/defaults/proposals", s.proposeDefaults)

	s.handle("POST /v1/goals/{goal}/agents", s.registerAgent)
	s.handle("GET /v1/goals/{goal}/agents", s.listAgents)
	s.handle("PATCH /v1/goals/{goal}/agents/{agent}", s.updateAgent)
	s.handle("POST /v1/goals/{goal}/agents/{agent}/rotate-token", s.rotateToken)

	s.handle("POST /v1/goals/{goal}/todos", s.addTodo)
	s.handle("GET /v1/goals/{goal}/todos", s.listTodos)
	s.handle("GET /v1/goals/{goal}/todos/{todo}", s.showTodo)
	s.handle("PATCH /v1/goals/{goal}/todos/{todo}", s.updateTodo)
	s.handle("POST /v1/goals/{goal}/todos/{todo}/claim", s.claimTodo)
	s.handle("POST /v1/goals/{goal}/todos/{todo}/done", s.doneTodo)
	s.handle("POST /v1/goals/{goal}/todos/{todo}/handoff", s.handOff)
	s.handle("GET /v1/goals/{goal}/handoffs", s.listHandoffs)

	s.handle("POST /v1/goals/{goal}/gates", s.askGate)
	s.handle("GET /v1/goals/{goal}/gates", s.listGates)
	s.handle("POST /v1/goals/{goal}/gates/{gate}/answer", s.answerGate)
	s.handle("POST /v1/goals/{goal}/gates/{gate}/cancel", s.cancelGate)
	s.handle("GET /v1/goals/{goal}/gates/{gate}", s.showGate)
	s.handle("POST /v1/goals/{goal}/gates/{gate}/expire", s.expirePermission)
	s.handle("POST /v1/goals/{goal}/permissions", s.askPermission)
	s.handle("GET /v1/goals/{goal}/permission-policy", s.showPolicy)
	s.handle("PUT /v1/goals/{goal}/permission-policy", s.setPolicy)

	s.handleUpload("POST /v1/goals/{goal}/evidence", s.addEvidence)
	s.handle("GET /v1/goals/{goal}/evidence", s.listEvidence)

	s.handle("POST /v1/goals/{goal}/should-run", s.shouldRun)
	s.handle("POST /v1/goals/{goal}/spend-slot", s.spendSlot)
	s.handle("GET /v1/goals/{goal}/quota", s.quotaStatus)
	s.handle("POST /v1/goals/{goal}/refresh-state", s.refreshState)
	s.handle("GET /v1/goals/{goal}/status", s.goalStatus)

	s.handle("GET /v1/goals/{goal}/turns", s.listTurns)
	s.handle("POST /v1/goals/{goal}/turns/bind", s.bindTurn)
	s.handle("GET /v1/goals/{goal}/turns/{turn}", s.showTurn)
	s.handle("GET /v1/goals/{goal}/decisions", s.listDecisions)

	s.handle("GET /v1/goals/{goal}/agents/{agent}/inbox", s.inboxCounts)
	s.handle("POST /v1/goals/{goal}/agents/{agent}/inbox/drain", s.inboxDrain)
	s.handle("POST /v1/goals/{goal}/agents/{agent}/inbox/ack", s.inboxAck)
	s.handleUpload("POST /v1/goals/{goal}/agents/{agent}/inbox/reply", s.inboxReply)

	s.handle("GET /v1/files/{file}", s.getFile)
	s.handle("GET /v1/goals/{goal}/files", s.listFiles)
	s.handle("POST /v1/goals/{goal}/agents/{agent}/progress", s.progress)
	s.handle("POST /v1/goals/{goal}/agents/{agent}/stop", s.runWork("stop"))
	s.handle("POST /v1/goals/{goal}/agents/{agent}/run", s.runWork("run"))
	s.handle("POST /v1/goals/{goal}/agents/{agent}/hold", s.runWork("hold"))
	s.handle("POST /v1/goals/{goal}/agents/{agent}/resume", s.runWork("resume"))
	s.handle("POST /v1/goals/{goal}/agents/{agent}/ack", s.acknowledge)
	s.handle("POST /v1/goals/{goal}/agents/{agent}/capabilities", s.setCapabilities)
	s.handle("GET /v1/goals/{goal}/runs/{run}", s.getRun)

	s.handle("POST /v1/goals/{goal}/proposals", s.createProposal)
	s.handle("GET /v1/goals/{goal}/proposals", s.listProposals)
	s.handle("GET /v1/goals/{goal}/proposals/{proposal}", s.showProposal)
	s.handle("POST /v1/goals/{goal}/proposals/{proposal}/confirm", s.confirmProposal)
	s.handle("POST /v1/goals/{goal}/proposals/{proposal}/cancel", s.cancelProposal)
	s.handle("GET /v1/proposals/{proposal}", s.showProposal)
	s.handle("POST /v1/proposals/{proposal}/confirm", s.confirmProposal)
	s.handle("POST /v1/proposals/{proposal}/cancel", s.cancelProposal)

	s.handle("GET /v1/audit", s.listAudit)
	s.handle("GET /v1/diagnostics", s.diagnostics)
	s.handle("GET /v1/whoami", s.whoami)
}
