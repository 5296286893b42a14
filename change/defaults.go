package change

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"loopx/store"
)

// DefaultsChange lists the machine defaults to change; nil leaves one as it is. The
// settings are those of store.Settings, in the forms a goal's take.
type DefaultsChange struct {
	WindowHours              *int    `json:"window_hours,omitempty"`
	AllowedSlots             *int    `json:"allowed_slots,omitempty"`
	StallTurns               *int    `json:"stall_turns,omitempty"`
	HeartbeatSpec            *string `json:"heartbeat_spec,omitempty"`
	HeartbeatTZ              *string `json:"heartbeat_tz,omitempty"`
	ReportSpec               *string `json:"report_spec,omitempty"`
	ReportTZ                 *string `json:"report_tz,omitempty"`
	Lang                     *string `json:"lang,omitempty"`
	ReminderMinutes          *string `json:"reminder_minutes,omitempty"` // "30,60,120"
	ReminderEscalateAfter    *int    `json:"reminder_escalate_after,omitempty"`
	PermissionTimeoutSeconds *int    `json:"permission_timeout_seconds,omitempty"`
	BreakerFailures          *string `json:"breaker_failures,omitempty"` // 0 (off) to 100, or off
	ProgressCard             *string `json:"progress_card,omitempty"`    // on | off
	QuietDigests             *string `json:"quiet_digests,omitempty"`    // on | off
}

// defaultsAfter is d with c applied.
func defaultsAfter(d store.MachineDefaults, c DefaultsChange) (store.MachineDefaults, error) {
	d.ReminderMinutes = slices.Clone(d.ReminderMinutes)
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	setInt(&d.WindowHours, c.WindowHours)
	setInt(&d.AllowedSlots, c.AllowedSlots)
	setInt(&d.StallTurns, c.StallTurns)
	set(&d.HeartbeatSpec, c.HeartbeatSpec)
	set(&d.HeartbeatTZ, c.HeartbeatTZ)
	set(&d.ReportSpec, c.ReportSpec)
	set(&d.ReportTZ, c.ReportTZ)
	set(&d.Lang, c.Lang)
	setInt(&d.ReminderEscalateAfter, c.ReminderEscalateAfter)
	setInt(&d.PermissionTimeoutSeconds, c.PermissionTimeoutSeconds)
	if c.ReminderMinutes != nil {
		ladder, err := ParseLadder(*c.ReminderMinutes)
		if err != nil {
			return d, err
		}
		d.ReminderMinutes = ladder
	}
	if c.BreakerFailures != nil {
		v := strings.ToLower(strings.TrimSpace(*c.BreakerFailures))
		n, err := strconv.Atoi(v)
		if v == "off" {
			n, err = 0, nil
		}
		if err != nil || n < 0 || n > 100 {
			return d, store.Errorf(store.ErrInvalid, "breaker_failures", "%q is not a number of failures from 0 (off) to 100, or off", clipStr(v))
		}
		d.BreakerFailures = n
	}
	onOff := func(field string, v *string, dst *bool) error {
		if v == nil {
			return nil
		}
		switch strings.ToLower(strings.TrimSpace(*v)) {
		case "on", "true", "1", "yes":
			*dst = true
		case "off", "false", "0", "no":
			*dst = false
		default:
			return store.Errorf(store.ErrInvalid, field, "%q is not on or off", clipStr(*v))
		}
		return nil
	}
	if err := onOff("progress_card", c.ProgressCard, &d.ProgressCard); err != nil {
		return d, err
	}
	if err := onOff("quiet_digests", c.QuietDigests, &d.QuietDigests); err != nil {
		return d, err
	}
	return d, store.CheckMachineDefaults(d)
}

// computeDefaults diffs a change of the machine defaults and lists, per setting, the goals
// it reaches (those that do not override it).
func computeDefaults(ctx context.Context, db store.DB, d store.MachineDefaults, req Request) (computed, error) {
	after, err := defaultsAfter(d, *req.Defaults)
	if err != nil {
		return computed{}, err
	}
	changed := store.ChangedDefaults(d, after)
	if len(changed) == 0 {
		return computed{}, store.Errorf(store.ErrInvalid, "defaults", "nothing would change: the machine defaults already have these values")
	}
	var n DefaultsChange
	var diff []store.FieldChange
	var fx []store.Effect
	for _, f := range changed {
		diff = append(diff, store.FieldChange{Field: f, Before: d.Value(f), After: after.Value(f)})
		ids, total, err := store.GoalsFollowing(ctx, db, []string{f}, 10)
		if err != nil {
			return computed{}, err
		}
		code := "defaults_reach"
		if total == 0 {
			code = "defaults_reach_none"
		}
		fx = append(fx, store.Effect{Code: code, Args: map[string]string{
			"field": f, "n": itoa(total), "goals": strings.Join(ids, ", "), "more": itoa(total - len(ids))}})
		setDefaultsField(&n, f, after)
	}
	return computed{req: Request{Kind: store.ProposalDefaultsSet, Defaults: &n}, diff: diff, effects: fx}, nil
}

