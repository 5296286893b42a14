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

// needName names a need for the word lists (help.who.<name>).
func needName(n need) string {
	switch n {
	case needMember:
		return "member"
	case needOwner:
		return "owner"
	case needChat:
		return "chat"
	}
	return "anyone"
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

// Needs is the role each command needs, by name, and "message" for a message to an agent
// (/queue and /steer too): the table other surfaces that act on goals (the workspace) must
// agree with. needAnyone and needChat commands are not about one goal and are left out.
func Needs() map[string]store.Role {
	out := map[string]store.Role{"message": store.RoleMember}
	for _, c := range commandTable() {
		switch c.need {
		case needMember:
			out[c.name] = store.RoleMember
		case needOwner:
			out[c.name] = store.RoleOwner
		}
	}
	return out
}
