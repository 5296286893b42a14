package store

import (
	"errors"
	"net/http"
	"slices"
)

// The table of error kinds: the one place that says how each kind of failure is reported on
// every surface. The API answers a kind's Code with its Status; the workspace answers a page
// about it with the same Status; the CLI exits with its Exit code; MCP advises by its Code
// (and Reason). It lives here, on the lowest floor those surfaces share, because api and web
// may not import each other. docs/api.md lists it; a test keeps the two the same.

// API error codes: the "code" member of an API error body, one per kind.
const (
	CodeBadRequest      = "bad_request"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeRefused         = "refused"
	CodeFull            = "full"
	CodeTooLarge        = "too_large"
	CodeInvalid         = "invalid"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
)

// RetryAfterSeconds is what an unavailable answer (503) asks clients and load balancers to
// wait before they try again, in the Retry-After header of the API and of the workspace.
const RetryAfterSeconds = "2"

// Exit codes of the loopx CLI.
const (
	ExitOK          = 0 // done
	ExitRefused     = 1 // refused by the state or not allowed: conflict, refused, full, forbidden
	ExitUsage       = 2 // bad flags or input, an unknown goal or token
	ExitUnreachable = 3 // the server could not be reached or failed
)

// ErrorKind is one row of the table.
type ErrorKind struct {
	Code string // the API's "code"
	// Err is the sentinel operations return (errors.Is); nil for a kind only a surface
	// decides (a malformed request, a missing token, a body over the limit, an unreachable
	// database, a failure of the server).
	Err     error
	Status  int    // the HTTP status of the API's answer and of a workspace page answering it
	Exit    int    // the CLI's exit code
	Meaning string // what it means, as docs/api.md says it
}

var errorKinds = []ErrorKind{
	{CodeBadRequest, nil, http.StatusBadRequest, ExitUsage,
		"malformed request: JSON, unknown field, wrong type, bad id in the path, missing `Idempotency-Key`"},
	{CodeUnauthenticated, nil, http.StatusUnauthorized, ExitUsage,
		"no token or an unknown one"},
	{CodeForbidden, ErrForbidden, http.StatusForbidden, ExitRefused,
		"the caller may not do this, whatever the state: another goal or agent than the token's, an admin-only route, a gate answered by a non-owner or cancelled by an agent that did not ask it, a change by someone without the role it needs; audited"},
	{CodeNotFound, ErrNotFound, http.StatusNotFound, ExitUsage,
		"the goal, agent, todo or gate does not exist"},
	{CodeConflict, ErrConflict, http.StatusConflict, ExitRefused,
		"the state changed under you (stale `version`, todo claimed by another agent, a live turn, key reused)"},
	{CodeRefused, ErrRefused, http.StatusConflict, ExitRefused,
		"the state does not allow it (spend for a turn that did not run, answer to a closed gate)"},
	{CodeFull, ErrFull, http.StatusConflict, ExitRefused,
		"a bound was reached"},
	{CodeTooLarge, nil, http.StatusRequestEntityTooLarge, ExitUsage,
		"body over 256 KiB"},
	{CodeInvalid, ErrInvalid, http.StatusUnprocessableEntity, ExitUsage,
		"a field breaks a rule (id syntax, text over 12,000 characters, cron spec, time zone, negative quota)"},
	{CodeUnavailable, nil, http.StatusServiceUnavailable, ExitUnreachable,
		"the database cannot be reached right now; retry after `Retry-After` seconds with the same `Idempotency-Key`"},
	{CodeInternal, nil, http.StatusInternalServerError, ExitUnreachable,
		"server failure (details in the server log only)"},
}

// ErrorKinds returns the table, in the order docs/api.md lists it.
func ErrorKinds() []ErrorKind { return slices.Clone(errorKinds) }

// KindByCode returns the kind of an API code; false for a code the table does not hold.
func KindByCode(code string) (ErrorKind, bool) {
	i := slices.IndexFunc(errorKinds, func(k ErrorKind) bool { return k.Code == code })
	if i < 0 {
		return ErrorKind{}, false
	}
	return errorKinds[i], true
}

// KindOf returns the kind of an operation's error: unavailable for a database that cannot be
// reached (IsUnavailable; checked first, so a refusal whose audit write lost the database is
// unavailable too), else the kind of its sentinel, else internal.
func KindOf(err error) ErrorKind {
	code := CodeInternal
	if IsUnavailable(err) {
		code = CodeUnavailable
	} else if i := slices.IndexFunc(errorKinds, func(k ErrorKind) bool { return k.Err != nil && errors.Is(err, k.Err) }); i >= 0 {
		return errorKinds[i]
	}
	k, _ := KindByCode(code)
	return k
}

