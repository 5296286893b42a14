package sandbox

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Platform limits the sandbox enforces, as Lark documents them.
const (
	MaxTextBytes = 150 * 1024 // text message content
	MaxCardBytes = 30 * 1024  // card (interactive) and post content
	MaxUUIDLen   = 50
	UUIDWindow   = time.Hour
	// ClickTokenTTL and ClickTokenUses bound the delayed card update token of a click.
	ClickTokenTTL  = 30 * time.Minute
	ClickTokenUses = 2
	// PatchPerMessage is the most PATCHes one message accepts per clock second.
	PatchPerMessage = 5
)

// sweepAt is the size at which the uuid and click-token maps drop expired entries.
const sweepAt = 4096

func knownMsgType(t string) bool {
	switch t {
	case "text", "post", "interactive", "image", "file", "audio", "media", "sticker", "share_chat", "share_user", "system":
		return true
	}
	return false
}

func badRequest(format string, args ...any) answer {
	return larkErr(http.StatusBadRequest, CodeBadRequest, format, args...)
}

func recalled(id string) answer {
	return larkErr(http.StatusBadRequest, CodeMessageRecalled, "message %s was recalled or does not exist", id)
}

func notInChat(chatID string) answer {
	return larkErr(http.StatusBadRequest, CodeBotNotInChat, "Bot is not in the chat %s", chatID)
}

// checkContent validates a message body as Lark does: a known msg_type and a JSON object
// content within the size limit of its type.
func checkContent(msgType, content string) (answer, bool) {
	if msgType == "" {
		return badRequest("msg_type is required"), false
	}
	if !knownMsgType(msgType) {
		return badRequest("msg_type %q is not a Lark message type", msgType), false
	}
	if content == "" {
		return badRequest("content is required"), false
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(content), &obj); err != nil {
		return badRequest("content must be a JSON object encoded as a string: %v", err), false
	}
	limit := MaxCardBytes
	if msgType == "text" {
		limit = MaxTextBytes
		if _, isText := obj["text"].(string); !isText {
			return badRequest(`content of a text message must be {"text":"..."}`), false
		}
	}
	if len(content) > limit {
		return larkErr(http.StatusBadRequest, CodeContentTooLong, "content of a %s message is %d bytes, the limit is %d", msgType, len(content), limit), false
	}
	return answer{}, true
}

// updateMulti reports whether a card allows shared updates (config.update_multi). Template
// cards carry the flag in the template, which the sandbox cannot see, so they pass.
func updateMulti(card string) bool {
	var c struct {
		Type   string `json:"type"`
		Config struct {
			UpdateMulti bool `json:"update_multi"`
		} `json:"config"`
	}
	if json.Unmarshal([]byte(card), &c) != nil {
		return false
	}
	return c.Type == "template" || c.Config.UpdateMulti
}

type sendBody struct {
	ReceiveID     string `json:"receive_id"`
	MsgType       string `json:"msg_type"`
	Content       string `json:"content"`
	UUID          string `json:"uuid"`
	ReplyInThread bool   `json:"reply_in_thread"`
}

func parseSend(body []byte) (sendBody, answer, bool) {
	var req sendBody
	if err := json.Unmarshal(body, &req); err != nil {
		return req, badRequest("body is not JSON: %v", err), false
	}
	if a, good := checkContent(req.MsgType, req.Content); !good {
		return req, a, false
	}
	if len(req.UUID) > MaxUUIDLen {
		return req, badRequest("uuid is %d characters, the limit is %d", len(req.UUID), MaxUUIDLen), false
	}
	return req, answer{}, true
}

// dedupeLocked returns the message an earlier send with the same uuid created within the
// last hour.
func (s *Sandbox) dedupeLocked(uuid string) (*Message, bool) {
	if uuid == "" {
		return nil, false
	}
	e, found := s.uuids[uuid]
	if !found || s.now().Sub(e.at) >= UUIDWindow {
		return nil, false
	}
	m := s.messages[e.messageID]
	return m, m != nil
}

