package router

import (
	"regexp"
	"strconv"
	"strings"

	"loopx/store"
)

// The grammar of the goal contract's commands. Each is typed on a phone: one line, words in
// the order people say them, the goal token optional where a binding names the goal. Every
// problem carries a code whose word (parse.<code>) says it in the chat's language.

// parseContract reads the arguments of /scope, /capability, /criteria, /done, /reopen,
// /replan, /waive and /handoff into p.
func parseContract(cmd command, p Parsed, rest string) (Parsed, error) {
	bad := func(code, format string, args ...any) (Parsed, error) {
		return Parsed{}, parseError(cmd.name, code, format, args...)
	}
	switch cmd.args {
	case argsScope:
		part, r := cut(rest)
		p.Part = strings.ToLower(part)
		switch p.Part {
		case "notes":
			if r == "" {
				return bad("scope_notes", "say the boundaries in words after notes, or none to clear them")
			}
			if !strings.EqualFold(r, "none") {
				p.Text = r
			}
			return p, nil
		case "editable", "protected":
		default:
			return bad("scope_part", "/scope takes editable, protected or notes first")
		}
		p.Op = "set"
		if op, r2 := cut(r); op == "add" || op == "remove" {
			p.Op, r = op, r2
		}
		items := splitList(r)
		clear := map[string]string{"editable": "all", "protected": "none"}[p.Part]
		if len(items) == 1 && strings.EqualFold(items[0], clear) {
			if p.Op != "set" {
				return bad("scope_clear", "%s %s takes paths, not %s", p.Part, p.Op, clear)
			}
			p.Items = []string{}
			return p, nil
		}
		if len(items) == 0 {
			return bad("scope_paths", "name the paths (such as src/** or docs/*.md), or %s", clear)
		}
		for _, it := range items {
			if err := store.CheckScope(store.Scope{Editable: []string{it}}); err != nil {
				return bad("scope_path", "%q is not a path pattern (such as src/** or docs/*.md)", clip(it, 60))
			}
		}
		p.Items = items
	case argsCapability:
		op, r := cut(rest)
		p.Op = strings.ToLower(op)
		if p.Op != "grant" && p.Op != "revoke" {
			return bad("capability_op", "/capability takes grant or revoke, then the capabilities")
		}
		p.Items = lowerAll(splitList(r))
		if len(p.Items) == 0 {
			return bad("capability_names", "name the capabilities to %s, such as write-code", p.Op)
		}
		for _, c := range p.Items {
			if !store.ValidCapability(c) {
				return bad("capability_name", "%q is not a capability name: 1-40 of a-z, 0-9 and -, such as write-code", clip(c, 40))
			}
		}
	case argsCriteria:
		op, r := cut(rest)
		p.Op = strings.ToLower(op)
		switch p.Op {
		case "add":
			for _, line := range strings.Split(r, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					p.Criteria = append(p.Criteria, store.ParseCriterion(line))
				}
			}
			if len(p.Criteria) == 0 {
				return bad("criteria_text", "say what must be true after add (one criterion a line; id: text chooses its id)")
			}
			if len(p.Criteria) > store.MaxCriteria {
				return bad("criteria_many", "at most %d criteria at once", store.MaxCriteria)
			}
		case "remove":
			p.Items = lowerAll(splitList(r))
			if len(p.Items) == 0 {
				return bad("criteria_ids", "name the criteria to remove by id, such as g2")
			}
			for _, id := range p.Items {
				if !store.ValidCriterionID(id) {
					return bad("criterion_id", "%q is not a criterion id (such as g2)", clip(id, 20))
				}
			}
		default:
			return bad("criteria_op", "/criteria takes add or remove")
		}
	case argsReason:
		p.Reason = rest
	case argsReplan:
		text, cancel, reopen := replanTodos(rest)
		p.Cancel, p.Reopen = cancel, reopen
		p.Text, p.Reason = splitBecause(text)
		if p.Text == "" {
			return bad("replan_objective", "say the new objective (then optionally because and the reason)")
		}
	case argsWaive:
		tok, r := cut(rest)
		if strings.EqualFold(tok, "todo") || tok == "待办" {
			n, r2 := cut(r)
			id, ok := todoNumber(n)
			if !ok {
				return bad("todo_number", "%q is not a todo number", clip(n, 20))
			}
			p.TodoID = id
			tok, r = cut(r2)
		}
		p.Text = strings.ToLower(tok)
		if p.Text == "" {
			return bad("waive_criterion", "name the criterion to waive, such as g2 (todo 3 c1 for a todo's)")
		}
		if !store.ValidCriterionID(p.Text) {
			return bad("criterion_id", "%q is not a criterion id (such as g2)", clip(tok, 20))
		}
		if r == "" {
			return bad("waive_reason", "say why %s counts as met without evidence", p.Text)
		}
		p.Reason = r
	case argsHandoff:
		if strings.TrimSpace(rest) == "" {
			return bad("handoff_args", "/handoff needs the todo number, then to <agent> and a note")
		}
		tok, r := cut(rest)
		if strings.EqualFold(tok, "todo") || tok == "待办" {
			tok, r = cut(r)
		}
		id, ok := todoNumber(tok)
		if !ok {
			return bad("todo_number", "%q is not a todo number", clip(tok, 20))
		}
		p.TodoID = id
		tok, r = cut(r)
		if strings.EqualFold(tok, "to") || tok == "给" {
			tok, r = cut(r)
		}
		p.To = strings.ToLower(tok)
		if p.To == "" {
			return bad("handoff_to", "name the agent that takes the todo: to <agent>")
		}
		if !store.ValidID(p.To) {
			return bad("agent_id", "%q is not an agent id", clip(tok, 40))
		}
		if kw, r2 := cut(r); strings.EqualFold(kw, "as") {
			kind, r3 := cut(r2)
			kind = strings.ToLower(kind)
			if kind != store.HandoffResume && kind != store.HandoffReview && kind != store.HandoffVerify {
				return bad("handoff_kind", "after as comes resume, review or verify, not %q", clip(kind, 20))
			}
			p.Kind, r = kind, r3
		}
		if r == "" {
			return bad("handoff_note", "add a note: what %s should do next", p.To)
		}
		p.Text = r
	}
	return p, nil
}