// KindOfAnswer returns the kind of an error answer the API gave: the kind of its code, or,
// for a code this build does not know (a newer server), internal for a 5xx status and
// bad_request for any other.
func KindOfAnswer(code string, status int) ErrorKind {
	if k, ok := KindByCode(code); ok {
		return k
	}
	code = CodeBadRequest
	if status >= 500 {
		code = CodeInternal
	}
	k, _ := KindByCode(code)
	return k
}

// Reasons: which case of a kind an error is, for programs that must tell cases apart
// (Error.Reason, the API's "reason" member). Set where the error is made; callers switch on
// them, never on a message.
const (
	// ReasonTokenScope (forbidden): an agent token used on another goal or as another agent.
	ReasonTokenScope = "token_scope"
	// ReasonClaimed (conflict): the todo is held by another agent.
	ReasonClaimed = "claimed"
	// ReasonGateClosed (refused): the gate is no longer open (answered or cancelled).
	ReasonGateClosed = "gate_closed"
	// ReasonNotOwed (refused): the spend is not owed (the turn was skipped, is unknown,
	// failed or was abandoned, or was opened or settled for another todo).
	ReasonNotOwed = "spend_not_owed"
	// ReasonNotHeld (refused): the agent is not held, so there is nothing to resume.
	ReasonNotHeld = "not_held"
	// ReasonNoLiveTurn (refused): the agent has no live turn to stop or report progress on.
	ReasonNoLiveTurn = "no_live_turn"
	// ReasonTooLarge (invalid): a file is larger than the server's size cap.
	ReasonTooLarge = "file_too_large"
	// ReasonTurnRecorded (refused): the live turn already recorded evidence or its spend, so
	// it stays on its todo.
	ReasonTurnRecorded = "turn_recorded"
	// ReasonMissingCapability (forbidden): the agent lacks a capability the todo requires.
	ReasonMissingCapability = "missing_capability"
	// ReasonCriteriaUnmet (refused): a criterion of the todo has no evidence and no waiver.
	ReasonCriteriaUnmet = "criteria_unmet"
	// ReasonHandoffNote (refused): a todo with evidence changes hands only with a handoff note.
	ReasonHandoffNote = "handoff_note_required"
	// ReasonGoalDone (refused): the goal is done; reopen it first.
	ReasonGoalDone = "goal_done"
)

// ErrorReason is one reason with the kind it refines and what it means.
type ErrorReason struct {
	Reason  string
	Code    string
	Meaning string
}

var errorReasons = []ErrorReason{
	{ReasonTokenScope, CodeForbidden, "the agent token belongs to another goal or agent than the request names"},
	{ReasonClaimed, CodeConflict, "another agent holds the todo (claim with `transfer`, or pick another)"},
	{ReasonGateClosed, CodeRefused, "the gate is no longer open: it was answered or cancelled"},
	{ReasonNotOwed, CodeRefused, "no slot is owed for this turn: it was skipped, is unknown, failed or was abandoned, or is another todo's"},
	{ReasonNotHeld, CodeRefused, "the agent is not held: there is nothing to resume"},
	{ReasonNoLiveTurn, CodeRefused, "the agent has no live turn to stop or to report progress on"},
	{ReasonTooLarge, CodeBadRequest, "the file is larger than the server's size cap (LOOPX_FILE_MAX_BYTES)"},
	{ReasonTurnRecorded, CodeRefused, "the live turn already recorded evidence or its spend: it stays on its todo"},
	{ReasonMissingCapability, CodeForbidden, "the agent lacks a capability the todo requires: an owner grants it, or another agent takes the todo"},
	{ReasonCriteriaUnmet, CodeRefused, "a criterion of the todo has no evidence yet: add evidence naming it, or an owner waives it"},
	{ReasonHandoffNote, CodeRefused, "the todo has evidence: it changes hands only with a handoff note"},
	{ReasonGoalDone, CodeRefused, "the goal is done: an owner reopens it first"},
}

// ErrorReasons returns every reason, in the order docs/api.md lists them.
func ErrorReasons() []ErrorReason { return slices.Clone(errorReasons) }
