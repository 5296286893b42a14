package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// TurnStopChannel is the NOTIFY channel that tells every replica an owner asked to stop a
// turn; the payload is the turn's id. The replica running it stops it (a runner's poll of
// StopRequested covers a lost notification).
const TurnStopChannel = "loopx_turn_stop"

// Turn card states (turn.card_state): the scheduler's turn-card sweep moves a turn from new
// to live (a progress card shown) or quiet (none), and to done once its outcome was shown.
const (
	CardNew   = "new"
	CardLive  = "live"
	CardQuiet = "quiet"
	CardDone  = "done"
)

// MaxNoteChars bounds one progress note.
const MaxNoteChars = 500

// TurnNote is one progress note of a turn.
type TurnNote struct {
	ID     int64     `json:"note_id"`
	TurnID int64     `json:"turn_id"`
	Text   string    `json:"text"`
	At     time.Time `json:"at"`
}

// TurnNoteParams is an agent's progress note on its live turn.
type TurnNoteParams struct {
	GoalID     string
	AgentID    string
	InstanceID string // "" = the agent's live turn
	Text       string
	Meta       Meta `json:"-"`
}

// CleanNote makes a progress note one short line: control characters out, whitespace
// collapsed, at most MaxNoteChars characters.
func CleanNote(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > MaxNoteChars {
		s = string([]rune(s)[:MaxNoteChars-1]) + "…"
	}
	return s
}

// AddTurnNote records a progress note on the agent's live turn (the one named, else the live
// one). A turn that is not live is ErrRefused. Notes are not audited (they are the turn's
// own chatter); the turn-card sweep shows the latest ones.
func (s *Store) AddTurnNote(ctx context.Context, p TurnNoteParams) (TurnNote, error) {
	if err := checkAgentRef(p.GoalID, p.AgentID); err != nil {
		return TurnNote{}, err
	}
	if p.InstanceID != "" {
		if err := checkInstanceID("turn_instance_id", p.InstanceID); err != nil {
			return TurnNote{}, err
		}
	}
	text := CleanNote(p.Text)
	if text == "" {
		return TurnNote{}, Errorf(ErrInvalid, "text", "is empty; say what the turn is doing")
	}
	return Do(ctx, s, "turn.progress", p.Meta, p, func(tx *Tx, now time.Time) (TurnNote, Audit, error) {
		var t Turn
		var err error
		if p.InstanceID != "" {
			t, err = getTurn(ctx, tx, p.GoalID, p.AgentID, p.InstanceID, false)
		} else {
			t, err = GetLiveTurn(ctx, tx, p.GoalID, p.AgentID, now)
			if errors.Is(err, ErrNotFound) {
				err = because(ReasonNoLiveTurn, Errorf(ErrRefused, "turn_instance_id",
					"agent %s has no live turn; progress is reported during a turn", p.AgentID))
			}
		}
		if err != nil {
			return TurnNote{}, Audit{}, err
		}
		if t.State != TurnLive {
			return TurnNote{}, Audit{}, because(ReasonNoLiveTurn, Errorf(ErrRefused, "turn_instance_id",
				"turn %s already ended (%s); progress is reported during a turn", t.InstanceID, t.State))
		}
		n, err := AddTurnNoteTx(ctx, tx, t.ID, text, now)
		return n, NoAudit(), err
	})
}

// AddTurnNoteTx records a progress note on turn id in the caller's transaction (the exec
// runner's marked output lines). It keeps the newest 20 notes of the turn.
func AddTurnNoteTx(ctx context.Context, db DB, turnID int64, text string, now time.Time) (TurnNote, error) {
	text = CleanNote(text)
	if text == "" {
		return TurnNote{}, Errorf(ErrInvalid, "text", "is empty")
	}
	n := TurnNote{TurnID: turnID, Text: text, At: now}
	err := db.QueryRow(ctx, `
		WITH n AS (INSERT INTO turn_note (turn_id, text, at) VALUES ($1, $2, $3) RETURNING id),
		t AS (UPDATE turn SET note_rev = note_rev + 1 WHERE id = $1 AND state = 'live' RETURNING 1),
		old AS (DELETE FROM turn_note WHERE turn_id = $1 AND id < (
			SELECT min(id) FROM (SELECT id FROM turn_note WHERE turn_id = $1 ORDER BY id DESC LIMIT 19) k))
		SELECT id FROM n`, turnID, text, now).Scan(&n.ID)
	if err != nil {
		return TurnNote{}, fmt.Errorf("add progress note: %w", mapErr(err))
	}
	return n, nil
}

// AddTurnNoteByID records a progress note on live turn id (an exec runner's marked output
// line); a turn that ended meanwhile takes none.
func (s *Store) AddTurnNoteByID(ctx context.Context, turnID int64, text string) error {
	if CleanNote(text) == "" {
		return nil
	}
	var live bool
	if err := s.DB().QueryRow(ctx, `SELECT state = 'live' FROM turn WHERE id = $1`, turnID).Scan(&live); err != nil {
		return fmt.Errorf("read turn: %w", mapErr(err))
	}
	if !live {
		return nil
	}
	_, err := AddTurnNoteTx(ctx, s.DB(), turnID, text, s.now())
	return err
}

