package router

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"loopx/store"
	"loopx/templates"
)

// Address is an explicit address token: #goal, #goal/agent or #goal/agent/session.
type Address struct {
	Goal    string
	Agent   string
	Session string
}

// String renders the token without the leading #.
func (a Address) String() string {
	s := a.Goal
	if a.Agent != "" {
		s += "/" + a.Agent
	}
	if a.Session != "" {
		s += "/" + a.Session
	}
	return s
}

// Parsed is what a chat text means. Command "" is a message for an agent.
type Parsed struct {
	Command string   // a name from the command table, or "" for a message
	Mode    string   // message: inbox | queue | steer
	Addr    *Address // the explicit address token, nil when there is none
	Text    string   // message body, todo text, or approve/reject comment
	GateID  int64    // approve / reject
	Slots   int      // budget
	Window  int      // budget window in hours; 0 = unchanged
	Count   int      // runs: how many turns to list; 0 = the default
	Lang    string   // lang
	Which   string   // schedule: heartbeat | report
	Spec    string   // schedule: the cron spec; "" = off
	Zone    string   // schedule: the IANA zone; "" = unchanged
	Op      string   // owners, members: add | remove | set
	People  []string // owners, members: @-mentions or open_ids, as typed
	Stall   int      // stall: turns without progress; 0 = off
	Setting string   // breaker: a number, off or default; progress, quiet: on, off or default
	// The goal contract (contract.go): scope, capability, criteria, done, reopen, replan,
	// waive, handoff.
	Part     string            // scope: editable | protected | notes
	Items    []string          // scope: paths; capability: names; criteria remove: ids
	Criteria []store.Criterion // criteria add: one per line
	Reason   string            // done, reopen, replan (after "because"), waive
	TodoID   int64             // waive (todo N), handoff
	To       string            // handoff: the agent that receives the todo
	Kind     string            // handoff: resume | review | verify
	Cancel   []int64           // replan: todos to cancel
	Reopen   []int64           // replan: todos to reopen
}

// ParseError is a text that means nothing. Code names the word that says why in the chat's
// language (parse.<code> in templates' word lists, formatted with Args); Form, when set, names
// the right form to show (the word usage.<form>: a command's name, or message, queue or
// steer). Problem says the same in English, for logs and tests: people read the words.
type ParseError struct {
	Problem string
	Code    string
	Args    []any
	Form    string
}

func (e *ParseError) Error() string {
	if e.Form == "" {
		return e.Problem
	}
	return e.Problem + " (form: " + e.Form + ")"
}

// parseError is a ParseError with its code, its English problem and the form to show.
func parseError(form, code, format string, args ...any) *ParseError {
	return &ParseError{Problem: fmt.Sprintf(format, args...), Code: code, Args: args, Form: form}
}

// role a sender needs for a command; see authorize.
type need int

const (
	needAnyone need = iota
	needMember
	needOwner
	needChat // /lang: a chat setting; see langAllowed
)

// argKind says how a command's arguments parse.
type argKind int

const (
	argsNone       argKind = iota
	argsGoalOpt            // [#goal]
	argsGoalReq            // #goal[/agent] (bind)
	argsBudget             // [#goal] <slots> [<window-hours>]
	argsTodo               // [#goal] <text>
	argsGate               // <gate> [comment]
	argsLang               // en|zh
	argsRuns               // [#goal] [n]
	argsSchedule           // [#goal] heartbeat|report <spec>|off [zone]
	argsPeople             // [#goal] add|remove|set <people>
	argsStall              // [#goal] <turns>|off
	argsAgentOpt           // [#goal[/agent]] (stop, run, pause, resume)
	argsBreaker            // [#goal] <failures>|off|default
	argsSwitch             // [#goal] on|off|default
	argsScope              // [#goal] editable|protected [add|remove] <path…>|all|none, notes <text>|none
	argsCapability         // [#goal[/agent]] grant|revoke <name…>
	argsCriteria           // [#goal] add [id:] <text> (one a line) | remove <id…>
	argsReason             // [#goal] [reason] (done, reopen)
	argsReplan             // [#goal] <objective> [because <reason>] [cancel <todo…>] [reopen <todo…>]
	argsWaive              // [#goal] [todo <n>] <criterion> <reason>
	argsHandoff            // [#goal] [todo] <n> [to] <agent> [as resume|review|verify] <note>
)

// command is one row of the table that routes commands and generates /help (each command's
// form is the word usage.<name> in templates' word lists, its summary help.<name>).
type command struct {
	name   string
	need   need
	args   argKind
	action string // the audit action and, in refusals, what the sender tried to do
}

