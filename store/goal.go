package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Goal statuses.
const (
	GoalActive  = "active"
	GoalStopped = "stopped"
	GoalDone    = "done"
)

// Goal is one long-horizon objective with its owners, quota policy and schedules.
type Goal struct {
	ID            string   `json:"id"`
	Title         string   `json:"title"`
	Objective     string   `json:"objective"`
	Owners        []string `json:"owners"`  // Lark open_ids who may steer and answer gates
	Members       []string `json:"members"` // Lark open_ids who may message agents and read
	Status        string   `json:"status"`  // active | stopped | done
	WindowHours   int      `json:"window_hours"`
	AllowedSlots  int      `json:"allowed_slots"`
	HeartbeatSpec string   `json:"heartbeat_spec"` // robfig/cron standard spec; "" = none
	HeartbeatTZ   string   `json:"heartbeat_tz"`   // IANA zone
	ReportSpec    string   `json:"report_spec"`
	ReportTZ      string   `json:"report_tz"`
	Lang          string   `json:"lang"`        // en | zh
	StallTurns    int      `json:"stall_turns"` // turns in a row without progress before a stall gate; 0 = off
	// Settings with a machine default that live as NULL while the goal follows it: nil takes
	// the default, a value overrides it. See goalsettings.go.
	BreakerFailures       *int  `json:"breaker_failures"`        // failed or empty turns in a row before the agent is held; 0 = off
	ProgressCard          *bool `json:"progress_card"`           // a live progress card in chat while a turn runs
	QuietDigests          *bool `json:"quiet_digests"`           // a scheduled digest with nothing new is not sent
	ReminderMinutes       []int `json:"reminder_minutes"`        // waits before each gate reminder; nil = the default
	ReminderEscalateAfter *int  `json:"reminder_escalate_after"` // from this reminder on, owners get it by direct message
	// Overrides names the materialized settings (window_hours, allowed_slots, stall_turns,
	// the schedules and zones, lang) the goal sets itself; the others follow the machine
	// default, whose value their columns hold.
	Overrides []string `json:"overrides"`
	// The contract: scope, capabilities the goal grants its agents, acceptance criteria.
	ScopeEditable  []string    `json:"scope_editable"`
	ScopeProtected []string    `json:"scope_protected"`
	ScopeNotes     string      `json:"scope_notes"`
	Capabilities   []string    `json:"capabilities"`
	Criteria       []Criterion `json:"criteria"`
	Version        int64       `json:"version"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
}

// CreateGoalParams creates a goal. Settings left unset (nil, "") follow the machine
// defaults (MachineDefaults); a value given here overrides its default.
type CreateGoalParams struct {
	ID            string
	Title         string
	Objective     string
	Owners        []string
	Members       []string
	WindowHours   *int
	AllowedSlots  *int
	HeartbeatSpec string
	HeartbeatTZ   string
	ReportSpec    string
	ReportTZ      string
	Lang          string
	StallTurns    *int
	// Settings with a machine default: nil (or Unset) takes the default.
	BreakerFailures *int
	ProgressCard    *bool
	QuietDigests    *bool
	// The contract (see contract.go); criteria without an id get g1, g2, ...
	ScopeEditable  []string
	ScopeProtected []string
	ScopeNotes     string
	Capabilities   []string
	Criteria       []Criterion
	Meta           Meta `json:"-"`
}

// ListGoalsParams filters ListGoals. Empty fields do not filter.
type ListGoalsParams struct {
	Status string // active | stopped | done
	// Person limits the list to goals where this open_id is an owner or member.
	Person string
	Limit  int // 0 = 100; at most 1000
	After  string
}

// UpdateGoalParams changes the fields that are non-nil. Version is the version the caller
// read; a different current version is ErrConflict. Version 0 skips the check (chat commands
// that change one field without a read).
type UpdateGoalParams struct {
	GoalID        string
	Version       int64
	Title         *string
	Objective     *string
	Owners        *[]string
	Members       *[]string
	WindowHours   *int
	AllowedSlots  *int
	HeartbeatSpec *string
	HeartbeatTZ   *string
	ReportSpec    *string
	ReportTZ      *string
	Lang          *string
	StallTurns    *int
	// Settings with a machine default: a non-nil field sets it; SettingDefault (IntDefault,
	// BoolDefault) puts it back to the machine default.
	BreakerFailures *int
	ProgressCard    *bool
	QuietDigests    *bool
	DefaultBreaker  bool // put breaker_failures back to the machine default
	DefaultProgress bool // put progress_card back to the machine default
	DefaultQuiet    bool // put quiet_digests back to the machine default
	Meta            Meta `json:"-"`
}

// GoalRef names a goal for stop/resume.
type GoalRef struct {
	GoalID string
	Meta   Meta `json:"-"`
}

// goalCols are read by name into Goal; the should-run snapshot decodes them as JSON, so every
// column's name is its JSON name.
const goalCols = `id, title, objective, owners, members, status, window_hours, allowed_slots,
	heartbeat_spec, heartbeat_tz, report_spec, report_tz, lang, stall_turns, breaker_failures, progress_card,
	quiet_digests, reminder_minutes, reminder_escalate_after, overrides, scope_editable, scope_protected,
	scope_notes, capabilities, criteria, version, created_at, updated_at`

func scanGoal(row pgx.Row) (Goal, error) {
	var g Goal
	err := row.Scan(goalDests(&g)...)
	return g, err
}

// goalDests are the scan destinations of goalCols, in order.
func goalDests(g *Goal) []any {
	return []any{&g.ID, &g.Title, &g.Objective, &g.Owners, &g.Members, &g.Status, &g.WindowHours,
		&g.AllowedSlots, &g.HeartbeatSpec, &g.HeartbeatTZ, &g.ReportSpec, &g.ReportTZ, &g.Lang,
		&g.StallTurns, &g.BreakerFailures, &g.ProgressCard, &g.QuietDigests, &g.ReminderMinutes,
		&g.ReminderEscalateAfter, &g.Overrides, &g.ScopeEditable, &g.ScopeProtected, &g.ScopeNotes,
		&g.Capabilities, &g.Criteria, &g.Version, &g.CreatedAt, &g.UpdatedAt}
}

// checkGoal validates every field of a goal as it will be stored.
func checkGoal(g Goal) error {
	checks := []error{
		checkID("goal_id", g.ID),
		checkText("title", g.Title, 200, false),
		checkText("objective", g.Objective, MaxText, false),
		checkOpenIDs("owners", g.Owners),
		checkOpenIDs("members", g.Members),
		checkRange("window_hours", g.WindowHours, 1, 720),
		checkRange("allowed_slots", g.AllowedSlots, 0, 100000),
		checkCron("heartbeat_spec", g.HeartbeatSpec),
		checkZone("heartbeat_tz", g.HeartbeatTZ),
		checkCron("report_spec", g.ReportSpec),
		checkZone("report_tz", g.ReportTZ),
		checkLang("lang", g.Lang, false),
		checkRange("stall_turns", g.StallTurns, 0, 100),
		checkOptRange("breaker_failures", g.BreakerFailures, 0, 100),
		checkOptRange(SettingReminderEscalate, g.ReminderEscalateAfter, 1, 100),
		CheckScope(g.Scope()),
		CheckCapabilities("capabilities", g.Capabilities),
	}
	if g.ReminderMinutes != nil {
		checks = append(checks, checkLadder(SettingReminderMinutes, g.ReminderMinutes))
	}
	if len(g.Criteria) > MaxCriteria {
		checks = append(checks, Errorf(ErrInvalid, "criteria", "lists %d criteria; at most %d", len(g.Criteria), MaxCriteria))
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

func orDefault[T comparable](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

func strOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// CreateGoal creates an active goal. Settings it leaves unset follow the machine defaults;
// an existing id is ErrConflict.
func (s *Store) CreateGoal(ctx context.Context, p CreateGoalParams) (Goal, error) {
	criteria, err := NormalizeCriteria("criteria", "g", p.Criteria)
	if err != nil {
		return Goal{}, err
	}
	g := Goal{
		ID: p.ID, Title: p.Title, Objective: p.Objective,
		Owners: nonNil(p.Owners), Members: nonNil(p.Members), Status: GoalActive,
		BreakerFailures: p.BreakerFailures, ProgressCard: p.ProgressCard, QuietDigests: p.QuietDigests,
		ScopeEditable: nonNil(p.ScopeEditable), ScopeProtected: nonNil(p.ScopeProtected), ScopeNotes: p.ScopeNotes,
		Capabilities: nonNil(p.Capabilities), Criteria: criteria, Overrides: []string{},
	}
	return Do(ctx, s, "goal.create", p.Meta, p, func(tx *Tx, now time.Time) (Goal, Audit, error) {
		d, err := GetMachineDefaults(ctx, tx)
		if err != nil {
			return Goal{}, Audit{}, err
		}
		g := withCreateSettings(g, p, d)
		if err := checkGoal(g); err != nil {
			return Goal{}, Audit{}, err
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO goal (id, title, objective, owners, members, status, window_hours, allowed_slots,
			                  heartbeat_spec, heartbeat_tz, report_spec, report_tz, lang, stall_turns,
			                  created_at, updated_at, breaker_failures, progress_card, quiet_digests,
			                  overrides, scope_editable, scope_protected, scope_notes, capabilities, criteria)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15, $16, $17, $18,
			        $19, $20, $21, $22, $23, $24)
			ON CONFLICT (id) DO NOTHING`,
			g.ID, g.Title, g.Objective, g.Owners, g.Members, g.Status, g.WindowHours, g.AllowedSlots,
			g.HeartbeatSpec, g.HeartbeatTZ, g.ReportSpec, g.ReportTZ, g.Lang, g.StallTurns, now,
			g.BreakerFailures, g.ProgressCard, g.QuietDigests,
			g.Overrides, g.ScopeEditable, g.ScopeProtected, g.ScopeNotes, g.Capabilities, g.Criteria)
		if err != nil {
			return Goal{}, Audit{}, fmt.Errorf("insert goal: %w", mapErr(err))
		}
		if tag.RowsAffected() == 0 {
			return Goal{}, Audit{}, Errorf(ErrConflict, "goal_id", "goal %q already exists", g.ID)
		}
		out, err := getGoal(ctx, tx, g.ID, false)
		if err != nil {
			return Goal{}, Audit{}, err
		}
		return out, Audit{GoalID: out.ID, Target: GoalTarget(out.ID)}, nil
	})
}