func (s *Sandbox) newBotMessageLocked(c *chat, req sendBody) *Message {
	now := s.now()
	m := &Message{
		ID: s.nextIDLocked("om_"), ChatID: c.id, SenderType: SenderApp, SenderID: s.opts.BotOpenID,
		MsgType: req.MsgType, Content: req.Content, UUID: req.UUID, CreatedAt: now, UpdatedAt: now,
	}
	if req.UUID != "" {
		if len(s.uuids) >= sweepAt {
			for k, e := range s.uuids {
				if now.Sub(e.at) >= UUIDWindow {
					delete(s.uuids, k)
				}
			}
		}
		s.uuids[req.UUID] = uuidEntry{messageID: m.ID, at: now}
	}
	return m
}

func (s *Sandbox) createMessage(r *http.Request, body []byte) answer {
	idType := r.URL.Query().Get("receive_id_type")
	if idType != "chat_id" && idType != "open_id" {
		return badRequest("receive_id_type %q: the sandbox supports chat_id and open_id", idType)
	}
	req, a, good := parseSend(body)
	if !good {
		return a
	}
	if req.ReceiveID == "" {
		return badRequest("receive_id is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, dup := s.dedupeLocked(req.UUID); dup {
		return ok(s.viewLocked(m))
	}
	var c *chat
	if idType == "chat_id" {
		c = s.chats[req.ReceiveID]
		if c == nil || !c.botIn {
			return notInChat(req.ReceiveID)
		}
	} else {
		c = s.p2pChatLocked(req.ReceiveID)
	}
	if a, good := s.checkBotFileLocked(req.MsgType, req.Content); !good {
		return a
	}
	if a, admitted := s.admitSendLocked(c); !admitted {
		return a
	}
	m := s.newBotMessageLocked(c, req)
	s.storeMessageLocked(c, m)
	s.log.Debug("sandbox: bot sent", "chat_id", c.id, "message_id", m.ID, "msg_type", m.MsgType)
	return ok(s.viewLocked(m))
}

// p2pChatLocked returns the one-to-one chat of the bot with a user, creating it as Lark does
// on the first message.
func (s *Sandbox) p2pChatLocked(openID string) *chat {
	id := "oc_p2p_" + openID
	if c := s.chats[id]; c != nil {
		return c
	}
	return s.addChatLocked(id, ChatP2P, openID)
}

func (s *Sandbox) replyMessage(r *http.Request, body []byte) answer {
	id := r.PathValue("message_id")
	req, a, good := parseSend(body)
	if !good {
		return a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, dup := s.dedupeLocked(req.UUID); dup {
		return ok(s.viewLocked(m))
	}
	target := s.messages[id]
	if target == nil || target.Recalled {
		return recalled(id)
	}
	c := s.chats[target.ChatID]
	if !c.botIn {
		return notInChat(c.id)
	}
	if a, good := s.checkBotFileLocked(req.MsgType, req.Content); !good {
		return a
	}
	if a, admitted := s.admitSendLocked(c); !admitted {
		return a
	}
	root := target.RootID
	if root == "" {
		root = target.ID
	}
	thread := target.ThreadID
	if thread == "" && req.ReplyInThread {
		thread = s.nextIDLocked("omt_")
		if rm := s.messages[root]; rm != nil {
			rm.ThreadID = thread
			s.touchLocked(rm)
		}
	}
	m := s.newBotMessageLocked(c, req)
	m.RootID, m.ParentID, m.ThreadID = root, target.ID, thread
	s.storeMessageLocked(c, m)
	return ok(s.viewLocked(m))
}

// ownMessageLocked finds a live message the bot sent.
func (s *Sandbox) ownMessageLocked(id string) (*Message, answer, bool) {
	m := s.messages[id]
	if m == nil || m.Recalled {
		return nil, recalled(id), false
	}
	if m.SenderType != SenderApp {
		return nil, badRequest("message %s was sent by a user; the bot may change only its own messages", id), false
	}
	return m, answer{}, true
}

func (s *Sandbox) patchMessage(r *http.Request, body []byte) answer {
	id := r.PathValue("message_id")
	var req struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("body is not JSON: %v", err)
	}
	if a, good := checkContent("interactive", req.Content); !good {
		return a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, a, good := s.ownMessageLocked(id)
	if !good {
		return a
	}
	if m.MsgType != "interactive" {
		return badRequest("message %s is %s: PATCH updates cards only (use PUT for text and post)", id, m.MsgType)
	}
	if !updateMulti(m.Content) || !updateMulti(req.Content) {
		return badRequest("card of message %s: config.update_multi must be true in the stored and the new card", id)
	}
	pr := s.patches[id]
	if pr == nil {
		pr = &rateStat{}
		s.patches[id] = pr
	}
	pr.roll(s.now().Unix())
	if pr.accepted >= PatchPerMessage {
		pr.count(false)
		a := larkErr(http.StatusTooManyRequests, CodeRateLimited, "request trigger frequency limit: at most %d updates per second to one message", PatchPerMessage)
		a.headers = map[string]string{"x-ogw-ratelimit-limit": strconv.Itoa(PatchPerMessage), "x-ogw-ratelimit-reset": "1"}
		return a
	}
	pr.count(true)
	if c := s.chats[m.ChatID]; c != nil {
		s.countUpdateLocked(c)
	}
	s.replaceContentLocked(m, "interactive", req.Content)
	return ok(map[string]any{})
}

func (s *Sandbox) replaceContentLocked(m *Message, msgType, content string) {
	m.MsgType, m.Content, m.Updated, m.UpdatedAt = msgType, content, true, s.now()
	s.touchLocked(m)
}

func (s *Sandbox) updateMessage(r *http.Request, body []byte) answer {
	id := r.PathValue("message_id")
	var req sendBody
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("body is not JSON: %v", err)
	}
	if req.MsgType != "text" && req.MsgType != "post" {
		return badRequest("msg_type %q: PUT edits text and post messages only (use PATCH for cards)", req.MsgType)
	}
	if a, good := checkContent(req.MsgType, req.Content); !good {
		return a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, a, good := s.ownMessageLocked(id)
	if !good {
		return a
	}
	if m.MsgType != "text" && m.MsgType != "post" {
		return badRequest("message %s is %s: PUT edits text and post messages only", id, m.MsgType)
	}
	s.replaceContentLocked(m, req.MsgType, req.Content)
	return ok(s.viewLocked(m))
}

func (s *Sandbox) getMessage(r *http.Request, body []byte) answer {
	id := r.PathValue("message_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[id]
	if m == nil {
		return recalled(id)
	}
	return ok(map[string]any{"items": []any{s.viewLocked(m)}})
}

func (s *Sandbox) listMessages(r *http.Request, body []byte) answer {
	q := r.URL.Query()
	if q.Get("container_id_type") != "chat" {
		return badRequest("container_id_type %q: must be chat", q.Get("container_id_type"))
	}
	chatID := q.Get("container_id")
	if chatID == "" {
		return badRequest("container_id is required")
	}
	size := 20
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 50 {
			return badRequest("page_size %q: must be 1 to 50", v)
		}
		size = n
	}
	offset := 0
	if v := q.Get("page_token"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("page_token %q is not a token this API returned", v)
		}
		offset = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil || !c.botIn {
		return notInChat(chatID)
	}
	ids := slices.Clone(c.messages)
	if q.Get("sort_type") == "ByCreateTimeDesc" {
		slices.Reverse(ids)
	}
	items := []any{}
	for i := offset; i < len(ids) && len(items) < size; i++ {
		items = append(items, s.viewLocked(s.messages[ids[i]]))
	}
	next := offset + len(items)
	// Lark omits page_token on the last page; the SDK's iterator stops only then.
	data := map[string]any{"items": items, "has_more": next < len(ids)}
	if next < len(ids) {
		data["page_token"] = strconv.Itoa(next)
	}
	return ok(data)
}

func (s *Sandbox) deleteMessage(r *http.Request, body []byte) answer {
	id := r.PathValue("message_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	m, a, good := s.ownMessageLocked(id)
	if !good {
		return a
	}
	m.Recalled, m.UpdatedAt = true, s.now()
	s.touchLocked(m)
	return ok(map[string]any{})
}

func (s *Sandbox) reactionView(r Reaction) map[string]any {
	return map[string]any{
		"reaction_id":   r.ID,
		"operator":      map[string]any{"operator_id": r.OperatorID, "operator_type": r.OperatorType},
		"action_time":   msString(r.At),
		"reaction_type": map[string]any{"emoji_type": r.EmojiType},
	}
}

func (s *Sandbox) createReaction(r *http.Request, body []byte) answer {
	id := r.PathValue("message_id")
	var req struct {
		ReactionType struct {
			EmojiType string `json:"emoji_type"`
		} `json:"reaction_type"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("body is not JSON: %v", err)
	}
	if req.ReactionType.EmojiType == "" {
		return badRequest("reaction_type.emoji_type is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[id]
	if m == nil || m.Recalled {
		return recalled(id)
	}
	rc := Reaction{ID: s.nextIDLocked("rc_"), EmojiType: req.ReactionType.EmojiType, OperatorType: SenderApp, OperatorID: s.opts.AppID, At: s.now()}
	m.Reactions = append(m.Reactions, rc)
	s.touchLocked(m)
	return ok(s.reactionView(rc))
}

// listReactions answers GET .../reactions: the message's reactions, oldest first, of one
// emoji when reaction_type is given, page_size (default 20, at most 50) at a time.
func (s *Sandbox) listReactions(r *http.Request, body []byte) answer {
	id := r.PathValue("message_id")
	q := r.URL.Query()
	size := 20
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 50 {
			return badRequest("page_size %q is not 1 to 50", v)
		}
		size = n
	}
	start := 0
	if v := q.Get("page_token"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("page_token %q is not one this sandbox issued", v)
		}
		start = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[id]
	if m == nil || m.Recalled {
		return recalled(id)
	}
	var all []map[string]any
	for _, rc := range m.Reactions {
		if t := q.Get("reaction_type"); t == "" || rc.EmojiType == t {
			all = append(all, s.reactionView(rc))
		}
	}
	end := min(start+size, len(all))
	start = min(start, end)
	data := map[string]any{"items": all[start:end], "has_more": end < len(all)}
	if end < len(all) {
		data["page_token"] = strconv.Itoa(end)
	}
	return ok(data)
}

func (s *Sandbox) deleteReaction(r *http.Request, body []byte) answer {
	id, rid := r.PathValue("message_id"), r.PathValue("reaction_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[id]
	if m == nil || m.Recalled {
		return recalled(id)
	}
	i := slices.IndexFunc(m.Reactions, func(rc Reaction) bool { return rc.ID == rid })
	if i < 0 || m.Reactions[i].OperatorType != SenderApp {
		return badRequest("reaction %s of the bot is not on message %s", rid, id)
	}
	rc := m.Reactions[i]
	m.Reactions = slices.Delete(m.Reactions, i, i+1)
	s.touchLocked(m)
	return ok(s.reactionView(rc))
}

// cardUpdate is the delayed update after a click: the click's token, valid 30 min, works
// twice. An update sent before the callback was answered is reverted when the answer lands,
// as in Lark.
func (s *Sandbox) cardUpdate(r *http.Request, body []byte) answer {
	var req struct {
		Token string                     `json:"token"`
		Card  map[string]json.RawMessage `json:"card"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("body is not JSON {token, card}: %v", err)
	}
	if req.Token == "" {
		return badRequest("token is required")
	}
	if req.Card == nil {
		return badRequest("card is required and must be a JSON object")
	}
	delete(req.Card, "open_ids")
	card, err := json.Marshal(req.Card)
	if err != nil {
		return badRequest("card: %v", err)
	}
	if a, good := checkContent("interactive", string(card)); !good {
		return a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ct := s.clicks[req.Token]
	if ct == nil || !s.now().Before(ct.expires) {
		return badRequest("token %q is unknown or older than 30 minutes", req.Token)
	}
	if ct.uses >= ClickTokenUses {
		return badRequest("token %q was already used %d times", req.Token, ClickTokenUses)
	}
	m := s.messages[ct.messageID]
	if m == nil || m.Recalled {
		return recalled(ct.messageID)
	}
	ct.uses++
	if !ct.answered {
		ct.early = true
		s.log.Warn("sandbox: card update sent before the callback was answered; Lark reverts it", "message_id", m.ID)
	}
	s.replaceContentLocked(m, "interactive", string(card))
	return answer{status: http.StatusOK, body: map[string]any{"code": 0, "msg": "success"}}
}
