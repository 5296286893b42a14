package router

import (
	"context"
	"errors"
	"slices"
	"strings"

	"loopx/change"
	"loopx/store"
)

// The goal contract from chat: /contract shows it to members; /scope, /capability and
// /criteria change it, /done, /reopen and /replan decide about the goal, each through the
// change kernel (a preview card, applied on Confirm); /waive records an owner's waiver and
// /handoff hands a todo from one agent to another. The kernel decides; where it refuses, the
// router reads the facts that explain why and says it in the chat's language (refusal).

// contractView answers /contract: objective, scope, the capabilities the goal grants and each
// agent holds, the goal's criteria with which are met, and the open todos that carry
// criteria or need capabilities.
func (h *handling) contractView(ctx context.Context, tg *target) error {
	g := tg.goal
	criteria, err := store.CriteriaStatus(ctx, h.tx, g.ID, 0, g.Criteria)
	if err != nil {
		return err
	}
	agents, err := store.ListAgents(ctx, h.tx, g.ID)
	if err != nil {
		return err
	}
	holders := []map[string]any{}
	for _, a := range agents {
		holders = append(holders, map[string]any{"ID": a.ID, "Capabilities": nonNil(a.Capabilities)})
	}
	todos, err := store.ListGoalTodos(ctx, h.tx, g.ID, 200)
	if err != nil {
		return err
	}
	open := []map[string]any{}
	for _, t := range todos {
		if t.Status != store.TodoOpen && t.Status != store.TodoBlocked || (len(t.Criteria) == 0 && len(t.Requires) == 0) {
			continue
		}
		if len(open) == contractTodos {
			break
		}
		st, err := store.CriteriaStatus(ctx, h.tx, g.ID, t.ID, t.Criteria)
		if err != nil {
			return err
		}
		open = append(open, map[string]any{"ID": t.ID, "Text": t.Text, "Requires": nonNil(t.Requires), "Criteria": criteriaRows(st)})
	}
	met := len(criteria) - len(store.Unmet(criteria))
	return h.reply(ctx, "contract", map[string]any{
		"GoalID": g.ID, "Title": g.Title, "Status": g.Status, "Version": g.Version, "Objective": g.Objective,
		"Editable": nonNil(g.ScopeEditable), "Protected": nonNil(g.ScopeProtected), "Notes": g.ScopeNotes,
		"Grants": nonNil(g.Capabilities), "Agents": holders, "Criteria": criteriaRows(criteria),
		"Met": met, "Total": len(criteria), "Todos": open,
	}, tg)
}

// contractTodos is how many open todos with criteria or requirements /contract lists.
const contractTodos = 5

func criteriaRows(st []store.CriterionStatus) []map[string]any {
	out := []map[string]any{}
	for _, c := range st {
		out = append(out, map[string]any{"ID": c.ID, "Text": c.Text, "Met": c.Met, "EvidenceID": c.EvidenceID,
			"WaivedBy": c.WaivedBy, "Waiver": c.Waiver})
	}
	return out
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// scope proposes a change of the goal's scope: its editable or protected paths (replaced,
// added to or removed from) or its boundaries in words.
func (h *handling) scope(ctx context.Context, tg *target, p Parsed) error {
	var c change.GoalChange
	switch p.Part {
	case "notes":
		c.ScopeNotes = &p.Text
	case "editable", "protected":
		cur := tg.goal.ScopeEditable
		dst := &c.ScopeEditable
		if p.Part == "protected" {
			cur, dst = tg.goal.ScopeProtected, &c.ScopeProtected
		}
		list := editPaths(cur, p.Op, p.Items)
		*dst = &list
	}
	return h.proposeContract(ctx, tg, p, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalGoalSet, Goal: c})
}

// editPaths applies /scope's add, remove or set to the current paths.
func editPaths(cur []string, op string, items []string) []string {
	switch op {
	case "add":
		out := slices.Clone(cur)
		for _, it := range items {
			if !slices.Contains(out, it) {
				out = append(out, it)
			}
		}
		return out
	case "remove":
		return slices.DeleteFunc(slices.Clone(cur), func(s string) bool { return slices.Contains(items, s) })
	}
	return slices.Clone(items)
}

