package quota

import "loopx/store"

// PromptData is the decision's part of the data of the turn prompt (the turn_prompt
// template): why the agent was woken, its todo with its criteria, the inbox and gates, and
// the contract it works under (scope, capabilities, the goal's criteria), the continuation
// and the objective change (ContinuationsMore: the handoffs waiting after the one shown). The exec and webhook runners and the MCP server's turn prompt
// render the same template from it, adding who the agent is and how it calls LoopX; one home,
// so the prompt says the same through every way in.
func (d Decision) PromptData() map[string]any {
	data := map[string]any{
		"Action": d.EffectiveAction, "Reason": d.Reason, "NextAction": d.NextAction,
		"TodoID": int64(0), "TodoPriority": 0, "TodoText": "", "TodoCriteria": []store.CriterionStatus{},
		"InboxPending": d.Inbox.Pending, "InboxSteer": d.Inbox.Steer, "GatesOpen": len(d.Gates.Open),
		"ScopeEditable": []string{}, "ScopeProtected": []string{}, "ScopeNotes": "",
		"Capabilities": []string{}, "GoalCriteria": []store.CriterionStatus{},
		"Continuation": (*store.Handoff)(nil), "ContinuationsMore": max(d.ContinuationsPending-1, 0),
		"ObjectiveChanged": (*ObjectiveChange)(nil),
	}
	if t := d.SelectedTodo; t != nil {
		data["TodoID"], data["TodoPriority"], data["TodoText"] = t.ID, t.Priority, t.Text
		if t.Criteria != nil {
			data["TodoCriteria"] = t.Criteria
		}
	}
	if c := d.Contract; c != nil {
		data["ScopeEditable"], data["ScopeProtected"], data["ScopeNotes"] = c.Scope.Editable, c.Scope.Protected, c.Scope.Notes
		data["Capabilities"], data["GoalCriteria"] = c.Capabilities.Agent, c.Criteria
	}
	if d.Continuation != nil {
		data["Continuation"] = d.Continuation
	}
	if d.ObjectiveChanged != nil {
		data["ObjectiveChanged"] = d.ObjectiveChanged
	}
	return data
}