// ListTurnNotes returns the turn's newest notes (at most limit), oldest first.
func ListTurnNotes(ctx context.Context, db DB, turnID int64, limit int) ([]TurnNote, error) {
	rows, err := db.Query(ctx, `SELECT id, turn_id, text, at FROM (
		SELECT id, turn_id, text, at FROM turn_note WHERE turn_id = $1 ORDER BY id DESC LIMIT $2) n ORDER BY id`, turnID, limit)
	if err != nil {
		return nil, fmt.Errorf("list progress notes: %w", mapErr(err))
	}
	return collect(rows, "list progress notes", func(r pgx.Row) (TurnNote, error) {
		var n TurnNote
		err := r.Scan(&n.ID, &n.TurnID, &n.Text, &n.At)
		return n, err
	})
}

// StopParams asks to stop an agent's live turn now.
type StopParams struct {
	GoalID  string
	AgentID string
	Meta    Meta `json:"-"`
}

// RequestStop marks the agent's live turn to be stopped (by Meta.Actor) and tells every
// replica (TurnStopChannel): the runner running it kills its process group or calls its
// cancel URL; a host learns it at its next should-run, which ends the turn as stopped. No
// live turn is ErrRefused (audited); asking twice changes nothing.
func (s *Store) RequestStop(ctx context.Context, p StopParams) (Turn, error) {
	if err := checkAgentRef(p.GoalID, p.AgentID); err != nil {
		return Turn{}, err
	}
	return Do(ctx, s, "turn.stop", p.Meta, p, func(tx *Tx, now time.Time) (Turn, Audit, error) {
		t, err := scanTurn(tx.QueryRow(ctx, `SELECT `+turnCols+` FROM turn
			WHERE goal_id = $1 AND agent_id = $2 AND state = 'live' AND lease_expires_at > $3 FOR NO KEY UPDATE`,
			p.GoalID, p.AgentID, now))
		if errors.Is(err, pgx.ErrNoRows) {
			return Turn{}, Audit{}, because(ReasonNoLiveTurn, refuse(ErrRefused, "agent_id",
				fmt.Sprintf("agent %s of goal %s has no live turn to stop", p.AgentID, p.GoalID),
				p.GoalID, AgentTarget(p.GoalID, p.AgentID), nil))
		}
		if err != nil {
			return Turn{}, Audit{}, fmt.Errorf("find live turn: %w", mapErr(err))
		}
		if t.StopRequestedAt != nil {
			return t, NoAudit(), nil
		}
		if t, err = scanTurn(tx.QueryRow(ctx, `UPDATE turn SET stop_requested_at = $2, stop_requested_by = $3
			WHERE id = $1 RETURNING `+turnCols, t.ID, now, p.Meta.Actor)); err != nil {
			return Turn{}, Audit{}, fmt.Errorf("request stop: %w", mapErr(err))
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, TurnStopChannel, strconv.FormatInt(t.ID, 10)); err != nil {
			return Turn{}, Audit{}, fmt.Errorf("announce stop: %w", mapErr(err))
		}
		return t, Audit{GoalID: p.GoalID, Target: TurnTarget(t.ID), Detail: auditDetail(map[string]any{
			"agent_id": p.AgentID, "turn_instance_id": t.InstanceID})}, nil
	})
}

// StopRequested tells whether someone asked to stop turn id, and who.
func (s *Store) StopRequested(ctx context.Context, turnID int64) (bool, string, error) {
	var at *time.Time
	var by string
	err := s.DB().QueryRow(ctx, `SELECT stop_requested_at, stop_requested_by FROM turn WHERE id = $1`, turnID).Scan(&at, &by)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("read stop request: %w", mapErr(err))
	}
	return at != nil, by, nil
}

// EndStoppedTurnTx ends a live turn as stopped in the caller's transaction (should-run's
// answer to a host whose turn an owner stopped).
func EndStoppedTurnTx(ctx context.Context, db DB, t Turn, now time.Time) (Turn, error) {
	return endTurnTx(ctx, db, t.ID, TurnStopped, HaltedBy(t.StopRequestedBy), "", now)
}

// TurnCard is one chat's card of a turn.
type TurnCard struct {
	TurnID        int64
	ReceiveIDType string
	ReceiveID     string
	OutboxID      int64
	Rev           int // the note revision it shows
	ShownAt       time.Time
}

