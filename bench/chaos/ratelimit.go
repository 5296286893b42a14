package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"loopx/bot/sandbox"
)

// RateLimitResult is the scenario of Lark pushing back: a 429 storm with
// x-ogw-ratelimit-reset, 5xx bursts and the tenant token revoked mid-run.
type RateLimitResult struct {
	Messages           int     `json:"messages"`
	Injected429        int     `json:"injected_429"`
	Injected5xx        int     `json:"injected_5xx"`
	TokenRevocations   int     `json:"token_revocations"`
	RepliesOnce        int     `json:"replies_delivered_once"`
	RepliesMissing     int     `json:"replies_missing"`
	RepliesDoubled     int     `json:"replies_doubled"`
	MaxPerChatPerSec   int     `json:"max_sends_per_chat_per_second"`
	MaxAppPerSec       int     `json:"max_sends_per_app_per_second"`
	MaxOfferedChatSec  int     `json:"max_offered_per_chat_per_second"`
	MaxOfferedAppSec   int     `json:"max_offered_per_app_per_second"`
	SandboxRateLimited int     `json:"refused_by_the_sandbox_limit"`
	TokenIssues        int     `json:"tokens_issued"`
	DrainSeconds       float64 `json:"drain_seconds"`
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func (s *suite) rateLimitScenario(ctx context.Context, res *Results) error {
	if err := s.ensureTransport(ctx, "http"); err != nil {
		return err
	}
	r := &RateLimitResult{}
	res.RateLimit = r
	const chats, perChat = 6, 40
	tokensBefore := s.sb.TokenIssues()
	r.Injected429 = 60
	s.sb.FailNext(sandbox.RouteReply, r.Injected429, sandbox.Fail{HTTP: http.StatusTooManyRequests, Code: sandbox.CodeRateLimited,
		Msg: "request trigger frequency limit", Headers: map[string]string{"x-ogw-ratelimit-limit": "50", "x-ogw-ratelimit-reset": "1"}})
	start := time.Now()
	var msgs []sent
	var ds []*sandbox.Delivery
	for i := range chats * perChat {
		if i == chats*perChat/3 {
			r.Injected5xx += 25
			s.sb.FailNext(sandbox.RouteReply, 25, sandbox.Fail{HTTP: http.StatusServiceUnavailable, Msg: "upstream busy"})
		}
		if i == chats*perChat/2 {
			s.sb.Revoke()
			r.TokenRevocations++
		}
		if i == 2*chats*perChat/3 {
			r.Injected5xx += 10
			s.sb.FailNext(sandbox.RouteReply, 10, sandbox.Fail{HTTP: http.StatusGatewayTimeout, Msg: "gateway timeout"})
		}
		chat := chatID(i % chats)
		d, err := s.sb.UserSays(chat, sandbox.ChatGroup, ownerID, "/help", sandbox.MentionBot())
		if err != nil {
			return err
		}
		msgs = append(msgs, sent{chat: chat, messageID: d.MessageID, d: d})
		ds = append(ds, d)
		time.Sleep(10 * time.Millisecond)
	}
	r.Messages = len(msgs)
	if _, failed := waitDelivered(ctx, ds); failed > 0 {
		res.check(false, "rate limit: %d /help messages not acknowledged", failed)
	}
	d, err := s.waitOutboxDrained(ctx, 4*time.Minute)
	r.DrainSeconds = time.Since(start).Seconds()
	_ = d
	if err != nil {
		res.check(false, "rate limit: %v", err)
	}
	replies := map[string]int{}
	for c := range chats {
		for _, m := range s.sb.Chat(chatID(c)).BotMessages() {
			if m.ParentID != "" {
				replies[m.ParentID]++
			}
		}
		st := s.sb.Chat(chatID(c)).Stats()
		r.MaxPerChatPerSec = max(r.MaxPerChatPerSec, st.MaxPerSecond)
		r.MaxOfferedChatSec = max(r.MaxOfferedChatSec, st.MaxAttemptsPerSecond)
		r.SandboxRateLimited += st.RateLimited
	}
	app := s.sb.AppStats()
	r.MaxAppPerSec, r.MaxOfferedAppSec = app.MaxPerSecond, app.MaxAttemptsPerSecond
	for _, m := range msgs {
		switch replies[m.messageID] {
		case 0:
			r.RepliesMissing++
			var calls []string
			for _, q := range s.sb.Requests() {
				if strings.Contains(q.Path, m.messageID) {
					calls = append(calls, fmt.Sprintf("%s %d %d", q.Route, q.Status, q.Code))
				}
			}
			st, _ := s.count(ctx, `SELECT count(*) FROM outbox WHERE reply_to = $1`, m.messageID)
			s.log.Warn("reply missing", "message_id", m.messageID, "calls", calls, "outbox_rows", st)
		case 1:
			r.RepliesOnce++
		default:
			r.RepliesDoubled++
		}
	}
	r.TokenIssues = s.sb.TokenIssues() - tokensBefore
	res.check(r.RepliesMissing == 0, "rate limit: %d replies never delivered", r.RepliesMissing)
	res.check(r.RepliesDoubled == 0, "rate limit: %d replies delivered twice", r.RepliesDoubled)
	res.check(r.MaxOfferedChatSec <= 5, "rate limit: %d sends offered to one chat in one second (Lark allows 5)", r.MaxOfferedChatSec)
	res.check(r.MaxOfferedAppSec <= 50, "rate limit: %d sends offered by the app in one second (Lark allows 50)", r.MaxOfferedAppSec)
	res.check(r.TokenIssues >= 1, "rate limit: no new tenant token after the revocation")
	return nil
}

// ensureTransport switches the replicas to transport unless they are on it already.
func (s *suite) ensureTransport(ctx context.Context, transport string) error {
	if s.transport == transport && s.allAlive() {
		return nil
	}
	if err := s.setTransport(ctx, transport); err != nil {
		return err
	}
	s.transport = transport
	return nil
}

func (s *suite) allAlive() bool {
	for _, r := range s.replicas {
		if !r.alive() {
			return false
		}
	}
	return true
}