// capability proposes what the goal grants (#goal) or what one agent holds (#goal/agent).
func (h *handling) capability(ctx context.Context, tg *target, p Parsed) error {
	if p.Addr != nil && p.Addr.Agent != "" {
		tg, err := h.resolveAgent(ctx, tg)
		if err != nil || tg == nil {
			return err
		}
		c := change.AgentChange{Grant: p.Items}
		if p.Op == "revoke" {
			c = change.AgentChange{Revoke: p.Items}
		}
		return h.proposeContract(ctx, tg, p, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalAgentSet, AgentID: tg.agent, Agent: c})
	}
	c := change.GoalChange{AddCapabilities: p.Items}
	if p.Op == "revoke" {
		c = change.GoalChange{RemoveCapabilities: p.Items}
	}
	return h.proposeContract(ctx, tg, p, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalGoalSet, Goal: c})
}

// criteria proposes adding or removing the goal's acceptance criteria.
func (h *handling) criteria(ctx context.Context, tg *target, p Parsed) error {
	c := change.GoalChange{AddCriteria: p.Criteria}
	if p.Op == "remove" {
		c = change.GoalChange{RemoveCriteria: p.Items}
	}
	return h.proposeContract(ctx, tg, p, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalGoalSet, Goal: c})
}

// finish proposes /done (the preview lists unmet criteria, open todos and gates) or /reopen.
func (h *handling) finish(ctx context.Context, cmd command, tg *target, p Parsed) error {
	kind := store.ProposalGoalDone
	if cmd.name == "reopen" {
		kind = store.ProposalGoalReopen
	}
	return h.proposeContract(ctx, tg, p, change.Request{GoalID: tg.goal.ID, Kind: kind, Reason: p.Reason})
}

// replan proposes a new objective with the todos it cancels or reopens.
func (h *handling) replan(ctx context.Context, tg *target, p Parsed) error {
	return h.proposeContract(ctx, tg, p, change.Request{GoalID: tg.goal.ID, Kind: store.ProposalGoalReplan, Reason: p.Reason,
		Replan: &change.ReplanChange{Objective: p.Text, Cancel: p.Cancel, Reopen: p.Reopen}})
}

// proposeContract proposes req and answers with its preview card, or with the kernel's
// refusal in words.
func (h *handling) proposeContract(ctx context.Context, tg *target, p Parsed, req change.Request) error {
	prop, err := h.c.changes.In(h.tx).Propose(ctx, h.who(), h.meta(), req)
	if err != nil {
		return h.refusal(ctx, err, tg, p)
	}
	lang, err := h.langFor(ctx, &tg.goal)
	if err != nil {
		return err
	}
	return h.c.cards.Proposals.Post(ctx, h.tx, lang, prop, h.m.ChatID, h.m.MessageID, h.m.ThreadID != "", h.c.opts.Now())
}

// waive records an owner's waiver of a criterion of the goal or of one of its todos.
func (h *handling) waive(ctx context.Context, tg *target, p Parsed) error {
	w, err := h.st.WaiveCriterion(ctx, store.WaiveParams{GoalID: tg.goal.ID, TodoID: p.TodoID, Criterion: p.Text,
		Reason: p.Reason, Meta: h.meta()})
	if err != nil {
		return h.refusal(ctx, err, tg, p)
	}
	return h.reply(ctx, "waived", map[string]any{"GoalID": tg.goal.ID, "TodoID": w.TodoID, "Criterion": w.Criterion,
		"Reason": w.Reason, "By": w.WaivedBy}, tg)
}

// handoff hands todo p.TodoID to agent p.To with the owner's note as what is next: the claim
// moves to the receiver, whose next turn carries it as its continuation.
func (h *handling) handoff(ctx context.Context, tg *target, p Parsed) error {
	to, err := h.resolveAgent(ctx, &target{goal: tg.goal, role: tg.role, agent: p.To})
	if err != nil || to == nil {
		return err
	}
	ho, err := h.st.HandOff(ctx, store.HandoffParams{GoalID: tg.goal.ID, TodoID: p.TodoID, To: to.agent, Kind: p.Kind,
		Next: p.Text, Meta: h.meta()})
	if err != nil {
		return h.refusal(ctx, err, tg, p)
	}
	text, err := store.GetTodoText(ctx, h.tx, ho.TodoID)
	if err != nil {
		return err
	}
	return h.reply(ctx, "handed", map[string]any{"GoalID": tg.goal.ID, "TodoID": ho.TodoID, "TodoText": text,
		"To": ho.To, "Kind": ho.Kind, "Next": ho.Next}, to)
}