// splitList splits paths, capabilities or ids typed with spaces, commas or the Chinese
// enumeration comma.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return isSpace(r) || r == ',' || r == '，' || r == '、' })
}

func lowerAll(v []string) []string {
	for i := range v {
		v[i] = strings.ToLower(v[i])
	}
	return v
}

// todoNumber reads a todo id as people type it: 12 or #12.
func todoNumber(tok string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(tok, "#"), 10, 64)
	return n, err == nil && n > 0
}

// replanClause is a trailing "cancel 3 4" or "reopen #7" of /replan.
var replanClause = regexp.MustCompile(`(?i)(?:^|\s)(cancel|reopen)((?:[\s,，、]+#?[0-9]+)+)[\s,，、]*$`)

// replanTodos takes the trailing cancel and reopen clauses (todo numbers only) off a /replan
// text; "cancel the old plan" stays part of the objective.
func replanTodos(s string) (text string, cancel, reopen []int64) {
	text = strings.TrimSpace(s)
	for {
		m := replanClause.FindStringSubmatchIndex(text)
		if m == nil {
			return text, cancel, reopen
		}
		var ids []int64
		for _, tok := range splitList(text[m[4]:m[5]]) {
			id, _ := todoNumber(tok) // the clause holds numbers only
			ids = append(ids, id)
		}
		if strings.EqualFold(text[m[2]:m[3]], "cancel") {
			cancel = append(ids, cancel...)
		} else {
			reopen = append(ids, reopen...)
		}
		text = strings.TrimSpace(text[:m[0]])
	}
}

// becauseWord matches the word that starts a replan's reason: because, or 因为 (after a space,
// a punctuation mark, or at the start).
var becauseWord = regexp.MustCompile(`(?i)((^|\s+)because(\s*[:：,，]\s*|\s+|$)|(^|[\s,，。;；]+)因为[:：,，]?\s*)`)

// splitBecause cuts a replan's text into the objective and the reason at the first because.
func splitBecause(s string) (objective, reason string) {
	loc := becauseWord.FindStringIndex(s)
	if loc == nil {
		return strings.TrimSpace(s), ""
	}
	objective = strings.TrimRight(strings.TrimSpace(s[:loc[0]]), ",，;；")
	return objective, strings.TrimSpace(s[loc[1]:])
}
