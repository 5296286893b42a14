package api

import (
	"context"

	"github.com/jackc/pgx/v5"

	"loopx/router"
	"loopx/store"
)

// Gate cards: a gate asked, answered or cancelled through the API is announced in chat the
// same way as one answered from chat, by the router's renderers, inside the operation's
// transaction (the outbox rows commit with the gate).

// gateTx runs a gate operation in a transaction its card renderer shares (store.InTx): the
// renderer reads goal, bindings and earlier cards through it, so a gate call holds one pool
// connection, never two at once.
func (s *Server) gateTx(ctx context.Context, op func(ctx context.Context) (store.Gate, error)) (store.Gate, error) {
	var g store.Gate
	err := s.st.InTx(ctx, func(ctx context.Context, _ pgx.Tx) error {
		var err error
		g, err = op(ctx)
		return err
	})
	return g, err
}

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