// refusal answers a kernel refusal of a contract command in words: the cases people meet
// (/done of a done goal, a capability the goal or the agent lacks, an unknown criterion or
// todo) with the facts that explain them, read here; any other refusal as kernelError words
// it (a done goal, a change that changes nothing among them). Errors that are not refusals
// are returned.
func (h *handling) refusal(ctx context.Context, err error, tg *target, p Parsed) error {
	var se *store.Error
	if !errors.As(err, &se) {
		return err
	}
	g := tg.goal
	data := map[string]any{"GoalID": g.ID, "Command": p.Command}
	code := ""
	switch {
	case se.Reason == store.ReasonGoalDone && p.Command == "done":
		code = "already_done"
	case p.Command == "reopen" && se.Field == "status":
		code = "not_done"
	case se.Reason == store.ReasonMissingCapability:
		t, terr := h.st.GetTodo(ctx, g.ID, p.TodoID)
		a, aerr := store.GetAgentIn(ctx, h.tx, g.ID, p.To)
		if terr != nil || aerr != nil {
			break
		}
		missing := store.Missing(t.Requires, a.Capabilities)
		code = "missing_capability"
		data["Agent"], data["TodoID"], data["Missing"] = a.ID, t.ID, missing
		data["GoalLacks"] = nonNil(store.Missing(missing, g.Capabilities))
	case se.Field == "capabilities" && errors.Is(err, store.ErrInvalid) && p.Addr != nil && p.Addr.Agent != "":
		code = "not_granted"
		data["Agent"], data["Missing"] = p.Addr.Agent, nonNil(store.Missing(p.Items, g.Capabilities))
	case se.Field == "remove_criteria" || (se.Field == "criterion" && errors.Is(err, store.ErrNotFound)):
		code = "no_criterion"
		data["TodoID"], data["Criterion"] = p.TodoID, strings.Join(p.Items, ", ")
		ids := store.CriterionIDs(g.Criteria)
		if p.Command == "waive" {
			data["Criterion"] = p.Text
			if p.TodoID != 0 {
				t, terr := h.st.GetTodo(ctx, g.ID, p.TodoID)
				if terr != nil {
					return terr
				}
				ids = store.CriterionIDs(t.Criteria)
			}
		}
		data["Has"] = ids
	case se.Field == "criteria" && p.Command == "criteria":
		for _, c := range p.Criteria {
			if c.ID != "" && slices.Contains(store.CriterionIDs(g.Criteria), c.ID) {
				code, data["Criterion"] = "criterion_exists", c.ID
			}
		}
	case errors.Is(err, store.ErrNotFound) && (se.Field == "todo_id" || se.Field == "cancel_todos" || se.Field == "reopen_todos"):
		code = "no_todo"
		data["TodoID"] = h.missingTodo(ctx, g.ID, p)
	case (se.Field == "cancel_todos" || se.Field == "reopen_todos") && errors.Is(err, store.ErrInvalid):
		id, status := h.misplacedTodo(ctx, g.ID, p)
		if id != 0 {
			code = "todo_status"
			data["TodoID"], data["Status"], data["Want"] = id, status, strings.TrimSuffix(se.Field, "_todos")
		}
	}
	if code == "" {
		return h.kernelError(ctx, err, tg)
	}
	data["Code"] = code
	return h.reply(ctx, "contract_refused", data, tg)
}

// missingTodo is the first todo p names that goal does not have (0: none found).
func (h *handling) missingTodo(ctx context.Context, goalID string, p Parsed) int64 {
	for _, id := range slices.Concat([]int64{p.TodoID}, p.Cancel, p.Reopen) {
		if id == 0 {
			continue
		}
		if _, err := h.st.GetTodo(ctx, goalID, id); errors.Is(err, store.ErrNotFound) {
			return id
		}
	}
	return 0
}

// misplacedTodo is the first todo a replan names to cancel that is not open, or to reopen
// that is not finished, with its status.
func (h *handling) misplacedTodo(ctx context.Context, goalID string, p Parsed) (int64, string) {
	check := func(ids []int64, ok func(string) bool) (int64, string) {
		for _, id := range ids {
			t, err := h.st.GetTodo(ctx, goalID, id)
			if err == nil && !ok(t.Status) {
				return id, t.Status
			}
		}
		return 0, ""
	}
	if id, s := check(p.Cancel, func(s string) bool { return s == store.TodoOpen || s == store.TodoBlocked }); id != 0 {
		return id, s
	}
	return check(p.Reopen, func(s string) bool { return s == store.TodoDone || s == store.TodoCancelled })
}
