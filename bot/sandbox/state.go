package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Files of Options.StateDir.
const (
	stateFileName = "state.jsonl"
	stateLockName = "lock"
)

// stateVersion is written in the first line of the state file; another version is refused.
const stateVersion = 1

// compactSlack is how many lines more than twice the live records the state file may hold
// before it is rewritten: superseded lines stay bounded, rewrites stay rare.
const compactSlack = 4096

// record is one line of the state file: a header (Version), a chat, or a message, each with
// the id counter and change cursor at the time it was written, so the last line carries
// both. A later line for the same chat or message replaces the earlier one.
type record struct {
	Version int          `json:"version,omitempty"`
	Counter int64        `json:"counter"`
	Rev     int64        `json:"rev"`
	Chat    *chatRecord  `json:"chat,omitempty"`
	Message *messageJSON `json:"message,omitempty"`
}

type chatRecord struct {
	ID    string   `json:"id"`
	Type  ChatType `json:"type"`
	Name  string   `json:"name"`
	BotIn bool     `json:"bot_in"`
}

// messageJSON is Message as the state file stores it: the file's format does not follow
// changes of the Go type by accident.
type messageJSON struct {
	ID         string         `json:"id"`
	ChatID     string         `json:"chat_id"`
	Seq        int64          `json:"seq"`
	Rev        int64          `json:"rev"`
	SenderType string         `json:"sender_type"`
	SenderID   string         `json:"sender_id"`
	MsgType    string         `json:"msg_type"`
	Content    string         `json:"content"`
	RootID     string         `json:"root_id,omitempty"`
	ParentID   string         `json:"parent_id,omitempty"`
	ThreadID   string         `json:"thread_id,omitempty"`
	UUID       string         `json:"uuid,omitempty"`
	Mentions   []Mention      `json:"mentions,omitempty"`
	Reactions  []reactionJSON `json:"reactions,omitempty"`
	Recalled   bool           `json:"recalled,omitempty"`
	Updated    bool           `json:"updated,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
}

type reactionJSON struct {
	ID           string    `json:"id"`
	EmojiType    string    `json:"emoji_type"`
	OperatorType string    `json:"operator_type"`
	OperatorID   string    `json:"operator_id"`
	At           time.Time `json:"at"`
}

func toJSON(m *Message) *messageJSON {
	j := &messageJSON{ID: m.ID, ChatID: m.ChatID, Seq: m.Seq, Rev: m.Rev, SenderType: m.SenderType, SenderID: m.SenderID,
		MsgType: m.MsgType, Content: m.Content, RootID: m.RootID, ParentID: m.ParentID, ThreadID: m.ThreadID, UUID: m.UUID,
		Mentions: slices.Clone(m.Mentions), Recalled: m.Recalled, Updated: m.Updated,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	for _, r := range m.Reactions {
		j.Reactions = append(j.Reactions, reactionJSON{ID: r.ID, EmojiType: r.EmojiType, OperatorType: r.OperatorType, OperatorID: r.OperatorID, At: r.At})
	}
	return j
}

func (j *messageJSON) message() *Message {
	m := &Message{ID: j.ID, ChatID: j.ChatID, Seq: j.Seq, Rev: j.Rev, SenderType: j.SenderType, SenderID: j.SenderID,
		MsgType: j.MsgType, Content: j.Content, RootID: j.RootID, ParentID: j.ParentID, ThreadID: j.ThreadID, UUID: j.UUID,
		Mentions: j.Mentions, Recalled: j.Recalled, Updated: j.Updated, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
	for _, r := range j.Reactions {
		m.Reactions = append(m.Reactions, Reaction{ID: r.ID, EmojiType: r.EmojiType, OperatorType: r.OperatorType, OperatorID: r.OperatorID, At: r.At})
	}
	return m
}

// stateStore keeps the chat model in Options.StateDir: every change appends one line to
// state.jsonl (no fsync per line: a line written survives the process being killed, only a
// machine crash may lose the last lines); the file is rewritten compactly at open and once
// it holds more than twice the live records plus compactSlack lines. The directory is locked (flock) while the sandbox has it.
type stateStore struct {
	dir    string
	lock   *os.File
	f      *os.File
	w      *bufio.Writer
	lines  int   // lines in the file
	failed error // the first write error; the model then lives on in memory only
}

// openState locks dir and reads the model saved there into s (empty when there is none).
func (s *Sandbox) openState(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("open sandbox state: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, stateLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open sandbox state: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("open sandbox state: %s is in use by another sandbox (another loopx serve on the same LOOPX_HOME?)", dir)
		}
		return fmt.Errorf("open sandbox state: lock %s: %w", dir, err)
	}
	st := &stateStore{dir: dir, lock: lock}
	path := filepath.Join(dir, stateFileName)
	if err := s.loadState(path); err != nil {
		lock.Close()
		return fmt.Errorf("open sandbox state: %w", err)
	}
	s.state = st
	if err := s.compactLocked(); err != nil {
		s.state = nil
		lock.Close()
		return fmt.Errorf("open sandbox state: %w", err)
	}
	return nil
}

// loadState replays the state file into the model. A last line cut short (a crash while it
// was written) is dropped; any other bad line is an error naming the file and line.
func (s *Sandbox) loadState(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	lines := bytes.Split(b, []byte("\n"))
	msgs := map[string]*Message{}
	header := false
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			if i == len(lines)-1 {
				s.log.Warn("sandbox: dropped the unfinished last line of the state file", "path", path)
				break
			}
			return fmt.Errorf("%s line %d is not a state record (%v): move the file away to start the sandbox empty", path, i+1, err)
		}
		if !header && r.Version != stateVersion {
			return fmt.Errorf("%s has state version %d, this loopx reads version %d: move the file away to start the sandbox empty", path, r.Version, stateVersion)
		}
		header = true
		s.counter, s.rev = max(s.counter, r.Counter), max(s.rev, r.Rev)
		switch {
		case r.Chat != nil:
			if err := checkChat(r.Chat.ID, r.Chat.Type); err != nil {
				return fmt.Errorf("%s line %d: %w", path, i+1, err)
			}
			c := s.chats[r.Chat.ID]
			if c == nil {
				c = &chat{id: r.Chat.ID}
				s.chats[c.id] = c
				s.chatOrder = append(s.chatOrder, c.id)
			}
			c.typ, c.name, c.botIn = r.Chat.Type, r.Chat.Name, r.Chat.BotIn
		case r.Message != nil:
			if r.Message.ID == "" {
				return fmt.Errorf("%s line %d: a message without an id", path, i+1)
			}
			msgs[r.Message.ID] = r.Message.message()
		}
	}
	ordered := make([]*Message, 0, len(msgs))
	for _, m := range msgs {
		if s.chats[m.ChatID] == nil {
			return fmt.Errorf("%s: message %s belongs to chat %q, which the file does not hold", path, m.ID, m.ChatID)
		}
		ordered = append(ordered, m)
	}
	slices.SortFunc(ordered, func(a, b *Message) int { return cmpInt64(a.Seq, b.Seq) })
	now := s.now()
	for _, m := range ordered {
		s.messages[m.ID] = m
		c := s.chats[m.ChatID]
		c.messages = append(c.messages, m.ID)
		s.rev = max(s.rev, m.Rev)
		if m.UUID != "" && now.Sub(m.CreatedAt) < UUIDWindow {
			// The bot's retries after a restart still find the message their uuid made.
			s.uuids[m.UUID] = uuidEntry{messageID: m.ID, at: m.CreatedAt}
		}
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compactLocked rewrites the state file with one line per chat and message (written aside,
// then renamed into place) and reopens it for appending.
func (s *Sandbox) compactLocked() error {
	st := s.state
	path := filepath.Join(st.dir, stateFileName)
	tmp, err := os.CreateTemp(st.dir, ".state-*.jsonl")
	if err != nil {
		return fmt.Errorf("compact sandbox state: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	w := bufio.NewWriter(tmp)
	enc := json.NewEncoder(w)
	err = enc.Encode(record{Version: stateVersion, Counter: s.counter, Rev: s.rev})
	for _, id := range s.chatOrder {
		if err == nil {
			err = enc.Encode(s.chatRecordLocked(s.chats[id]))
		}
	}
	for _, id := range s.chatOrder {
		for _, mid := range s.chats[id].messages {
			if err == nil {
				err = enc.Encode(record{Counter: s.counter, Rev: s.rev, Message: toJSON(s.messages[mid])})
			}
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("compact sandbox state %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("compact sandbox state: %w", err)
	}
	if st.f != nil {
		_ = st.f.Close()
	}
	st.f, st.w, st.lines = f, bufio.NewWriter(f), 1+len(s.chats)+len(s.messages)
	return nil
}

func (s *Sandbox) chatRecordLocked(c *chat) record {
	return record{Counter: s.counter, Rev: s.rev, Chat: &chatRecord{ID: c.id, Type: c.typ, Name: c.name, BotIn: c.botIn}}
}

// saveChatLocked and saveMessageLocked append a changed chat or message to the state file.
func (s *Sandbox) saveChatLocked(c *chat) {
	if s.state != nil {
		s.appendLocked(s.chatRecordLocked(c))
	}
}

func (s *Sandbox) saveMessageLocked(m *Message) {
	if s.state != nil {
		s.appendLocked(record{Counter: s.counter, Rev: s.rev, Message: toJSON(m)})
	}
}

func (s *Sandbox) appendLocked(r record) {
	st := s.state
	if st.failed != nil {
		return
	}
	b, err := json.Marshal(r)
	if err == nil {
		b = append(b, '\n')
		_, err = st.w.Write(b)
	}
	if err == nil {
		err = st.w.Flush() // one write per change: a killed process loses nothing written
	}
	if err == nil {
		if st.lines++; st.lines > 2*(1+len(s.chats)+len(s.messages))+compactSlack {
			err = s.compactLocked()
		}
	}
	if err != nil {
		st.failed = err
		s.log.Error("sandbox: cannot write its state; changes from now on are kept in memory only", "dir", st.dir, "err", err)
	}
}

// closeState syncs and closes the state file and releases the directory.
func (s *Sandbox) closeState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	if st == nil {
		return
	}
	s.state = nil
	if st.f != nil {
		if err := st.f.Sync(); err != nil && st.failed == nil {
			s.log.Error("sandbox: sync state", "dir", st.dir, "err", err)
		}
		_ = st.f.Close()
	}
	_ = st.lock.Close()
}