// setDefaultsField names setting f of after in the normalized change n.
func setDefaultsField(n *DefaultsChange, f string, after store.MachineDefaults) {
	i := func(v int) *int { return &v }
	s := func(v string) *string { return &v }
	switch f {
	case store.SettingWindowHours:
		n.WindowHours = i(after.WindowHours)
	case store.SettingAllowedSlots:
		n.AllowedSlots = i(after.AllowedSlots)
	case store.SettingStallTurns:
		n.StallTurns = i(after.StallTurns)
	case store.SettingHeartbeatSpec:
		n.HeartbeatSpec = s(after.HeartbeatSpec)
	case store.SettingHeartbeatTZ:
		n.HeartbeatTZ = s(after.HeartbeatTZ)
	case store.SettingReportSpec:
		n.ReportSpec = s(after.ReportSpec)
	case store.SettingReportTZ:
		n.ReportTZ = s(after.ReportTZ)
	case store.SettingLang:
		n.Lang = s(after.Lang)
	case store.SettingReminderMinutes:
		n.ReminderMinutes = s(store.Ladder(after.ReminderMinutes))
	case store.SettingReminderEscalate:
		n.ReminderEscalateAfter = i(after.ReminderEscalateAfter)
	case store.SettingPermissionTimeout:
		n.PermissionTimeoutSeconds = i(after.PermissionTimeoutSeconds)
	case store.SettingBreakerFailures:
		n.BreakerFailures = s(strconv.Itoa(after.BreakerFailures))
	case store.SettingProgressCard:
		n.ProgressCard = s(after.Value(f))
	case store.SettingQuietDigests:
		n.QuietDigests = s(after.Value(f))
	}
}

// proposeDefaults stores a proposal to change the machine defaults: only admins may.
func (k *Kernel) proposeDefaults(ctx context.Context, tx *store.Tx, who store.Person, m store.Meta, req Request, now time.Time) (store.Proposal, error) {
	if !who.Admin {
		return store.Proposal{}, refusal("", 0, store.RoleAdmin, store.RoleStranger, "propose")
	}
	d, err := store.GetMachineDefaults(ctx, tx)
	if err != nil {
		return store.Proposal{}, err
	}
	if req.Version != 0 && req.Version != d.Version {
		return store.Proposal{}, store.Errorf(store.ErrConflict, "version",
			"the machine defaults are at version %d, not %d; read them again and retry", d.Version, req.Version)
	}
	c, err := computeDefaults(ctx, tx, d, req)
	if err != nil {
		return store.Proposal{}, err
	}
	params, err := json.Marshal(c.req)
	if err != nil {
		return store.Proposal{}, fmt.Errorf("encode proposal parameters: %w", err)
	}
	return store.InsertProposal(ctx, tx, store.ProposalInsert{
		Kind: req.Kind, Params: params, Diff: c.diff, Effects: c.effects, GoalVersion: d.Version,
		Need: store.RoleAdmin, ProposedBy: m.Actor, Surface: m.Surface, Now: now,
	})
}

// settleDefaults applies a confirmed change of the machine defaults while they are still at
// the proposal's version; otherwise the proposal is stale and a fresh one replaces it.
func (k *Kernel) settleDefaults(ctx context.Context, tx *store.Tx, p store.Proposal, req Request, m store.Meta, now time.Time,
	end func(state, reason string, successor, version int64) (store.Proposal, error)) (Result, error) {
	d, err := store.LockMachineDefaults(ctx, tx)
	if err != nil {
		return Result{}, err
	}
	if d.Version != p.GoalVersion {
		var fresh *store.Proposal
		if c, err := computeDefaults(ctx, tx, d, req); err == nil {
			params, err := json.Marshal(c.req)
			if err != nil {
				return Result{}, fmt.Errorf("encode proposal parameters: %w", err)
			}
			fp, err := store.InsertProposal(ctx, tx, store.ProposalInsert{Kind: req.Kind, Params: params, Diff: c.diff,
				Effects: c.effects, GoalVersion: d.Version, Need: store.RoleAdmin, ProposedBy: m.Actor, Surface: m.Surface, Now: now})
			if err != nil {
				return Result{}, err
			}
			fresh = &fp
		}
		var succ int64
		if fresh != nil {
			succ = fresh.ID
		}
		out, err := end(store.ProposalStale, fmt.Sprintf("the machine defaults changed (version %d, not %d) after the proposal was made",
			d.Version, p.GoalVersion), succ, 0)
		return Result{Proposal: out, Fresh: fresh}, err
	}
	after, err := defaultsAfter(d, *req.Defaults)
	if err != nil {
		out, err := end(store.ProposalRefused, err.Error(), 0, 0)
		return Result{Proposal: out}, err
	}
	stored, _, err := store.WriteMachineDefaults(ctx, tx, d, after, m.Actor, now)
	if err != nil {
		return Result{}, err
	}
	out, err := end(store.ProposalApplied, "", 0, stored.Version)
	return Result{Proposal: out, Defaults: &stored}, err
}
