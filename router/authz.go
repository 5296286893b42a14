package router

import (
	"context"

	"loopx/store"
)

// who is the sender, as the kernel's role rule sees them.
func (h *handling) who() store.Person {
	return store.Person{OpenID: h.m.SenderID, Admin: h.c.admins[h.m.SenderID]}
}

// allows reports whether a role meets a command's need.
func allows(r store.Role, n need) bool {
	switch n {
	case needMember:
		return r.AtLeast(store.RoleMember)
	case needOwner:
		return r.AtLeast(store.RoleOwner)
	}
	return true
}

// refuse tells the sender who may do it instead, and audits the refusal. command is the
// slash command refused, "" for a message to an agent.
func (h *handling) refuse(ctx context.Context, action, command string, n need, tg *target) error {
	needWord := "owner"
	if n == needMember {
		needWord = "member"
	}
	if err := h.audit(ctx, action, tg.goal.ID, store.GoalTarget(tg.goal.ID), false, map[string]any{
		"reason": "not " + needWord, "role": string(tg.role),
	}); err != nil {
		return err
	}
	h.c.log.InfoContext(ctx, "chat refused", "actor", h.m.SenderID, "action", action, "goal_id", tg.goal.ID, "needs", needWord)
	return h.reply(ctx, "refused", map[string]any{
		"GoalID": tg.goal.ID, "Command": command, "Need": needWord, "Owners": tg.goal.Owners,
	}, nil)
}