// withCreateSettings fills g's materialized settings: those p gives are overrides, the
// others take the machine defaults d.
func withCreateSettings(g Goal, p CreateGoalParams, d MachineDefaults) Goal {
	num := func(field string, v *int, def int) int {
		if v == nil {
			return def
		}
		g.Overrides = append(g.Overrides, field)
		return *v
	}
	str := func(field, v, def string) string {
		if v == "" {
			return def
		}
		g.Overrides = append(g.Overrides, field)
		return v
	}
	g.AllowedSlots = num(SettingAllowedSlots, p.AllowedSlots, d.AllowedSlots)
	g.WindowHours = num(SettingWindowHours, p.WindowHours, d.WindowHours)
	g.StallTurns = num(SettingStallTurns, p.StallTurns, d.StallTurns)
	g.HeartbeatSpec = str(SettingHeartbeatSpec, p.HeartbeatSpec, d.HeartbeatSpec)
	g.HeartbeatTZ = str(SettingHeartbeatTZ, p.HeartbeatTZ, d.HeartbeatTZ)
	g.ReportSpec = str(SettingReportSpec, p.ReportSpec, d.ReportSpec)
	g.ReportTZ = str(SettingReportTZ, p.ReportTZ, d.ReportTZ)
	g.Lang = str(SettingLang, p.Lang, d.Lang)
	return g
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// GetGoal returns one goal; an unknown id is ErrNotFound naming goal_id.
func (s *Store) GetGoal(ctx context.Context, id string) (Goal, error) {
	if err := checkID("goal_id", id); err != nil {
		return Goal{}, err
	}
	return GetGoal(ctx, s.DB(), id)
}

// GetGoal reads one goal through db (the pool, or the caller's transaction so it sees its
// writes); ErrNotFound naming goal_id when it does not exist.
func GetGoal(ctx context.Context, db DB, id string) (Goal, error) {
	return getGoal(ctx, db, id, false)
}

func getGoal(ctx context.Context, db DB, id string, forUpdate bool) (Goal, error) {
	q := `SELECT ` + goalCols + ` FROM goal WHERE id = $1`
	if forUpdate {
		q += ` FOR NO KEY UPDATE` // ids never change; rows referencing this one need not wait
	}
	g, err := scanGoal(db.QueryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Goal{}, Errorf(ErrNotFound, "goal_id", "no goal %q", id)
	}
	if err != nil {
		return Goal{}, fmt.Errorf("read goal: %w", mapErr(err))
	}
	return g, nil
}

// ListGoals lists goals ordered by id, after p.After, at most p.Limit (default 100).
func (s *Store) ListGoals(ctx context.Context, p ListGoalsParams) ([]Goal, error) {
	if p.Status != "" {
		if err := checkOneOf("status", p.Status, GoalActive, GoalStopped, GoalDone); err != nil {
			return nil, err
		}
	}
	limit, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.DB().Query(ctx, `
		SELECT `+goalCols+` FROM goal
		WHERE ($1 = '' OR status = $1)
		  AND ($2 = '' OR $2 = ANY (owners) OR $2 = ANY (members))
		  AND id > $3
		ORDER BY id LIMIT $4`, p.Status, p.Person, p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list goals: %w", mapErr(err))
	}
	return collect(rows, "list goals", scanGoal)
}

func listLimit(n int) (int, error) {
	switch {
	case n == 0:
		return 100, nil
	case n < 0 || n > 1000:
		return 0, Errorf(ErrInvalid, "limit", "is %d; it must be between 1 and 1000", n)
	}
	return n, nil
}

// UpdateGoal applies the non-nil fields. With a non-zero Version the goal must still be at
// that version (else ErrConflict); the version then increases by one.
func (s *Store) UpdateGoal(ctx context.Context, p UpdateGoalParams) (Goal, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Goal{}, err
	}
	if p.Version < 0 {
		return Goal{}, Errorf(ErrInvalid, "version", "must not be negative")
	}
	// Validate what can be validated without the row first, so bad input never waits on a lock.
	probe := Goal{ID: p.GoalID, WindowHours: 1, HeartbeatTZ: "UTC", ReportTZ: "UTC", Lang: "en"}
	apply(&probe, p)
	if err := checkGoal(probe); err != nil {
		return Goal{}, err
	}
	return Do(ctx, s, "goal.update", p.Meta, p, func(tx *Tx, now time.Time) (Goal, Audit, error) {
		g, err := getGoal(ctx, tx, p.GoalID, true)
		if err != nil {
			return Goal{}, Audit{}, err
		}
		if p.Version != 0 && g.Version != p.Version {
			return Goal{}, Audit{}, Errorf(ErrConflict, "version",
				"goal %q is at version %d, not %d; read it again and retry", g.ID, g.Version, p.Version)
		}
		before := g
		apply(&g, p)
		if err := checkGoal(g); err != nil {
			return Goal{}, Audit{}, err
		}
		out, err := writeGoal(ctx, tx, g, now)
		if err != nil {
			return Goal{}, Audit{}, err
		}
		return out, Audit{GoalID: g.ID, Target: GoalTarget(g.ID), Detail: auditDetail(map[string]any{
			"version": out.Version, "changes": changes(before, out, "version", "updated_at", "created_at")})}, nil
	})
}

