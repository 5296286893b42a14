package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Machine defaults and goal overrides. Every goal setting listed in Settings has a machine
// default (one row, machine_defaults, changed only through the change kernel by an admin); a
// goal follows it unless it overrides the setting. Two storage forms, one meaning:
//
//   - materialized settings (window_hours, allowed_slots, stall_turns, the heartbeat and
//     report schedules and zones, lang) keep the effective value in the goal's own column, so
//     every reader, trigger and older replica reads it there: the goal's value when the field
//     is in Goal.Overrides, else the machine default, which WriteMachineDefaults copies into
//     every goal that follows it;
//   - nullable settings (breaker_failures, progress_card, quiet_digests, the reminder ladder)
//     are NULL while the goal follows the default and read through the Goal methods below.
//
// Source says which of the two a goal's setting is, for every surface that shows settings.

// Setting names: the goal settings with a machine default.
const (
	SettingWindowHours       = "window_hours"
	SettingAllowedSlots      = "allowed_slots"
	SettingStallTurns        = "stall_turns"
	SettingHeartbeatSpec     = "heartbeat_spec"
	SettingHeartbeatTZ       = "heartbeat_tz"
	SettingReportSpec        = "report_spec"
	SettingReportTZ          = "report_tz"
	SettingLang              = "lang"
	SettingReminderMinutes   = "reminder_minutes"
	SettingReminderEscalate  = "reminder_escalate_after"
	SettingPermissionTimeout = "permission_timeout_seconds"
	SettingBreakerFailures   = "breaker_failures"
	SettingProgressCard      = "progress_card"
	SettingQuietDigests      = "quiet_digests"
)

// Sources of a setting's value.
const (
	SourceDefault  = "default"
	SourceOverride = "override"
)

// Settings lists every goal setting with a machine default, in the order surfaces show them.
func Settings() []string {
	return []string{SettingAllowedSlots, SettingWindowHours, SettingHeartbeatSpec, SettingHeartbeatTZ,
		SettingReportSpec, SettingReportTZ, SettingStallTurns, SettingBreakerFailures, SettingProgressCard,
		SettingQuietDigests, SettingReminderMinutes, SettingReminderEscalate, SettingPermissionTimeout, SettingLang}
}

// materialized are the settings whose effective value lives in the goal's own column.
func materialized() []string {
	return []string{SettingWindowHours, SettingAllowedSlots, SettingStallTurns, SettingHeartbeatSpec,
		SettingHeartbeatTZ, SettingReportSpec, SettingReportTZ, SettingLang}
}

// IsMaterialized tells whether setting keeps its effective value in the goal's column.
func IsMaterialized(setting string) bool { return slices.Contains(materialized(), setting) }

// MachineDefaults are the values every goal follows unless it overrides them.
type MachineDefaults struct {
	WindowHours              int       `json:"window_hours"`
	AllowedSlots             int       `json:"allowed_slots"`
	StallTurns               int       `json:"stall_turns"`
	HeartbeatSpec            string    `json:"heartbeat_spec"`
	HeartbeatTZ              string    `json:"heartbeat_tz"`
	ReportSpec               string    `json:"report_spec"`
	ReportTZ                 string    `json:"report_tz"`
	Lang                     string    `json:"lang"`
	ReminderMinutes          []int     `json:"reminder_minutes"`        // waits before each reminder; the last repeats
	ReminderEscalateAfter    int       `json:"reminder_escalate_after"` // from this reminder on, owners get it by direct message
	PermissionTimeoutSeconds int       `json:"permission_timeout_seconds"`
	BreakerFailures          int       `json:"breaker_failures"` // 0 = off
	ProgressCard             bool      `json:"progress_card"`    // on: live progress cards for exec and MCP turns
	QuietDigests             bool      `json:"quiet_digests"`    // on: a scheduled digest with nothing new is not sent
	Version                  int64     `json:"version"`
	UpdatedBy                string    `json:"updated_by"`
	UpdatedAt                time.Time `json:"updated_at"`
}

