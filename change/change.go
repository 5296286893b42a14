package change

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"loopx/store"
	"loopx/templates"
)

// Request is a protected change as a person asks for it. Kind is store.ProposalGoalSet (the
// Goal fields that are set), ProposalGoalPause, ProposalGoalResume or ProposalAgentSet (the
// Agent fields of AgentID).
type Request struct {
	GoalID string `json:"goal_id"`
	// Version, when set, is the goal version the caller read: a goal at another version is
	// ErrConflict naming version (compare-and-set for scripts that apply directly).
	Version int64       `json:"version,omitempty"`
	Kind    string      `json:"kind"`
	AgentID string      `json:"agent_id,omitempty"`
	Goal    GoalChange  `json:"goal"`
	Agent   AgentChange `json:"agent"`
	// Reason says why (goal.done, goal.reopen, goal.replan); the goal's trail keeps it.
	Reason string `json:"reason,omitempty"`
	// Replan is a goal.replan's new objective and the todos it cancels or reopens.
	Replan *ReplanChange `json:"replan,omitempty"`
	// Defaults is a defaults.set's change of the machine defaults (GoalID is "").
	Defaults *DefaultsChange `json:"defaults,omitempty"`
}

// GoalChange lists the goal fields to change; nil leaves a field as it is. AddOwners,
// RemoveOwners, AddMembers and RemoveMembers edit the current lists (normalization turns
// them into the full lists).
type GoalChange struct {
	WindowHours   *int      `json:"window_hours,omitempty"`
	AllowedSlots  *int      `json:"allowed_slots,omitempty"`
	HeartbeatSpec *string   `json:"heartbeat_spec,omitempty"`
	HeartbeatTZ   *string   `json:"heartbeat_tz,omitempty"`
	ReportSpec    *string   `json:"report_spec,omitempty"`
	ReportTZ      *string   `json:"report_tz,omitempty"`
	Owners        *[]string `json:"owners,omitempty"`
	Members       *[]string `json:"members,omitempty"`
	AddOwners     []string  `json:"add_owners,omitempty"`
	RemoveOwners  []string  `json:"remove_owners,omitempty"`
	AddMembers    []string  `json:"add_members,omitempty"`
	RemoveMembers []string  `json:"remove_members,omitempty"`
	StallTurns    *int      `json:"stall_turns,omitempty"`
	// Settings with a machine default: a value overrides the default, "default" puts the
	// machine default back.
	BreakerFailures *string `json:"breaker_failures,omitempty"` // failures in a row, 0 (off) to 100, or default
	ProgressCard    *string `json:"progress_card,omitempty"`    // on | off | default
	QuietDigests    *string `json:"quiet_digests,omitempty"`    // on | off | default
	Title           *string `json:"title,omitempty"`
	Objective       *string `json:"objective,omitempty"`
	Lang            *string `json:"lang,omitempty"`
	// ReminderMinutes is the gate reminder ladder ("30,60,120") or "default";
	// ReminderEscalateAfter the reminder from which owners get it by direct message.
	ReminderMinutes       *string `json:"reminder_minutes,omitempty"`
	ReminderEscalateAfter *int    `json:"reminder_escalate_after,omitempty"`
	// Defaults names settings to put back to the machine default (store.Settings).
	Defaults []string `json:"defaults,omitempty"`
	// The contract: scope (globs and words), the capabilities the goal grants, its
	// acceptance criteria. Lists replace the goal's; Add*/Remove* edit them.
	ScopeEditable      *[]string          `json:"scope_editable,omitempty"`
	ScopeProtected     *[]string          `json:"scope_protected,omitempty"`
	ScopeNotes         *string            `json:"scope_notes,omitempty"`
	Capabilities       *[]string          `json:"capabilities,omitempty"`
	AddCapabilities    []string           `json:"add_capabilities,omitempty"`
	RemoveCapabilities []string           `json:"remove_capabilities,omitempty"`
	Criteria           *[]store.Criterion `json:"criteria,omitempty"`
	AddCriteria        []store.Criterion  `json:"add_criteria,omitempty"`
	RemoveCriteria     []string           `json:"remove_criteria,omitempty"`
}