// LockTurnWork locks, in the caller's transaction, up to limit turns after turn `after` (in id
// order) that may have card work now, skipping those another replica holds: a turn whose card
// is not decided yet (new), one that ended with its card not done, and a live card whose turn
// has notes it does not show or that was shown at or before staleBefore (its elapsed time to
// refresh). A sweep pages through them with after: a page whose cards all wait on their chats'
// spacing must not hide the turns behind it (with more live cards than a page, the first page
// would otherwise be the only one ever looked at).
func LockTurnWork(ctx context.Context, db DB, after int64, staleBefore time.Time, limit int) ([]Turn, error) {
	rows, err := db.Query(ctx, `SELECT `+turnCols+` FROM turn t
		WHERE t.card_state <> 'done' AND t.id > $2
		  AND (t.card_state = 'new' OR t.state <> 'live'
		       OR (t.card_state = 'live' AND EXISTS (SELECT FROM turn_card c WHERE c.turn_id = t.id
		           AND (c.rev < t.note_rev OR c.shown_at <= $3))))
		ORDER BY t.id LIMIT $1 FOR NO KEY UPDATE OF t SKIP LOCKED`, limit, after, staleBefore)
	if err != nil {
		return nil, fmt.Errorf("lock turn card work: %w", mapErr(err))
	}
	return collect(rows, "lock turn card work", scanTurn)
}

// SetTurnCardState records the card state of a turn.
func SetTurnCardState(ctx context.Context, db DB, turnID int64, state string) error {
	if _, err := db.Exec(ctx, `UPDATE turn SET card_state = $2 WHERE id = $1`, turnID, state); err != nil {
		return fmt.Errorf("set turn card state: %w", mapErr(err))
	}
	return nil
}

// ListTurnCards lists the chats a turn's card is shown in.
func ListTurnCards(ctx context.Context, db DB, turnID int64) ([]TurnCard, error) {
	rows, err := db.Query(ctx, `SELECT turn_id, receive_id_type, receive_id, outbox_id, rev, shown_at
		FROM turn_card WHERE turn_id = $1 ORDER BY receive_id`, turnID)
	if err != nil {
		return nil, fmt.Errorf("list turn cards: %w", mapErr(err))
	}
	return collect(rows, "list turn cards", func(r pgx.Row) (TurnCard, error) {
		var c TurnCard
		err := r.Scan(&c.TurnID, &c.ReceiveIDType, &c.ReceiveID, &c.OutboxID, &c.Rev, &c.ShownAt)
		return c, err
	})
}

// PutTurnCard records (or moves on) one chat's card of a turn.
func PutTurnCard(ctx context.Context, db DB, c TurnCard) error {
	idType := c.ReceiveIDType
	if idType == "" {
		idType = "chat_id"
	}
	_, err := db.Exec(ctx, `INSERT INTO turn_card (turn_id, receive_id_type, receive_id, outbox_id, rev, shown_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (turn_id, receive_id) DO UPDATE SET rev = EXCLUDED.rev, shown_at = EXCLUDED.shown_at`,
		c.TurnID, idType, c.ReceiveID, c.OutboxID, c.Rev, c.ShownAt)
	if err != nil {
		return fmt.Errorf("record turn card: %w", mapErr(err))
	}
	return nil
}

// ChatCardShownAt is the last time any turn card in a chat was posted or updated: card
// updates of one chat are spaced (the progress card refreshes at most once per 5 s per chat).
func ChatCardShownAt(ctx context.Context, db DB, receiveID string) (time.Time, error) {
	var at *time.Time
	if err := db.QueryRow(ctx, `SELECT max(shown_at) FROM turn_card WHERE receive_id = $1`, receiveID).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("read chat card time: %w", mapErr(err))
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// NextTurnCardDue is when the earliest pending progress refresh may be shown (a live card
// whose turn has newer notes than it shows), for the scheduler's sleep; ok is false when none
// waits.
func (s *Store) NextTurnCardDue(ctx context.Context) (time.Time, bool, error) {
	var at *time.Time
	err := s.DB().QueryRow(ctx, `SELECT min(c.shown_at) FROM turn t JOIN turn_card c ON c.turn_id = t.id
		WHERE t.card_state = 'live' AND (t.note_rev > c.rev OR t.state <> 'live')`).Scan(&at)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read next turn card: %w", mapErr(err))
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}

// TurnEvidence lists the evidence bound to a turn (at most limit), oldest first.
func TurnEvidence(ctx context.Context, db DB, turnID int64, limit int) ([]Evidence, error) {
	rows, err := db.Query(ctx, `SELECT `+evidenceCols+` FROM evidence WHERE turn_id = $1 ORDER BY id LIMIT $2`, turnID, limit)
	if err != nil {
		return nil, fmt.Errorf("list turn evidence: %w", mapErr(err))
	}
	return collect(rows, "list turn evidence", scanEvidence)
}

// MarkTurnProgress records that the agent's live turn moved something (an answer to a
// person counts: an inbox reply).
func MarkTurnProgress(ctx context.Context, db DB, goalID, agentID string, now time.Time) error {
	return markProgress(ctx, db, goalID, agentID, 0, now)
}