func apply(g *Goal, p UpdateGoalParams) {
	mark := func(field string) {
		if !slices.Contains(g.Overrides, field) {
			g.Overrides = append(slices.Clone(g.Overrides), field)
		}
	}
	set := func(field string, dst *string, v *string) {
		if v != nil {
			*dst = *v
			if field != "" {
				mark(field)
			}
		}
	}
	setInt := func(field string, dst *int, v *int) {
		if v != nil {
			*dst = *v
			mark(field)
		}
	}
	set("", &g.Title, p.Title)
	set("", &g.Objective, p.Objective)
	set(SettingHeartbeatSpec, &g.HeartbeatSpec, p.HeartbeatSpec)
	set(SettingHeartbeatTZ, &g.HeartbeatTZ, p.HeartbeatTZ)
	set(SettingReportSpec, &g.ReportSpec, p.ReportSpec)
	set(SettingReportTZ, &g.ReportTZ, p.ReportTZ)
	set(SettingLang, &g.Lang, p.Lang)
	if p.Owners != nil {
		g.Owners = nonNil(*p.Owners)
	}
	if p.Members != nil {
		g.Members = nonNil(*p.Members)
	}
	setInt(SettingWindowHours, &g.WindowHours, p.WindowHours)
	setInt(SettingAllowedSlots, &g.AllowedSlots, p.AllowedSlots)
	setInt(SettingStallTurns, &g.StallTurns, p.StallTurns)
	g.BreakerFailures = setting(g.BreakerFailures, p.BreakerFailures, p.DefaultBreaker)
	g.ProgressCard = setting(g.ProgressCard, p.ProgressCard, p.DefaultProgress)
	g.QuietDigests = setting(g.QuietDigests, p.QuietDigests, p.DefaultQuiet)
}