// AgentChange lists the agent settings to change; nil leaves a setting as it is.
type AgentChange struct {
	Runner       *string          `json:"runner,omitempty"`
	RunnerConfig *json.RawMessage `json:"runner_config,omitempty"`
	WorkMode     *string          `json:"work_mode,omitempty"`
	IsDefault    *bool            `json:"is_default,omitempty"`
	// Capabilities granted to the agent (each one the goal grants); Grant/Revoke edit them.
	Capabilities *[]string `json:"capabilities,omitempty"`
	Grant        []string  `json:"grant,omitempty"`
	Revoke       []string  `json:"revoke,omitempty"`
}

// Result is the answer to a confirmation: the proposal in its new state, the goal after the
// change (applied) and, when the proposal went stale, the fresh proposal that replaces it.
type Result struct {
	Proposal store.Proposal `json:"proposal"`
	Goal     *store.Goal    `json:"goal,omitempty"`
	// Defaults are the machine defaults after an applied defaults.set.
	Defaults *store.MachineDefaults `json:"defaults,omitempty"`
	Fresh    *store.Proposal        `json:"fresh,omitempty"`
	// Unchanged: the proposal was already settled (a second click); nothing happened.
	Unchanged bool `json:"unchanged,omitempty"`
}

// CardsFunc renders the card updates of a settled proposal's chat cards inside the
// transaction that settled it (db is its executor). router.ProposalCards provides it.
type CardsFunc func(ctx context.Context, db store.DB, p store.Proposal) ([]store.OutboxInsert, error)

// AnnounceFunc posts a proposal's preview cards where its goal is discussed, inside the
// transaction that made it (db is its executor). cards.ProposalCards.Announce provides it.
type AnnounceFunc func(ctx context.Context, db store.DB, p store.Proposal) error

// Options configures a Kernel.
type Options struct {
	// Templates words effects (Words). Required.
	Templates *templates.Set
	// Cards, when set, updates a proposal's chat cards when it settles on any surface.
	Cards CardsFunc
	// Announce, when set, posts the cards of a proposal LoopX makes itself (the proposal
	// to finish a goal whose work is complete) to the goal's chats, inside its transaction.
	Announce AnnounceFunc
	// GateNotice renders the card updates of gates a finished goal cancels.
	GateNotice store.NoticeFunc
}

// Kernel proposes, confirms and cancels protected changes. It is safe for concurrent use.
type Kernel struct {
	st   *store.Store
	opts Options
}

// New returns the kernel over st.
func New(st *store.Store, opts Options) (*Kernel, error) {
	if st == nil || opts.Templates == nil {
		return nil, errors.New("new change kernel: store and templates are required")
	}
	return &Kernel{st: st, opts: opts}, nil
}

// In returns a Kernel whose operations join tx (see store.Store.In).
func (k *Kernel) In(tx *store.Tx) *Kernel { return &Kernel{st: k.st.In(tx), opts: k.opts} }

// WithCards returns a Kernel that updates proposal cards with cards, announces the proposals
// it makes itself with announce, and renders the card updates of gates a finished goal
// cancels with gates (wiring sets them once the renderers exist).
func (k *Kernel) WithCards(cards CardsFunc, announce AnnounceFunc, gates store.NoticeFunc) *Kernel {
	o := k.opts
	o.Cards, o.Announce, o.GateNotice = cards, announce, gates
	return &Kernel{st: k.st, opts: o}
}

// Propose computes and stores a proposal of req by who. who must be allowed to make the
// change (else ErrForbidden, audited); a request that changes nothing or breaks a rule is
// ErrInvalid naming the field.
func (k *Kernel) Propose(ctx context.Context, who store.Person, m store.Meta, req Request) (store.Proposal, error) {
	if err := checkRequest(req); err != nil {
		return store.Proposal{}, err
	}
	return store.Do(ctx, k.st, "proposal.create", m, req, func(tx *store.Tx, now time.Time) (store.Proposal, store.Audit, error) {
		p, err := k.propose(ctx, tx, who, m, req, now)
		if err != nil {
			return store.Proposal{}, store.Audit{}, err
		}
		return p, store.Audit{GoalID: p.GoalID, Target: target(p.ID), Detail: detail(map[string]any{
			"proposal_id": p.ID, "kind": p.Kind, "diff": p.Diff, "goal_version": p.GoalVersion,
		})}, nil
	})
}