// commandTable is the single command table: Parse accepts exactly these names, the router
// dispatches on them, and /help lists them in this order.
func commandTable() []command {
	return []command{
		{"help", needAnyone, argsNone, "chat.help"},
		{"goals", needAnyone, argsNone, "chat.goals"},
		{"status", needMember, argsGoalOpt, "chat.status"},
		{"contract", needMember, argsGoalOpt, "chat.contract"},
		{"gates", needMember, argsGoalOpt, "chat.gates"},
		{"report", needMember, argsGoalOpt, "chat.report"},
		{"runs", needMember, argsRuns, "chat.runs"},
		{"bind", needOwner, argsGoalReq, "chat.bind"},
		{"unbind", needOwner, argsGoalOpt, "chat.unbind"},
		{"pause", needOwner, argsAgentOpt, "chat.pause"},
		{"resume", needOwner, argsAgentOpt, "chat.resume"},
		{"stop", needOwner, argsAgentOpt, "chat.stop"},
		{"run", needOwner, argsAgentOpt, "chat.run"},
		{"budget", needOwner, argsBudget, "chat.budget"},
		{"todo", needMember, argsTodo, "chat.todo"},
		{"approve", needOwner, argsGate, "chat.approve"},
		{"reject", needOwner, argsGate, "chat.reject"},
		{"lang", needChat, argsLang, "chat.lang"},
		{"schedule", needOwner, argsSchedule, "chat.schedule"},
		{"owners", needOwner, argsPeople, "chat.owners"},
		{"members", needOwner, argsPeople, "chat.members"},
		{"stall", needOwner, argsStall, "chat.stall"},
		{"breaker", needOwner, argsBreaker, "chat.breaker"},
		{"progress", needOwner, argsSwitch, "chat.progress"},
		{"quiet", needOwner, argsSwitch, "chat.quiet"},
		{"scope", needOwner, argsScope, "chat.scope"},
		{"capability", needOwner, argsCapability, "chat.capability"},
		{"criteria", needOwner, argsCriteria, "chat.criteria"},
		{"done", needOwner, argsReason, "chat.done"},
		{"reopen", needOwner, argsReason, "chat.reopen"},
		{"replan", needOwner, argsReplan, "chat.replan"},
		{"waive", needOwner, argsWaive, "chat.waive"},
		{"handoff", needOwner, argsHandoff, "chat.handoff"},
		{"web", needAnyone, argsNone, "chat.web"},
	}
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commandTable() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

const (
	formMessage = "message" // the form of a message for an agent (usage.message)
	maxSlots    = 100000
	maxRuns     = 30 // turns /runs lists at most
)

// gateNumber reads a gate id as people type it: g12, G12, #g12 or 12 (1 to 18 digits).
func gateNumber(tok string) (string, bool) {
	tok = strings.TrimPrefix(tok, "#")
	if tok != "" && (tok[0] == 'g' || tok[0] == 'G') {
		tok = tok[1:]
	}
	if tok == "" || len(tok) > 18 {
		return "", false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return "", false
		}
	}
	return tok, true
}

// normalize maps the full-width forms Chinese input methods type (／ ＃ and the ideographic
// space) to ASCII, so "／status ＃docs" works like "/status #docs".
func normalize(s string) string {
	// Most texts hold none of the full-width forms: building the replacer costs more than
	// the rest of parsing, so it is built only for a text that needs it.
	if strings.ContainsAny(s, "／＃\u3000") {
		s = strings.NewReplacer("／", "/", "＃", "#", "\u3000", " ").Replace(s)
	}
	return strings.TrimSpace(s)
}

// Parse reads one chat text (bot mention already removed). Every text becomes a command, a
// message for an agent, or a *ParseError saying what is wrong. Empty text asks for /help.
func Parse(text string) (Parsed, error) {
	if !utf8.ValidString(text) {
		return Parsed{}, parseError("", "not_text", "the message is not valid UTF-8 text")
	}
	s := normalize(text)
	if s == "" {
		return Parsed{Command: "help"}, nil
	}
	// A message may name its address first and its mode second, or the other way round.
	var addr *Address
	if strings.HasPrefix(s, "#") {
		tok, rest := cut(s)
		a, err := parseAddress(tok, 3)
		if err != nil {
			return Parsed{}, err
		}
		addr, s = &a, rest
	}
	if strings.HasPrefix(s, "/") {
		tok, rest := cut(s)
		name := strings.ToLower(strings.TrimPrefix(tok, "/"))
		if name == "queue" || name == "steer" {
			return parseMessage(name, addr, rest)
		}
		if addr != nil {
			return Parsed{}, parseError(formOf(name), "command_first", "put the command first: /%s #%s", clip(name, 40), addr.String())
		}
		cmd, ok := lookupCommand(name)
		if !ok {
			return Parsed{}, parseError("", "unknown_command", "unknown command /%s; /help lists the commands", clip(name, 40))
		}
		return parseArgs(cmd, rest)
	}
	return parseMessage("inbox", addr, s)
}

