package api

import (
	"context"

	"loopx/router"
	"loopx/store"
)

// Gate cards: a gate asked, answered or cancelled through the API is announced in chat the
// same way as one answered from chat, by the router's renderers, inside the operation's
// transaction (the outbox rows commit with the gate).

func (s *Server) gateAskNotice(ctx context.Context) func(store.Gate) ([]store.OutboxInsert, error) {
	if s.tpl == nil {
		return nil
	}
	return router.GateNotice(ctx, s.st, s.tpl, "en")
}

func (s *Server) gateDoneNotice(ctx context.Context) func(store.Gate) ([]store.OutboxInsert, error) {
	if s.tpl == nil {
		return nil
	}
	return router.GateAnsweredNotice(ctx, s.st, s.tpl, "en")
}