func (k *Kernel) propose(ctx context.Context, tx *store.Tx, who store.Person, m store.Meta, req Request, now time.Time) (store.Proposal, error) {
	if req.Kind == store.ProposalDefaultsSet {
		return k.proposeDefaults(ctx, tx, who, m, req, now)
	}
	g, err := store.GetGoalAs(ctx, tx, req.GoalID, who)
	if err != nil {
		return store.Proposal{}, err
	}
	need := needOf(req)
	if !g.Role.AtLeast(need) {
		return store.Proposal{}, refusal(req.GoalID, 0, need, g.Role, "propose")
	}
	if req.Version != 0 && req.Version != g.Version {
		return store.Proposal{}, store.Errorf(store.ErrConflict, "version",
			"goal %q is at version %d, not %d; read it again and retry", g.ID, g.Version, req.Version)
	}
	c, err := compute(ctx, tx, g.Goal, req, now)
	if err != nil {
		return store.Proposal{}, err
	}
	params, err := json.Marshal(c.req)
	if err != nil {
		return store.Proposal{}, fmt.Errorf("encode proposal parameters: %w", err)
	}
	var superseded *store.Proposal
	if req.Kind == store.ProposalGoalDone {
		// One proposal to finish a goal waits at a time: a new one (with its reason) takes the
		// place of the one waiting, which goes stale and names its successor.
		old, found, err := store.ReadyDoneProposal(ctx, tx, g.ID)
		if err != nil {
			return store.Proposal{}, err
		}
		if found {
			if old, err = store.SettleProposal(ctx, tx, store.SettleProposalParams{ID: old.ID, State: store.ProposalStale,
				DecidedBy: m.Actor, Reason: "a newer proposal to finish the goal replaces it", Now: now}); err != nil {
				return store.Proposal{}, err
			}
			superseded = &old
		}
	}
	p, err := store.InsertProposal(ctx, tx, store.ProposalInsert{
		GoalID: req.GoalID, AgentID: req.AgentID, Kind: req.Kind, Params: params, Diff: c.diff,
		Effects: c.effects, GoalVersion: g.Version, Need: need, ProposedBy: m.Actor, Surface: m.Surface, Now: now,
	})
	if err != nil || superseded == nil {
		return p, err
	}
	old, err := store.SetProposalSuccessor(ctx, tx, superseded.ID, p.ID)
	if err != nil {
		return store.Proposal{}, err
	}
	return p, k.cards(ctx, tx, old)
}

type confirmReq struct {
	ProposalID int64 `json:"proposal_id"`
}

// Confirm applies proposal id on behalf of who, when who may make the change and the goal is
// still at the proposal's version. Otherwise: a goal that moved on makes the proposal stale
// (Result.Fresh is the same change computed anew); an expired one is marked expired; one the
// kernel cannot apply (a done goal, a removed agent) is refused with the reason. A proposal
// already settled is returned Unchanged. A person not allowed is ErrForbidden (audited) and the
// proposal stays ready.
func (k *Kernel) Confirm(ctx context.Context, who store.Person, m store.Meta, id int64) (Result, error) {
	return store.Do(ctx, k.st, "proposal.confirm", m, confirmReq{id}, func(tx *store.Tx, now time.Time) (Result, store.Audit, error) {
		p, ready, err := lockReady(ctx, tx, id, who, "confirm")
		if err != nil {
			return Result{}, store.Audit{}, err
		}
		if !ready {
			return Result{Proposal: p, Unchanged: true}, store.NoAudit(), nil
		}
		res, err := k.settle(ctx, tx, p, m, now)
		if err != nil {
			return Result{}, store.Audit{}, err
		}
		if err := k.cards(ctx, tx, res.Proposal); err != nil {
			return Result{}, store.Audit{}, err
		}
		return res, receiptAudit(res), nil
	})
}

