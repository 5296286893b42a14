package web

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"

	"loopx/change"
	"loopx/store"
)

// The machine defaults, for admins: every goal setting's default with how many goals follow
// it, and a form whose preview lists the goals a change reaches. Everyone else is answered
// like a page that does not exist.

// defaultsView is the machine defaults page.
type defaultsView struct {
	Version   int64
	UpdatedBy string
	UpdatedAt string
	Rows      []defaultRow
}

// defaultRow is one setting: its name and value in words, the value as the form takes it,
// and the goals that follow it.
type defaultRow struct {
	Setting, Name, Value, Input string
	Followers                   int
}

func (s *Server) defaults(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	if !ss.person(s.admins).Admin {
		return s.notFound(v)
	}
	if err := s.readDefaults(ctx, v); err != nil {
		return "", 0, err
	}
	return "defaults", http.StatusOK, nil
}

func (s *Server) readDefaults(ctx context.Context, v *view) error {
	db := s.st.DB()
	d, err := store.GetMachineDefaults(ctx, db)
	if err != nil {
		return err
	}
	v.Title, v.Live = s.pages.Word(v.Lang, "machine_defaults"), "*"
	dv := defaultsView{Version: d.Version, UpdatedBy: d.UpdatedBy}
	if d.UpdatedBy != "" {
		dv.UpdatedAt = d.UpdatedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	for _, f := range store.Settings() {
		_, n, err := store.GoalsFollowing(ctx, db, []string{f}, 0)
		if err != nil {
			return err
		}
		dv.Rows = append(dv.Rows, defaultRow{Setting: f, Name: change.FieldName(s.opts.Templates, v.Lang, f),
			Value: s.settingWords(v.Lang, f, d.Value(f)), Input: d.Value(f), Followers: n})
	}
	v.Defaults = dv
	return nil
}

// proposeDefaults turns the defaults form into a proposal and shows its preview: the diff and,
// for each setting, the goals that follow it.
func (s *Server) proposeDefaults(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session) {
	who := ss.person(s.admins)
	if !who.Admin {
		if err := s.st.AuditRefusal(ctx, ss.meta(r), store.RefusalParams{Action: "web.defaults",
			Target: r.Method + " " + r.URL.Path, Reason: "not admin"}); err != nil {
			s.fail(w, r, err)
			return
		}
		s.showNotFound(w, r, ss)
		return
	}
	req, err := defaultsRequest(r)
	if err == nil {
		var p store.Proposal
		if p, err = s.opts.Changes.Propose(ctx, who, ss.meta(r), req); err == nil {
			back(w, r, "/web/proposals/"+strconv.FormatInt(p.ID, 10), "", "", "")
			return
		}
	}
	var se *store.Error
	if !errors.As(err, &se) {
		s.fail(w, r, err)
		return
	}
	v := s.baseView(r, ss, cmp.Or(ss.Lang, s.opts.DefaultLang))
	if err := s.readDefaults(ctx, v); err != nil {
		s.fail(w, r, err)
		return
	}
	v.Flash, v.FlashKind = s.invalid(v.Lang, se), "warn"
	if se.Kind == store.ErrConflict {
		v.Flash = s.pages.Word(v.Lang, "flash_defaults_changed")
	}
	s.render(w, pageStatus(err), "defaults", v)
}

// defaultsRequest reads the defaults form: every setting, of which the kernel keeps those
// that change.
func defaultsRequest(r *http.Request) (change.Request, error) {
	f := r.PostForm
	c := &change.DefaultsChange{}
	req := change.Request{Kind: store.ProposalDefaultsSet, Defaults: c}
	if v := f.Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return req, store.Errorf(store.ErrInvalid, "version", "%q is not a version", v)
		}
		req.Version = n
	}
	err := readSettings(f,
		[]numField{{store.SettingAllowedSlots, &c.AllowedSlots}, {store.SettingWindowHours, &c.WindowHours},
			{store.SettingStallTurns, &c.StallTurns}, {store.SettingReminderEscalate, &c.ReminderEscalateAfter},
			{store.SettingPermissionTimeout, &c.PermissionTimeoutSeconds}},
		[]textField{{store.SettingHeartbeatSpec, &c.HeartbeatSpec}, {store.SettingHeartbeatTZ, &c.HeartbeatTZ},
			{store.SettingReportSpec, &c.ReportSpec}, {store.SettingReportTZ, &c.ReportTZ}, {store.SettingLang, &c.Lang},
			{store.SettingBreakerFailures, &c.BreakerFailures}, {store.SettingProgressCard, &c.ProgressCard},
			{store.SettingQuietDigests, &c.QuietDigests}, {store.SettingReminderMinutes, &c.ReminderMinutes}},
		func(string, string) bool { return true })
	return req, err
}