// writeGoal stores every field of g (its settings, overrides and contract) and moves it to
// the next version.
func writeGoal(ctx context.Context, db DB, g Goal, now time.Time) (Goal, error) {
	_, err := db.Exec(ctx, `
		UPDATE goal SET title = $2, objective = $3, owners = $4, members = $5, status = $6,
		       window_hours = $7, allowed_slots = $8, heartbeat_spec = $9, heartbeat_tz = $10,
		       report_spec = $11, report_tz = $12, lang = $13, stall_turns = $14,
		       version = version + 1, updated_at = $15,
		       breaker_failures = $16, progress_card = $17, quiet_digests = $18,
		       reminder_minutes = $19, reminder_escalate_after = $20, overrides = $21,
		       scope_editable = $22, scope_protected = $23, scope_notes = $24, capabilities = $25, criteria = $26
		WHERE id = $1`,
		g.ID, g.Title, g.Objective, g.Owners, g.Members, g.Status, g.WindowHours, g.AllowedSlots,
		g.HeartbeatSpec, g.HeartbeatTZ, g.ReportSpec, g.ReportTZ, g.Lang, g.StallTurns, now,
		g.BreakerFailures, g.ProgressCard, g.QuietDigests, g.ReminderMinutes, g.ReminderEscalateAfter,
		nonNil(g.Overrides), nonNil(g.ScopeEditable), nonNil(g.ScopeProtected), g.ScopeNotes,
		nonNil(g.Capabilities), nonNilCriteria(g.Criteria))
	if err != nil {
		return Goal{}, fmt.Errorf("update goal: %w", mapErr(err))
	}
	return getGoal(ctx, db, g.ID, false)
}