// settle decides a ready proposal confirmed by m.Actor: expired, stale (with a fresh one),
// refused or applied.
func (k *Kernel) settle(ctx context.Context, tx *store.Tx, p store.Proposal, m store.Meta, now time.Time) (Result, error) {
	end := func(state, reason string, successor, version int64) (store.Proposal, error) {
		return store.SettleProposal(ctx, tx, store.SettleProposalParams{
			ID: p.ID, State: state, DecidedBy: m.Actor, Reason: reason, SuccessorID: successor,
			AppliedVersion: version, Now: now,
		})
	}
	if !now.Before(p.ExpiresAt) {
		out, err := end(store.ProposalExpired, "the proposal expired before it was confirmed", 0, 0)
		return Result{Proposal: out}, err
	}
	var req Request
	if err := json.Unmarshal(p.Params, &req); err != nil {
		return Result{}, fmt.Errorf("decode proposal parameters: %w", err)
	}
	if req.Kind == store.ProposalDefaultsSet {
		return k.settleDefaults(ctx, tx, p, req, m, now, end)
	}
	g, err := store.LockGoal(ctx, tx, p.GoalID)
	if err != nil {
		return Result{}, err
	}
	if g.Version != p.GoalVersion {
		fresh, err := k.recompute(ctx, tx, g, req, p, m, now)
		if err != nil {
			return Result{}, err
		}
		reason := fmt.Sprintf("goal %s changed (version %d, not %d) after the proposal was made", g.ID, g.Version, p.GoalVersion)
		var succ int64
		if fresh != nil {
			succ = fresh.ID
		}
		out, err := end(store.ProposalStale, reason, succ, 0)
		return Result{Proposal: out, Fresh: fresh}, err
	}
	if req.Kind == store.ProposalAgentSet || req.Kind == store.ProposalGoalDone || req.Kind == store.ProposalGoalReplan {
		// What these read changes without the goal's version moving (an agent's settings, the
		// goal's todos, gates and evidence): the proposal is current only while it still reads
		// the same.
		c, err := compute(ctx, tx, g, req, now)
		var se *store.Error
		if err != nil && !errors.As(err, &se) {
			return Result{}, err
		}
		if err != nil || !slices.Equal(c.diff, p.Diff) || !sameEffects(c.effects, p.Effects) {
			fresh, err := k.recompute(ctx, tx, g, req, p, m, now)
			if err != nil {
				return Result{}, err
			}
			var succ int64
			if fresh != nil {
				succ = fresh.ID
			}
			why := "goal " + g.ID + "'s todos, gates or evidence changed after the proposal was made"
			if req.Kind == store.ProposalAgentSet {
				why = "agent " + req.AgentID + " changed after the proposal was made"
			}
			out, err := end(store.ProposalStale, why, succ, 0)
			return Result{Proposal: out, Fresh: fresh}, err
		}
	}
	after, err := k.apply(ctx, tx, g, req, p, m, now)
	var se *store.Error
	if errors.As(err, &se) {
		out, err := end(store.ProposalRefused, se.Error(), 0, 0)
		return Result{Proposal: out}, err
	}
	if err != nil {
		return Result{}, err
	}
	out, err := end(store.ProposalApplied, "", 0, after.Version)
	return Result{Proposal: out, Goal: &after}, err
}

// recompute makes the fresh proposal a stale one's answer carries: the same request
// computed against the goal as it is now, proposed by the person who tried to confirm.
// When the change now changes nothing or no longer validates, there is none (nil).
func (k *Kernel) recompute(ctx context.Context, tx *store.Tx, g store.Goal, req Request, old store.Proposal, m store.Meta, now time.Time) (*store.Proposal, error) {
	c, err := compute(ctx, tx, g, req, now)
	var se *store.Error
	if errors.As(err, &se) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(c.req)
	if err != nil {
		return nil, fmt.Errorf("encode proposal parameters: %w", err)
	}
	fresh, err := store.InsertProposal(ctx, tx, store.ProposalInsert{
		GoalID: g.ID, AgentID: req.AgentID, Kind: req.Kind, Params: params, Diff: c.diff, Effects: c.effects,
		GoalVersion: g.Version, Need: old.Need, ProposedBy: m.Actor, Surface: m.Surface, Now: now,
	})
	if err != nil {
		return nil, err
	}
	return &fresh, nil
}