// BuiltinDefaults are the machine defaults a new database starts with.
func BuiltinDefaults() MachineDefaults {
	return MachineDefaults{WindowHours: 24, AllowedSlots: 24, StallTurns: 3, HeartbeatTZ: "UTC", ReportTZ: "UTC",
		Lang: "en", ReminderMinutes: []int{30, 60, 120}, ReminderEscalateAfter: 3, PermissionTimeoutSeconds: 600,
		BreakerFailures: 3, ProgressCard: true, QuietDigests: true, Version: 1}
}

const machineDefaultsCols = `window_hours, allowed_slots, stall_turns, heartbeat_spec, heartbeat_tz, report_spec,
	report_tz, lang, reminder_minutes, reminder_escalate_after, permission_timeout_seconds, breaker_failures,
	progress_card, quiet_digests, version, updated_by, updated_at`

func scanMachineDefaults(row pgx.Row) (MachineDefaults, error) {
	var d MachineDefaults
	err := row.Scan(&d.WindowHours, &d.AllowedSlots, &d.StallTurns, &d.HeartbeatSpec, &d.HeartbeatTZ, &d.ReportSpec,
		&d.ReportTZ, &d.Lang, &d.ReminderMinutes, &d.ReminderEscalateAfter, &d.PermissionTimeoutSeconds,
		&d.BreakerFailures, &d.ProgressCard, &d.QuietDigests, &d.Version, &d.UpdatedBy, &d.UpdatedAt)
	return d, err
}

// GetMachineDefaults reads the machine defaults through db.
func GetMachineDefaults(ctx context.Context, db DB) (MachineDefaults, error) {
	d, err := scanMachineDefaults(db.QueryRow(ctx, `SELECT `+machineDefaultsCols+` FROM machine_defaults`))
	if errors.Is(err, pgx.ErrNoRows) {
		return BuiltinDefaults(), nil // a database migrated but never written: the row's own defaults
	}
	if err != nil {
		return MachineDefaults{}, fmt.Errorf("read machine defaults: %w", mapErr(err))
	}
	return d, nil
}

// GetMachineDefaults reads the machine defaults.
func (s *Store) GetMachineDefaults(ctx context.Context) (MachineDefaults, error) {
	return GetMachineDefaults(ctx, s.DB())
}

// LockMachineDefaults reads the machine defaults for update in the caller's transaction.
func LockMachineDefaults(ctx context.Context, tx DB) (MachineDefaults, error) {
	d, err := scanMachineDefaults(tx.QueryRow(ctx, `SELECT `+machineDefaultsCols+` FROM machine_defaults FOR UPDATE`))
	if err != nil {
		return MachineDefaults{}, fmt.Errorf("lock machine defaults: %w", mapErr(err))
	}
	return d, nil
}