func nonNilCriteria(cs []Criterion) []Criterion {
	if cs == nil {
		return []Criterion{}
	}
	return cs
}

// StopGoal pauses an active goal: should-run answers paused until ResumeGoal. Todos, history
// and settings are kept. Stopping a stopped goal returns it unchanged.
func (s *Store) StopGoal(ctx context.Context, p GoalRef) (Goal, error) {
	return s.setGoalStatus(ctx, "goal.stop", p, GoalStopped)
}

// ResumeGoal reactivates a stopped goal. Resuming an active goal returns it unchanged; a done
// goal is ErrRefused.
func (s *Store) ResumeGoal(ctx context.Context, p GoalRef) (Goal, error) {
	return s.setGoalStatus(ctx, "goal.resume", p, GoalActive)
}

func (s *Store) setGoalStatus(ctx context.Context, op string, p GoalRef, status string) (Goal, error) {
	if err := checkID("goal_id", p.GoalID); err != nil {
		return Goal{}, err
	}
	return Do(ctx, s, op, p.Meta, p, func(tx *Tx, now time.Time) (Goal, Audit, error) {
		before, err := getGoal(ctx, tx, p.GoalID, true)
		if err != nil {
			return Goal{}, Audit{}, err
		}
		g, err := setGoalStatusTx(ctx, tx, p.GoalID, status, now)
		if err != nil {
			return Goal{}, Audit{}, err
		}
		return g, Audit{GoalID: g.ID, Target: GoalTarget(g.ID), Detail: auditDetail(map[string]any{
			"status": g.Status, "changes": changes(before, g, "version", "updated_at", "created_at")})}, nil
	})
}

func setGoalStatusTx(ctx context.Context, tx DB, goalID, status string, now time.Time) (Goal, error) {
	g, err := getGoal(ctx, tx, goalID, true)
	if err != nil {
		return Goal{}, err
	}
	if g.Status == status {
		return g, nil
	}
	if g.Status == GoalDone {
		return Goal{}, Errorf(ErrRefused, "status", "goal %q is done; it cannot be stopped or resumed", g.ID)
	}
	g.Status = status
	return writeGoal(ctx, tx, g, now)
}