// lockReady locks proposal id for who to settle. ready is false for a proposal already
// settled (returned as it is); a person who may not make the change is refused (audited),
// verb naming what they tried.
func lockReady(ctx context.Context, tx *store.Tx, id int64, who store.Person, verb string) (p store.Proposal, ready bool, err error) {
	p, err = store.LockProposal(ctx, tx, id)
	if err != nil || p.State != store.ProposalReady {
		return p, false, err
	}
	role := store.RoleStranger
	if who.Admin {
		role = store.RoleAdmin
	}
	if p.GoalID != "" {
		if role, err = roleOn(ctx, tx, p.GoalID, who); err != nil {
			return p, false, err
		}
	}
	if !role.AtLeast(p.Need) {
		return p, false, refusal(p.GoalID, p.ID, p.Need, role, verb)
	}
	return p, true, nil
}

// Cancel withdraws a ready proposal. Anyone who may make the change may cancel it; a
// proposal already settled is returned Unchanged.
func (k *Kernel) Cancel(ctx context.Context, who store.Person, m store.Meta, id int64) (Result, error) {
	return store.Do(ctx, k.st, "proposal.cancel", m, confirmReq{id}, func(tx *store.Tx, now time.Time) (Result, store.Audit, error) {
		p, ready, err := lockReady(ctx, tx, id, who, "cancel")
		if err != nil {
			return Result{}, store.Audit{}, err
		}
		if !ready {
			return Result{Proposal: p, Unchanged: true}, store.NoAudit(), nil
		}
		state, reason := store.ProposalCancelled, ""
		if !now.Before(p.ExpiresAt) {
			state, reason = store.ProposalExpired, "the proposal expired before it was confirmed"
		}
		out, err := store.SettleProposal(ctx, tx, store.SettleProposalParams{
			ID: p.ID, State: state, DecidedBy: m.Actor, Reason: reason, Now: now,
		})
		if err != nil {
			return Result{}, store.Audit{}, err
		}
		if err := k.cards(ctx, tx, out); err != nil {
			return Result{}, store.Audit{}, err
		}
		return Result{Proposal: out}, receiptAudit(Result{Proposal: out}), nil
	})
}

// Apply proposes and confirms req at once, for scripts holding the admin token: the same
// proposal record, diff and receipt as a confirmed proposal, proposer and confirmer alike.
func (k *Kernel) Apply(ctx context.Context, who store.Person, m store.Meta, req Request) (Result, error) {
	if err := checkRequest(req); err != nil {
		return Result{}, err
	}
	return store.Do(ctx, k.st, "proposal.apply", m, req, func(tx *store.Tx, now time.Time) (Result, store.Audit, error) {
		p, err := k.propose(ctx, tx, who, m, req, now)
		if err != nil {
			return Result{}, store.Audit{}, err
		}
		res, err := k.settle(ctx, tx, p, m, now)
		if err != nil {
			return Result{}, store.Audit{}, err
		}
		if res.Proposal.State == store.ProposalRefused {
			return Result{}, store.Audit{}, store.Errorf(store.ErrRefused, "", "%s", res.Proposal.Reason)
		}
		return res, receiptAudit(res), nil
	})
}

// Get reads one proposal for who: ErrNotFound when it does not exist or who may not see its
// goal (a stranger learns nothing).
func Get(ctx context.Context, db store.DB, who store.Person, id int64) (store.Proposal, store.GoalAs, error) {
	p, err := store.GetProposal(ctx, db, id)
	if err != nil {
		return store.Proposal{}, store.GoalAs{}, err
	}
	if p.GoalID == "" {
		if !who.Admin {
			return store.Proposal{}, store.GoalAs{}, store.Errorf(store.ErrNotFound, "proposal_id", "no proposal p%d", id)
		}
		return p, store.GoalAs{Role: store.RoleAdmin}, nil
	}
	g, err := store.GetGoalAs(ctx, db, p.GoalID, who)
	if err != nil {
		return store.Proposal{}, store.GoalAs{}, err
	}
	if !g.Role.AtLeast(store.RoleMember) {
		return store.Proposal{}, store.GoalAs{}, store.Errorf(store.ErrNotFound, "proposal_id", "no proposal p%d", id)
	}
	return p, g, nil
}

