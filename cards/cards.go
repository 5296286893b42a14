package cards

import (
	"cmp"
	"fmt"
	"time"

	"loopx/store"
	"loopx/templates"
)

// Set is every card renderer of the process: gate cards, proposal cards and report cards.
// Build it once (New) and hand the same Set to chat, the API, the workspace, the change kernel
// and the scheduler, so a card reads the same whichever surface caused it.
type Set struct {
	Gates     GateCards
	Proposals ProposalCards
	tpl       *templates.Set
}

// New returns the card renderers over tpl; defaultLang ("" = en) applies when neither the
// chat nor the goal sets a language.
func New(tpl *templates.Set, defaultLang string) *Set {
	def := cmp.Or(defaultLang, templates.DefaultLang)
	return &Set{
		Gates:     GateCards{tpl: tpl, defaultLang: def},
		Proposals: ProposalCards{tpl: tpl, defaultLang: def},
		tpl:       tpl,
	}
}

// DefaultLang is the language cards use when neither the chat nor the goal sets one.
func (s *Set) DefaultLang() string { return s.Gates.defaultLang }

// Templates is the template set the cards render with.
func (s *Set) Templates() *templates.Set { return s.tpl }

// Report renders a report digest of facts in lang: times in loc, the next heartbeat (zero:
// none scheduled), the chart of turns and slots per day, and the goal's decisions of the
// window (trail: finished, reopened, replanned).
func (s *Set) Report(lang string, f store.DigestFacts, trail []store.GoalDecision, loc *time.Location, nextHeartbeat time.Time) (templates.Rendered, error) {
	r, err := s.tpl.Render(lang, "digest", reportView(s.tpl, f, trail, lang, loc, nextHeartbeat))
	if err != nil {
		return templates.Rendered{}, fmt.Errorf("render report: %w", err)
	}
	return r, nil
}
