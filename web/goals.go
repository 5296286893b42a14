package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"loopx/store"
)

// goalsView is the goals list's part of a page: the rows, the filter they answer and the
// links to the pages before and after.
type goalsView struct {
	List       store.GoalList
	Filter     store.GoalListParams
	From, To   int    // the rows shown, counted from 1
	Prev, Next string // links to the neighbouring pages, "" when there is none
}

// goals lists every goal the person may see, with what needs them, filtered and sorted by the
// query (?status=&needs=1&q=&sort=&page=). A bad filter is said on the page, not a failure.
func (s *Server) goals(ctx context.Context, r *http.Request, ss *session, v *view) (string, int, error) {
	q := r.URL.Query()
	f := store.GoalListParams{Status: q.Get("status"), Needs: q.Get("needs") == "1", Query: q.Get("q"), Sort: q.Get("sort")}
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	f.Offset, f.Limit = (page-1)*store.GoalListPage, store.GoalListPage
	v.Title, v.Live = s.pages.Word(v.Lang, "goals"), "*"
	list, err := store.ListGoalRows(ctx, s.st.DB(), ss.person(s.admins), f, v.Now)
	var se *store.Error
	if errors.As(err, &se) && errors.Is(err, store.ErrInvalid) {
		v.Flash, v.FlashKind = s.invalid(v.Lang, se), "warn"
		f = store.GoalListParams{Offset: 0, Limit: store.GoalListPage}
		page = 1
		list, err = store.ListGoalRows(ctx, s.st.DB(), ss.person(s.admins), f, v.Now)
	}
	if err != nil {
		return "", 0, err
	}
	if f.Sort == "" {
		f.Sort = store.GoalSortNeeds
	}
	gv := goalsView{List: list, Filter: f}
	if len(list.Rows) > 0 {
		gv.From, gv.To = f.Offset+1, f.Offset+len(list.Rows)
	}
	link := func(p int) string {
		u := url.Values{}
		for _, k := range []string{"status", "q", "sort"} {
			if x := q.Get(k); x != "" {
				u.Set(k, x)
			}
		}
		if f.Needs {
			u.Set("needs", "1")
		}
		if p > 1 {
			u.Set("page", strconv.Itoa(p))
		}
		return "/web/goals?" + u.Encode()
	}
	if page > 1 {
		gv.Prev = link(page - 1)
	}
	if gv.To < list.Total && len(list.Rows) > 0 {
		gv.Next = link(page + 1)
	}
	v.Goals = gv
	return "goals", http.StatusOK, nil
}

// unknownPage answers every address of the workspace that names no page: the styled
// "nothing here" page, 404, signed in or not.
func (s *Server) unknownPage(w http.ResponseWriter, r *http.Request) {
	ss, err := s.session(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	lang := s.opts.DefaultLang
	if ss != nil && ss.Lang != "" {
		lang = ss.Lang
	}
	v := s.baseView(r, ss, lang)
	name, status, _ := s.notFound(v)
	s.render(w, status, name, v)
}