func (k *Kernel) cards(ctx context.Context, tx *store.Tx, p store.Proposal) error {
	if k.opts.Cards == nil {
		return nil
	}
	rows, err := k.opts.Cards(ctx, tx, p)
	if err != nil {
		return fmt.Errorf("render proposal cards: %w", err)
	}
	_, err = store.InsertOutboxAll(ctx, tx, rows)
	return err
}

func roleOn(ctx context.Context, db store.DB, goalID string, who store.Person) (store.Role, error) {
	g, err := store.GetGoalAs(ctx, db, goalID, who)
	if err != nil {
		return "", err
	}
	return g.Role, nil
}

// needOf is the role a change needs: an agent's runner decides what runs on the server, so
// only admins may change it; everything else is the owners'.
func needOf(req Request) store.Role {
	if req.Kind == store.ProposalDefaultsSet {
		return store.RoleAdmin
	}
	if req.Kind == store.ProposalAgentSet && (req.Agent.Runner != nil || req.Agent.RunnerConfig != nil) {
		return store.RoleAdmin
	}
	return store.RoleOwner
}

// refusal is the answer to someone without the role a change needs: ErrForbidden, audited
// (outcome refused, as the store audits every refusal an operation decides).
func refusal(goalID string, id int64, need, role store.Role, what string) error {
	word := "owners"
	if need == store.RoleAdmin {
		word = "admins"
	}
	msg := fmt.Sprintf("only %s of goal %s may %s this change", word, goalID, what)
	if goalID == "" {
		msg = fmt.Sprintf("only admins may %s a change of the machine defaults", what)
	}
	return store.Refuse(store.ErrForbidden, "", msg, goalID, target(id), map[string]any{
		"reason": "not " + string(need), "role": string(role), "proposal_id": id,
	})
}

func target(id int64) string {
	if id == 0 {
		return ""
	}
	return store.ProposalTarget(id)
}

// receiptAudit is the audit row of a settled proposal: who proposed, who decided, when, and
// the diff that was applied.
func receiptAudit(r Result) store.Audit {
	p := r.Proposal
	d := map[string]any{
		"proposal_id": p.ID, "kind": p.Kind, "state": p.State, "proposed_by": p.ProposedBy,
		"decided_by": p.DecidedBy, "goal_version": p.GoalVersion,
	}
	// The diff is in every receipt; "applied" says whether it took effect.
	d["diff"] = p.Diff
	d["applied"] = p.State == store.ProposalApplied
	if p.State == store.ProposalApplied {
		d["confirmed_by"] = p.DecidedBy
		d["applied_version"] = p.AppliedVersion
	}
	if p.Reason != "" {
		d["reason"] = p.Reason
	}
	if r.Fresh != nil {
		d["fresh_proposal_id"] = r.Fresh.ID
	}
	return store.Audit{GoalID: p.GoalID, Target: target(p.ID), Detail: detail(d)}
}

// sameEffects compares computed effects with stored ones, leaving out the note LoopX adds to
// a proposal it makes itself.
func sameEffects(a, b []store.Effect) bool {
	strip := func(v []store.Effect) []store.Effect {
		return slices.DeleteFunc(slices.Clone(v), func(e store.Effect) bool { return e.Code == "done_complete" })
	}
	a, b = strip(a), strip(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Code != b[i].Code || !maps.Equal(a[i].Args, b[i].Args) {
			return false
		}
	}
	return true
}

func detail(m map[string]any) json.RawMessage {
	b, _ := json.Marshal(m) // maps of strings, numbers and diffs always encode
	return b
}