// formOf is the form to show for the command name: its own, else a message's.
func formOf(name string) string {
	if _, ok := lookupCommand(name); ok {
		return name
	}
	return formMessage
}

func parseMessage(mode string, addr *Address, rest string) (Parsed, error) {
	if addr == nil && strings.HasPrefix(rest, "#") {
		tok, r := cut(rest)
		a, err := parseAddress(tok, 3)
		if err != nil {
			return Parsed{}, err
		}
		addr, rest = &a, r
	}
	if rest == "" {
		form := formMessage
		if mode != "inbox" {
			form = mode
		}
		return Parsed{}, parseError(form, "no_text", "there is no text to deliver")
	}
	return Parsed{Mode: mode, Addr: addr, Text: rest}, nil
}

func parseArgs(cmd command, rest string) (Parsed, error) {
	p := Parsed{Command: cmd.name}
	bad := func(code, format string, args ...any) (Parsed, error) {
		return Parsed{}, parseError(cmd.name, code, format, args...)
	}
	// Commands about a goal take its token first; it may be left out where a binding decides.
	if cmd.args != argsNone && cmd.args != argsGate && cmd.args != argsLang && strings.HasPrefix(rest, "#") {
		tok, r := cut(rest)
		depth := 1
		if cmd.args == argsGoalReq || cmd.args == argsAgentOpt || cmd.args == argsCapability {
			depth = 2
		}
		a, err := parseAddress(tok, depth)
		if err != nil {
			var pe *ParseError
			if errors.As(err, &pe) {
				pe.Form = cmd.name
			}
			return Parsed{}, err
		}
		p.Addr, rest = &a, r
	}
	switch cmd.args {
	case argsNone:
		if rest != "" {
			return bad("no_args", "/%s takes no arguments", cmd.name)
		}
	case argsGoalOpt, argsAgentOpt:
		if rest != "" {
			return bad("unexpected", "unexpected %q after /%s", clip(rest, 40), cmd.name)
		}
	case argsBreaker:
		v := strings.ToLower(strings.TrimSpace(rest))
		if v == "off" || v == "default" {
			p.Setting = v
			break
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return bad("breaker_value", "failures must be a whole number from 1 to 100, off or default, got %q", clip(rest, 20))
		}
		p.Setting = strconv.Itoa(n)
	case argsSwitch:
		v := strings.ToLower(strings.TrimSpace(rest))
		if v != "on" && v != "off" && v != "default" {
			return bad("switch_value", "/%s takes on, off or default, got %q", cmd.name, clip(rest, 20))
		}
		p.Setting = v
	case argsGoalReq:
		if p.Addr == nil {
			return bad("bind_goal", "/%s needs the goal to bind, e.g. /bind #my-goal", cmd.name)
		}
		if rest != "" {
			return bad("unexpected_after", "unexpected %q after /%s #%s", clip(rest, 40), cmd.name, p.Addr.String())
		}
	case argsBudget:
		f := strings.Fields(rest)
		if len(f) < 1 || len(f) > 2 {
			return bad("budget_args", "/budget needs the number of turns and optionally the window in hours")
		}
		n, err := strconv.Atoi(f[0])
		if err != nil || n < 0 || n > maxSlots {
			return bad("budget_turns", "the number of turns must be a whole number from 0 to %d, got %q", maxSlots, clip(f[0], 20))
		}
		p.Slots = n
		if len(f) == 2 {
			h, err := strconv.Atoi(strings.TrimSuffix(strings.ToLower(f[1]), "h"))
			if err != nil || h < 1 || h > 720 {
				return bad("budget_window", "the window must be a whole number of hours from 1 to 720, got %q", clip(f[1], 20))
			}
			p.Window = h
		}
	case argsTodo:
		if rest == "" {
			return bad("todo_text", "/todo needs the text of the todo")
		}
		p.Text = rest
	case argsGate:
		tok, r := cut(rest)
		if tok == "" {
			return bad("gate_missing", "/%s needs the gate id, e.g. /%s g12", cmd.name, cmd.name)
		}
		digits, ok := gateNumber(tok)
		if !ok {
			return bad("gate_id", "%q is not a gate id; gate ids look like g12", clip(tok, 20))
		}
		id, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || id <= 0 {
			return bad("gate_id", "%q is not a gate id; gate ids look like g12", clip(tok, 20))
		}
		p.GateID, p.Text = id, r
	case argsRuns:
		if rest == "" {
			break
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > maxRuns {
			return bad("runs_count", "the number of turns must be a whole number from 1 to %d, got %q", maxRuns, clip(rest, 20))
		}
		p.Count = n
	case argsSchedule:
		f := strings.Fields(rest)
		if len(f) < 2 || (f[0] != "heartbeat" && f[0] != "report") {
			return bad("schedule_args", "/schedule needs heartbeat or report, then a cron spec (or off), then optionally a time zone")
		}
		p.Which, f = f[0], f[1:]
		if last := f[len(f)-1]; len(f) > 1 && isZone(last) {
			p.Zone, f = last, f[:len(f)-1]
		} else if len(f) == 1 && isZone(last) && f[0] != "off" {
			return bad("schedule_order", "name the cron spec before the time zone, e.g. /schedule #g heartbeat 30 9 * * 1-5 %s", clip(last, 40))
		}
		if len(f) == 1 && strings.EqualFold(f[0], "off") {
			p.Spec = ""
		} else {
			p.Spec = strings.Join(f, " ")
		}
	case argsPeople:
		f := strings.Fields(rest)
		if len(f) < 2 || (f[0] != "add" && f[0] != "remove" && f[0] != "set") {
			return bad("people_op", "/%s needs add, remove or set, then the people (@-mention them)", cmd.name)
		}
		p.Op, p.People = f[0], f[1:]
	case argsStall:
		v := strings.ToLower(strings.TrimSpace(rest))
		if v == "off" || v == "0" {
			p.Stall = 0
			break
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return bad("stall_turns", "turns must be a whole number from 1 to 100, or off, got %q", clip(rest, 20))
		}
		p.Stall = n
	case argsScope, argsCapability, argsCriteria, argsReason, argsReplan, argsWaive, argsHandoff:
		return parseContract(cmd, p, rest)
	case argsLang:
		l := strings.ToLower(strings.TrimSpace(rest))
		if !templates.IsLang(l) {
			return bad("lang", "the language must be one of %s, got %q", strings.Join(templates.Languages(), "|"), clip(rest, 20))
		}
		p.Lang = l
	}
	return p, nil
}

// parseAddress reads "#goal[/agent[/session]]" allowing at most depth parts.
func parseAddress(tok string, depth int) (Address, error) {
	body := strings.TrimPrefix(tok, "#")
	parts := strings.Split(body, "/")
	if len(parts) > depth {
		// The word names the form allowed here (parse.address_parts_<depth>).
		forms := []string{"#goal", "#goal/agent", "#goal/agent/session"}
		return Address{}, &ParseError{Problem: fmt.Sprintf("%q has too many parts; here the address is %s", clip(tok, 80), forms[depth-1]),
			Code: "address_parts_" + strconv.Itoa(depth), Args: []any{clip(tok, 80)}, Form: formMessage}
	}
	var a Address
	a.Goal = strings.ToLower(parts[0])
	if !store.ValidID(a.Goal) {
		return Address{}, parseError(formMessage, "goal_id", "goal %q is not a goal id (lowercase letters, digits, '.', '_' and '-', starting with a letter or digit)", clip(parts[0], 80))
	}
	if len(parts) > 1 {
		a.Agent = strings.ToLower(parts[1])
		if !store.ValidID(a.Agent) {
			return Address{}, parseError(formMessage, "address_agent", "agent %q is not an agent id (lowercase letters, digits, '.', '_' and '-')", clip(parts[1], 80))
		}
	}
	if len(parts) > 2 {
		a.Session = parts[2]
		if !store.ValidSessionID(a.Session) {
			return Address{}, parseError(formMessage, "session_id", "session %q is not a session id (letters, digits, '.', '_', ':' and '-', at most 128)", clip(parts[2], 80))
		}
	}
	return a, nil
}

// cut splits off the first whitespace-separated token.
func cut(s string) (tok, rest string) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, isSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0xA0 || r == 0x3000
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// isZone tells a time zone token (UTC, Asia/Shanghai) from a cron field (*/5, MON-FRI).
func isZone(tok string) bool {
	if tok == "UTC" || tok == "GMT" {
		return true
	}
	return strings.Contains(tok, "/") && tok[0] >= 'A' && tok[0] <= 'Z'
}
