package sandbox

import (
	"net/http"
	"strconv"
	"time"
)

// ChatStats counts the sends (create + reply) offered to one chat, in windows of one clock
// second (the Unix second of the sandbox clock), the same windows the rate limit uses.
type ChatStats struct {
	Accepted             int // sends stored
	RateLimited          int // sends answered 429 by the rate limit (injected faults excluded)
	MaxPerSecond         int // most sends accepted within one second
	MaxAttemptsPerSecond int // most sends offered within one second, accepted or not
	// Updates counts card updates (PATCH) of the chat's messages; MaxWithUpdatesPerSecond is
	// the most sends and updates together accepted within one second (Lark limits updates
	// per message, the sandbox only counts them per chat).
	Updates                 int
	MaxWithUpdatesPerSecond int
}

type rateStat struct {
	sec         int64
	accepted    int
	attempts    int
	maxAccepted int
	maxAttempts int
	total       int
	limited     int
}

func (r *rateStat) roll(sec int64) {
	if r.sec != sec {
		r.sec, r.accepted, r.attempts = sec, 0, 0
	}
}

func (r *rateStat) count(accepted bool) {
	r.attempts++
	r.maxAttempts = max(r.maxAttempts, r.attempts)
	if !accepted {
		r.limited++
		return
	}
	r.accepted++
	r.total++
	r.maxAccepted = max(r.maxAccepted, r.accepted)
}

func (r *rateStat) stats() ChatStats {
	return ChatStats{Accepted: r.total, RateLimited: r.limited, MaxPerSecond: r.maxAccepted, MaxAttemptsPerSecond: r.maxAttempts}
}

// countUpdateLocked counts a card update of a message of c (accepted), and the chat's
// sends and updates together.
func (s *Sandbox) countUpdateLocked(c *chat) {
	sec := s.now().Unix()
	c.rate.roll(sec)
	c.updates.roll(sec)
	c.updates.count(true)
	c.maxCombined = max(c.maxCombined, c.rate.accepted+c.updates.accepted)
}

// countCombined records the sends and updates together after an accepted send.
func (c *chat) countCombined() {
	if c.updates.sec == c.rate.sec {
		c.maxCombined = max(c.maxCombined, c.rate.accepted+c.updates.accepted)
	} else {
		c.maxCombined = max(c.maxCombined, c.rate.accepted)
	}
}

// admitSendLocked applies Lark's per-chat and per-app send limits to one send to c. It
// counts the attempt either way and returns a 429 answer when the send must be refused.
func (s *Sandbox) admitSendLocked(c *chat) (answer, bool) {
	now := s.now()
	sec := now.Unix()
	c.rate.roll(sec)
	s.appRate.roll(sec)
	chatOK := s.opts.ChatRateLimit < 0 || c.rate.accepted < s.opts.ChatRateLimit
	appOK := s.opts.AppRateLimit < 0 || s.appRate.accepted < s.opts.AppRateLimit
	c.rate.count(chatOK && appOK)
	s.appRate.count(chatOK && appOK)
	if chatOK && appOK {
		c.countCombined()
		return answer{}, true
	}
	limit := s.opts.ChatRateLimit
	if !appOK {
		limit = s.opts.AppRateLimit
	}
	// The window ends at the next whole second; Lark sends the wait in whole seconds.
	reset := time.Unix(sec+1, 0).Sub(now)
	resetSec := int((reset + time.Second - 1) / time.Second)
	a := larkErr(http.StatusTooManyRequests, CodeRateLimited, "request trigger frequency limit")
	a.headers = map[string]string{
		"x-ogw-ratelimit-limit": strconv.Itoa(limit),
		"x-ogw-ratelimit-reset": strconv.Itoa(max(resetSec, 1)),
	}
	return a, false
}

// AppStats returns the app-wide send counters (create + reply over all chats).
func (s *Sandbox) AppStats() ChatStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appRate.stats()
}