// checkRequest refuses a request whose shape is wrong before anything is read.
func checkRequest(req Request) error {
	if req.Kind == store.ProposalDefaultsSet {
		if req.GoalID != "" || req.AgentID != "" || !isEmptyGoal(req.Goal) || !isEmptyAgent(req.Agent) || req.Replan != nil {
			return store.Errorf(store.ErrInvalid, "kind", "a change of the machine defaults belongs to no goal and takes only defaults")
		}
		if req.Defaults == nil || *req.Defaults == (DefaultsChange{}) {
			return store.Errorf(store.ErrInvalid, "defaults", "name at least one machine default to change")
		}
		return nil
	}
	if !store.ValidID(req.GoalID) {
		return store.Errorf(store.ErrInvalid, "goal_id", "%q is not a goal id", req.GoalID)
	}
	empty := isEmptyGoal(req.Goal)
	noAgent := isEmptyAgent(req.Agent)
	if req.Defaults != nil {
		return store.Errorf(store.ErrInvalid, "defaults", "machine defaults are changed by a defaults.set change of their own")
	}
	if req.Replan != nil && req.Kind != store.ProposalGoalReplan {
		return store.Errorf(store.ErrInvalid, "replan", "only a goal.replan change takes a new objective this way")
	}
	if err := store.CheckReason(req.Reason); err != nil {
		return err
	}
	switch req.Kind {
	case store.ProposalGoalSet:
		if empty {
			return store.Errorf(store.ErrInvalid, "goal", "name at least one setting to change")
		}
		if !noAgent || req.AgentID != "" {
			return store.Errorf(store.ErrInvalid, "agent", "a goal change takes no agent settings")
		}
	case store.ProposalGoalPause, store.ProposalGoalResume, store.ProposalGoalDone, store.ProposalGoalReopen:
		if !empty || !noAgent || req.AgentID != "" {
			return store.Errorf(store.ErrInvalid, "kind", "%s takes no settings", req.Kind)
		}
	case store.ProposalGoalReplan:
		if !empty || !noAgent || req.AgentID != "" {
			return store.Errorf(store.ErrInvalid, "kind", "a replan takes a new objective, a reason and the todos it affects, no settings")
		}
		if req.Replan == nil || strings.TrimSpace(req.Replan.Objective) == "" {
			return store.Errorf(store.ErrInvalid, "objective", "say the new objective")
		}
	case store.ProposalAgentSet:
		if !store.ValidID(req.AgentID) {
			return store.Errorf(store.ErrInvalid, "agent_id", "%q is not an agent id", req.AgentID)
		}
		if noAgent {
			return store.Errorf(store.ErrInvalid, "agent", "name at least one agent setting to change")
		}
		if !empty {
			return store.Errorf(store.ErrInvalid, "goal", "an agent change takes no goal settings")
		}
	default:
		return store.Errorf(store.ErrInvalid, "kind", "%q is not one of goal.set, goal.pause, goal.resume, goal.done, goal.reopen, goal.replan, agent.set, defaults.set", req.Kind)
	}
	return nil
}

func isEmptyAgent(c AgentChange) bool {
	return c.Runner == nil && c.RunnerConfig == nil && c.WorkMode == nil && c.IsDefault == nil &&
		c.Capabilities == nil && len(c.Grant) == 0 && len(c.Revoke) == 0
}

func isEmptyGoal(c GoalChange) bool {
	return c.WindowHours == nil && c.AllowedSlots == nil && c.HeartbeatSpec == nil && c.HeartbeatTZ == nil &&
		c.ReportSpec == nil && c.ReportTZ == nil && c.Owners == nil && c.Members == nil &&
		len(c.AddOwners) == 0 && len(c.RemoveOwners) == 0 && len(c.AddMembers) == 0 &&
		len(c.RemoveMembers) == 0 && c.StallTurns == nil && c.Title == nil && c.Objective == nil && c.Lang == nil &&
		c.BreakerFailures == nil && c.ProgressCard == nil && c.QuietDigests == nil &&
		c.ReminderMinutes == nil && c.ReminderEscalateAfter == nil && len(c.Defaults) == 0 &&
		c.ScopeEditable == nil && c.ScopeProtected == nil && c.ScopeNotes == nil && c.Capabilities == nil &&
		len(c.AddCapabilities) == 0 && len(c.RemoveCapabilities) == 0 && c.Criteria == nil &&
		len(c.AddCriteria) == 0 && len(c.RemoveCriteria) == 0
}

// editList applies a full replacement, then additions and removals, keeping order and
// dropping repeats.
func editList(cur []string, set *[]string, add, remove []string) []string {
	out := slices.Clone(cur)
	if set != nil {
		out = slices.Clone(*set)
	}
	for _, a := range add {
		out = append(out, strings.TrimSpace(a))
	}
	var kept []string
	for _, v := range out {
		if v == "" || slices.Contains(kept, v) || slices.Contains(remove, v) {
			continue
		}
		kept = append(kept, v)
	}
	if kept == nil {
		kept = []string{}
	}
	return kept
}