// CheckMachineDefaults validates every value of d as it will be stored.
func CheckMachineDefaults(d MachineDefaults) error {
	checks := []error{
		checkRange(SettingWindowHours, d.WindowHours, 1, 720),
		checkRange(SettingAllowedSlots, d.AllowedSlots, 0, 100000),
		checkRange(SettingStallTurns, d.StallTurns, 0, 100),
		checkCron(SettingHeartbeatSpec, d.HeartbeatSpec),
		checkZone(SettingHeartbeatTZ, d.HeartbeatTZ),
		checkCron(SettingReportSpec, d.ReportSpec),
		checkZone(SettingReportTZ, d.ReportTZ),
		checkLang(SettingLang, d.Lang, false),
		checkLadder(SettingReminderMinutes, d.ReminderMinutes),
		checkRange(SettingReminderEscalate, d.ReminderEscalateAfter, 1, 100),
		checkRange(SettingPermissionTimeout, d.PermissionTimeoutSeconds, 10, 86400),
		checkRange(SettingBreakerFailures, d.BreakerFailures, 0, 100),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

func checkLadder(field string, minutes []int) error {
	if len(minutes) == 0 || len(minutes) > 10 {
		return Errorf(ErrInvalid, field, "give 1 to 10 waits in minutes, such as 30,60,120")
	}
	for _, m := range minutes {
		if m < 1 || m > 7*24*60 {
			return Errorf(ErrInvalid, field, "%d is not a wait from 1 minute to 7 days (10080 minutes)", m)
		}
	}
	return nil
}

// Value is a machine default as text, the form diffs and settings lists show.
func (d MachineDefaults) Value(setting string) string {
	switch setting {
	case SettingWindowHours:
		return itoa(d.WindowHours)
	case SettingAllowedSlots:
		return itoa(d.AllowedSlots)
	case SettingStallTurns:
		return itoa(d.StallTurns)
	case SettingHeartbeatSpec:
		return d.HeartbeatSpec
	case SettingHeartbeatTZ:
		return d.HeartbeatTZ
	case SettingReportSpec:
		return d.ReportSpec
	case SettingReportTZ:
		return d.ReportTZ
	case SettingLang:
		return d.Lang
	case SettingReminderMinutes:
		return Ladder(d.ReminderMinutes)
	case SettingReminderEscalate:
		return itoa(d.ReminderEscalateAfter)
	case SettingPermissionTimeout:
		return itoa(d.PermissionTimeoutSeconds)
	case SettingBreakerFailures:
		return itoa(d.BreakerFailures)
	case SettingProgressCard:
		return onOff(d.ProgressCard)
	case SettingQuietDigests:
		return onOff(d.QuietDigests)
	}
	return ""
}

// Ladder writes a reminder ladder as people type it: 30,60,120.
func Ladder(minutes []int) string {
	parts := make([]string, len(minutes))
	for i, m := range minutes {
		parts[i] = itoa(m)
	}
	return strings.Join(parts, ",")
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

// WriteMachineDefaults stores d (locked by LockMachineDefaults in tx) as the machine
// defaults, changed by who, and carries every changed materialized value into the goals that
// follow it. Every goal a changed setting reaches (it does not override it) moves to a new
// version, so proposals computed against it before go stale. Returns the stored defaults
// and the number of goals reached.
func WriteMachineDefaults(ctx context.Context, tx DB, before, d MachineDefaults, who string, now time.Time) (MachineDefaults, int, error) {
	if err := CheckMachineDefaults(d); err != nil {
		return MachineDefaults{}, 0, err
	}
	out, err := scanMachineDefaults(tx.QueryRow(ctx, `
		UPDATE machine_defaults SET window_hours = $1, allowed_slots = $2, stall_turns = $3, heartbeat_spec = $4,
		       heartbeat_tz = $5, report_spec = $6, report_tz = $7, lang = $8, reminder_minutes = $9,
		       reminder_escalate_after = $10, permission_timeout_seconds = $11, breaker_failures = $12,
		       progress_card = $13, quiet_digests = $14, version = version + 1, updated_by = $15, updated_at = $16
		RETURNING `+machineDefaultsCols,
		d.WindowHours, d.AllowedSlots, d.StallTurns, d.HeartbeatSpec, d.HeartbeatTZ, d.ReportSpec, d.ReportTZ,
		d.Lang, d.ReminderMinutes, d.ReminderEscalateAfter, d.PermissionTimeoutSeconds, d.BreakerFailures,
		d.ProgressCard, d.QuietDigests, who, now))
	if err != nil {
		return MachineDefaults{}, 0, fmt.Errorf("write machine defaults: %w", mapErr(err))
	}
	changed := ChangedDefaults(before, out)
	if len(changed) == 0 {
		return out, 0, nil
	}
	where, sets := reachSQL(changed)
	// Materialized settings take the new value in every goal that follows them.
	for _, f := range changed {
		if IsMaterialized(f) {
			sets = append(sets, fmt.Sprintf("%[1]s = CASE WHEN '%[1]s' = ANY (goal.overrides) THEN goal.%[1]s ELSE d.%[1]s END", f))
		}
	}
	sets = append(sets, "version = goal.version + 1", "updated_at = $1")
	tag, err := tx.Exec(ctx, `UPDATE goal SET `+strings.Join(sets, ", ")+` FROM machine_defaults d WHERE `+where, now)
	if err != nil {
		return MachineDefaults{}, 0, fmt.Errorf("carry machine defaults into goals: %w", mapErr(err))
	}
	return out, int(tag.RowsAffected()), nil
}

// ChangedDefaults lists the settings whose machine default differs between a and b.
func ChangedDefaults(a, b MachineDefaults) []string {
	var out []string
	for _, f := range Settings() {
		if a.Value(f) != b.Value(f) {
			out = append(out, f)
		}
	}
	return out
}

// reachSQL is the condition on goal rows that follow at least one of settings, and the SET
// list to start from. The permission limit lives in the permission policy: a goal follows it
// unless its policy set one.
func reachSQL(settings []string) (string, []string) {
	var conds []string
	for _, f := range settings {
		switch {
		case IsMaterialized(f):
			conds = append(conds, fmt.Sprintf("NOT ('%s' = ANY (goal.overrides))", f))
		case f == SettingPermissionTimeout:
			conds = append(conds, "NOT EXISTS (SELECT 1 FROM permission_policy pp WHERE pp.goal_id = goal.id AND pp.timeout_set)")
		default:
			conds = append(conds, fmt.Sprintf("goal.%s IS NULL", f))
		}
	}
	return "(" + strings.Join(conds, " OR ") + ")", nil
}

// GoalsFollowing lists, by id, up to limit goals that follow the machine default of at least
// one of settings, and how many there are in all: the goals a defaults change reaches.
func GoalsFollowing(ctx context.Context, db DB, settings []string, limit int) ([]string, int, error) {
	if len(settings) == 0 {
		return []string{}, 0, nil
	}
	where, _ := reachSQL(settings)
	var ids []string
	var n int
	err := db.QueryRow(ctx, `SELECT coalesce((SELECT array_agg(id ORDER BY id) FROM (
			SELECT id FROM goal WHERE `+where+` ORDER BY id LIMIT $1) l), '{}'),
		(SELECT count(*)::int FROM goal WHERE `+where+`)`, limit).Scan(&ids, &n)
	if err != nil {
		return nil, 0, fmt.Errorf("list goals that follow the defaults: %w", mapErr(err))
	}
	return ids, n, nil
}

// DefaultsSeed are machine defaults the server's environment gives (LOOPX_BREAKER_FAILURES,
// LOOPX_PROGRESS_CARD, LOOPX_QUIET_DIGESTS): nil leaves a value as it is.
type DefaultsSeed struct {
	BreakerFailures *int
	ProgressCard    *bool
	QuietDigests    *bool
}

// SeedMachineDefaults writes the environment's values into the machine defaults while no
// admin has changed them through the change kernel; afterwards the database's values win. It
// reports whether the seed was applied (false: an admin's values stand, or nothing to seed).
func (s *Store) SeedMachineDefaults(ctx context.Context, seed DefaultsSeed) (bool, error) {
	if seed == (DefaultsSeed{}) {
		return false, nil
	}
	tag, err := s.DB().Exec(ctx, `UPDATE machine_defaults SET
			breaker_failures = coalesce($1, breaker_failures), progress_card = coalesce($2, progress_card),
			quiet_digests = coalesce($3, quiet_digests), updated_at = now()
		WHERE updated_by = ''`, seed.BreakerFailures, seed.ProgressCard, seed.QuietDigests)
	if err != nil {
		return false, fmt.Errorf("seed machine defaults: %w", mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

// Source says whether goal g's setting is its own value (SourceOverride) or the machine
// default (SourceDefault). The permission limit's source is the permission policy's
// (PermissionPolicy.TimeoutSet).
func (g Goal) Source(setting string) string {
	override := false
	switch setting {
	case SettingBreakerFailures:
		override = g.BreakerFailures != nil
	case SettingProgressCard:
		override = g.ProgressCard != nil
	case SettingQuietDigests:
		override = g.QuietDigests != nil
	case SettingReminderMinutes:
		override = g.ReminderMinutes != nil
	case SettingReminderEscalate:
		override = g.ReminderEscalateAfter != nil
	default:
		override = slices.Contains(g.Overrides, setting)
	}
	if override {
		return SourceOverride
	}
	return SourceDefault
}

// Breaker is the goal's effective breaker threshold (0 = off).
func (g Goal) Breaker(d MachineDefaults) int { return orDefault(g.BreakerFailures, d.BreakerFailures) }

// Quiet tells whether a scheduled digest with nothing new is skipped.
func (g Goal) Quiet(d MachineDefaults) bool { return orDefault(g.QuietDigests, d.QuietDigests) }

// Reminders is the goal's effective reminder ladder: the wait before each reminder (the last
// repeats) and the reminder from which owners also get it by direct message.
func (g Goal) Reminders(d MachineDefaults) ([]time.Duration, int) {
	minutes := d.ReminderMinutes
	if g.ReminderMinutes != nil {
		minutes = g.ReminderMinutes
	}
	out := make([]time.Duration, len(minutes))
	for i, m := range minutes {
		out[i] = time.Duration(m) * time.Minute
	}
	return out, orDefault(g.ReminderEscalateAfter, d.ReminderEscalateAfter)
}

// ProgressCardFor tells whether a turn reached through via (exec, webhook, mcp, cli, run) gets
// a live progress card: always when the goal turned cards on, never when it turned them off;
// by default (the machine's) for exec and MCP turns, whose output or tools report progress.
func (g Goal) ProgressCardFor(d MachineDefaults, via string) bool {
	if g.ProgressCard != nil {
		return *g.ProgressCard
	}
	return d.ProgressCard && (via == "exec" || via == "mcp")
}

// SettingValue is one goal setting as surfaces show it: its effective value in text and
// where it comes from.
type SettingValue struct {
	Setting string `json:"setting"`
	Value   string `json:"value"`
	Default string `json:"default"` // the machine default
	Source  string `json:"source"`  // default | override
}

// GoalSettings lists every setting of g with its effective value and source; perm is the
// goal's permission policy (the permission limit's source).
func GoalSettings(g Goal, d MachineDefaults, perm PermissionPolicy) []SettingValue {
	out := make([]SettingValue, 0, len(Settings()))
	for _, f := range Settings() {
		v := SettingValue{Setting: f, Default: d.Value(f), Source: g.Source(f)}
		switch f {
		case SettingPermissionTimeout:
			v.Value, v.Source = itoa(perm.TimeoutSeconds), SourceDefault
			if perm.TimeoutSet {
				v.Source = SourceOverride
			}
		case SettingBreakerFailures:
			v.Value = itoa(g.Breaker(d))
		case SettingProgressCard:
			v.Value = onOff(d.ProgressCard)
			if g.ProgressCard != nil {
				v.Value = onOff(*g.ProgressCard)
			}
		case SettingQuietDigests:
			v.Value = onOff(g.Quiet(d))
		case SettingReminderMinutes:
			v.Value = Ladder(d.ReminderMinutes)
			if g.ReminderMinutes != nil {
				v.Value = Ladder(g.ReminderMinutes)
			}
		case SettingReminderEscalate:
			v.Value = itoa(orDefault(g.ReminderEscalateAfter, d.ReminderEscalateAfter))
		default:
			v.Value = g.Materialized(f)
		}
		out = append(out, v)
	}
	return out
}

// Materialized is the value in text of a setting that lives in the goal's own column.
func (g Goal) Materialized(setting string) string {
	switch setting {
	case SettingWindowHours:
		return itoa(g.WindowHours)
	case SettingAllowedSlots:
		return itoa(g.AllowedSlots)
	case SettingStallTurns:
		return itoa(g.StallTurns)
	case SettingHeartbeatSpec:
		return g.HeartbeatSpec
	case SettingHeartbeatTZ:
		return g.HeartbeatTZ
	case SettingReportSpec:
		return g.ReportSpec
	case SettingReportTZ:
		return g.ReportTZ
	case SettingLang:
		return g.Lang
	}
	return ""
}

// setting applies one change to a nullable setting: back to the default, a new value, or
// unchanged.
func setting[T any](cur, v *T, toDefault bool) *T {
	switch {
	case toDefault:
		return nil
	case v != nil:
		c := *v
		return &c
	}
	return cur
}

func checkOptRange(field string, v *int, lo, hi int) error {
	if v == nil {
		return nil
	}
	return checkRange(field, *v, lo, hi)
}
