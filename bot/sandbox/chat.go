package sandbox

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServeAddr is where `loopx serve` runs the sandbox unless LOOPX_SANDBOX_ADDR says
// otherwise (New's own default, DefaultAddr, is any free port).
const ServeAddr = "127.0.0.1:7378"

// DefaultSandboxURL is where `loopx chat` looks for the sandbox when nothing else says
// where it is.
const DefaultSandboxURL = "http://" + ServeAddr

// ChatOptions configure RunChat.
type ChatOptions struct {
	URL      string        // the sandbox; default DefaultSandboxURL
	Token    string        // the control token, "" for none
	As       string        // the user's open_id; default the sandbox's demo user (an owner)
	Chat     string        // the chat; default the sandbox's default group chat
	History  int           // messages shown on start and on /chat; default 10
	PollWait time.Duration // long-poll wait; default 25s
	// Color styles card markdown with ANSI escapes (bold, italic, code, links); without it
	// the markup is dropped and the text left plain. Set it for a terminal only.
	Color bool
}

const chatHelp = `Type a message and press Enter to send it to the bot (in a group it mentions the bot).
Slash commands other than these go to the bot as text (try /help).
  /click <msg#> <button#>   click a card button
  /thread <msg#> <text>     reply in the thread of a message
  /reply <msg#> <text>      reply to a message (no thread)
  /file <path> [caption]    send a file (an image is shown as one; in a group it mentions the bot)
  /as <open_id>             speak as another user (e.g. ou_stranger)
  /chat <chat_id> [p2p|group]  switch chat (created when you first speak)
  /dm                       switch to your one-to-one chat with the bot
  /chats                    list chats
  /?                        this help
  /quit                     leave`

// RunChat is the `loopx chat` terminal client: it reads lines from in, sends them to the
// sandbox as the user, and writes the chat (bot messages, cards with numbered buttons,
// toasts) to out until /quit, the end of in, or ctx ends. When in is an io.Closer it is
// closed on ctx end so the read returns.
func RunChat(ctx context.Context, opts ChatOptions, in io.Reader, out io.Writer) error {
	opts.URL = cmp.Or(opts.URL, DefaultSandboxURL)
	if opts.History <= 0 {
		opts.History = 10
	}
	if opts.PollWait <= 0 {
		opts.PollWait = 25 * time.Second
	}
	cli, err := NewClient(opts.URL, opts.Token)
	if err != nil {
		return fmt.Errorf("run chat: %w", err)
	}
	info, err := cli.Info(ctx)
	var ce *ControlError
	if errors.As(err, &ce) && ce.Status == http.StatusUnauthorized {
		return fmt.Errorf("run chat: the sandbox at %s wants its control token: set LOOPX_SANDBOX_TOKEN to the LOOPX_SANDBOX_TOKEN of loopx serve: %w", opts.URL, err)
	}
	if err != nil {
		return fmt.Errorf("run chat: reach the sandbox at %s (is `loopx serve --sandbox` running? set LOOPX_SANDBOX_URL): %w", opts.URL, err)
	}
	s := &chatSession{cli: cli, out: out, info: info, opts: opts, nums: map[string]int{}, noticed: map[string]bool{},
		shown: map[string]string{}, views: map[string]MessageView{},
		user: cmp.Or(opts.As, info.DemoUserOpenID), chat: cmp.Or(opts.Chat, info.DefaultChatID)}
	s.printf("Lark sandbox at %s. You are %s in chat %s. Type /? for help, /quit to leave.\n", opts.URL, s.user, s.chat)
	if err := s.switchChat(ctx, s.chat, ""); err != nil {
		return fmt.Errorf("run chat: %w", err)
	}
	s.startCursor = s.cursor

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.poll(ctx)
	}()
	if c, isCloser := in.(io.Closer); isCloser {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ctx.Done()
			_ = c.Close()
		}()
	}

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), MaxTextBytes)
	for sc.Scan() {
		if quit := s.handle(ctx, strings.TrimSpace(sc.Text())); quit {
			return nil
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("run chat: read input: %w", err)
	}
	return nil
}

type chatSession struct {
	cli  *Client
	opts ChatOptions
	info Info

	mu          sync.Mutex // guards the fields below and writes to out
	out         io.Writer
	user        string
	chat        string
	chatType    ChatType
	cursor      int64
	gen         int // bumped on /chat so a poll of the old chat is dropped
	cancel      context.CancelFunc
	nums        map[string]int         // message id → number shown
	noticed     map[string]bool        // messages of other chats already announced
	startCursor int64                  // messages created before the session are not announced
	ids         []string               // number-1 → message id
	shown       map[string]string      // message id → what was last printed of it
	views       map[string]MessageView // message id → its last view, for /click
}

func (s *chatSession) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format, args...)
}

// switchChat shows the last messages of chatID and makes it the chat polled and posted to.
func (s *chatSession) switchChat(ctx context.Context, chatID string, typ ChatType) error {
	page, err := s.cli.Messages(ctx, chatID, 0, s.opts.History, 0)
	if err != nil {
		return fmt.Errorf("show chat %s: %w", chatID, err)
	}
	if typ == "" {
		typ = ChatGroup // a chat created by speaking in it is a group
		chats, err := s.cli.Chats(ctx)
		if err != nil {
			return fmt.Errorf("show chat %s: %w", chatID, err)
		}
		for _, c := range chats {
			if c.ID == chatID {
				typ = c.Type
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chat, s.chatType, s.cursor = chatID, typ, page.Cursor
	s.gen++
	if s.cancel != nil {
		s.cancel()
	}
	if len(page.Messages) == 0 {
		fmt.Fprintf(s.out, "(no messages in %s yet)\n", chatID)
	}
	for _, m := range page.Messages {
		s.printLocked(m, true)
	}
	return nil
}

// poll long-polls the current chat and prints what changed, until ctx ends.
func (s *chatSession) poll(ctx context.Context) {
	failing := false
	for ctx.Err() == nil {
		s.mu.Lock()
		chat, cursor, gen := s.chat, s.cursor, s.gen
		pctx, cancel := context.WithCancel(ctx)
		s.cancel = cancel
		s.mu.Unlock()
		// All chats: the current one is shown, the others only noticed.
		page, err := s.cli.Messages(pctx, "", cursor, 0, s.opts.PollWait)
		switched := pctx.Err() != nil
		cancel()
		if err != nil {
			if ctx.Err() != nil || switched {
				continue
			}
			if !failing {
				s.printf("! lost the sandbox: %v (retrying)\n", err)
				failing = true
			}
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		if failing {
			s.printf("! sandbox reachable again\n")
			failing = false
		}
		s.mu.Lock()
		if gen == s.gen {
			for _, m := range page.Messages {
				if m.ChatID == chat {
					s.printLocked(m, false)
				} else {
					s.noticeLocked(m)
				}
			}
			s.cursor = page.Cursor
		}
		s.mu.Unlock()
	}
}

func (s *chatSession) label(openID string) string {
	if openID == s.user {
		return openID + " (you)"
	}
	return openID
}

// noticeLocked announces, once, a new message in a chat other than the current one.
func (s *chatSession) noticeLocked(m MessageView) {
	if s.noticed[m.MessageID] || m.SenderID == s.user || m.Seq <= s.startCursor {
		return
	}
	s.noticed[m.MessageID] = true
	who := m.SenderID
	if m.SenderType == SenderApp {
		who = s.info.BotName
	}
	summary := m.Text
	if m.Card != nil {
		summary = cmp.Or(m.Card.Title, "a card")
	}
	if i := strings.IndexByte(summary, '\n'); i >= 0 {
		summary = summary[:i] + " …"
	}
	fmt.Fprintf(s.out, "* new in %s from %s: %s   (/chat %s)\n", m.ChatID, who, atNames(summary), m.ChatID)
}

// printLocked writes one message; a message shown before keeps its number. A live change is
// marked (updated: its content changed; changed: a reaction, a recall) and printed only when
// what it shows changed: a card the bot answers a click with and then also updates to the
// same content is printed once. History shows only whether the content was ever edited.
func (s *chatSession) printLocked(m MessageView, history bool) {
	n, seen := s.nums[m.MessageID]
	if !seen {
		s.ids = append(s.ids, m.MessageID)
		n = len(s.ids)
		s.nums[m.MessageID] = n
	}
	s.views[m.MessageID] = m
	who := s.label(m.SenderID)
	if m.SenderType == SenderApp {
		who = s.info.BotName + " (bot)"
	}
	var tags []string
	if m.ThreadID != "" || m.ParentID != "" {
		ref := m.RootID
		if ref == "" {
			ref = m.ParentID
		}
		where := "reply to"
		if m.ThreadID != "" {
			where = "in thread of"
		}
		if k, known := s.nums[ref]; known && ref != m.MessageID {
			tags = append(tags, fmt.Sprintf("%s #%d", where, k))
		} else if ref != "" && ref != m.MessageID {
			tags = append(tags, where+" an older message")
		}
	}
	if m.Recalled {
		tags = append(tags, "recalled")
	}
	body := s.bodyLocked(m)
	shown := strings.Join(tags, ", ") + "\n" + strings.Join(body, "\n")
	if seen && !history && s.shown[m.MessageID] == shown {
		return // nothing on screen would change
	}
	s.shown[m.MessageID] = shown
	switch {
	case m.Updated && (seen || history):
		tags = append(tags, "updated")
	case seen && !history:
		tags = append(tags, "changed")
	}
	tag := ""
	if len(tags) > 0 {
		tag = " [" + strings.Join(tags, ", ") + "]"
	}
	fmt.Fprintf(s.out, "#%d %s %s%s\n", n, m.CreatedAt.Local().Format("15:04:05"), who, tag)
	for _, l := range body {
		fmt.Fprintln(s.out, l)
	}
}

// bodyLocked renders what a message shows under its header line: a card's title, its
// markdown rendered for the terminal and its numbered buttons; a text with mentions as
// @names; the reactions.
func (s *chatSession) bodyLocked(m MessageView) []string {
	if m.Recalled {
		return nil
	}
	var out []string
	switch {
	case m.Card != nil:
		if m.Card.Title != "" {
			out = append(out, "   ┃ "+style{ansi: s.opts.Color}.wrap(m.Card.Title, ansiBold, ansiBoldOff))
		}
		for _, l := range m.Card.Lines {
			lines := strings.Split(atNames(l.Text), "\n")
			if l.Markdown {
				lines = RenderMarkdown(atNames(l.Text), s.opts.Color)
			}
			for _, part := range lines {
				out = append(out, "   ┃ "+part)
			}
		}
		if len(m.Card.Buttons) > 0 {
			var bs []string
			for _, b := range m.Card.Buttons {
				bs = append(bs, fmt.Sprintf("[%d %s]", b.N, b.Text))
			}
			out = append(out, fmt.Sprintf("   %s   (/click %d <button#>)", strings.Join(bs, " "), s.nums[m.MessageID]))
		}
	case m.File != nil:
		name := cmp.Or(m.File.Name, m.File.Kind)
		out = append(out, fmt.Sprintf("   📎 %s %s (%d bytes)", m.File.Kind, name, m.File.Size))
	case m.MsgType == "text":
		text := m.Text
		for _, mn := range m.Mentions {
			text = strings.ReplaceAll(text, mn.Key, "@"+cmp.Or(mn.Name, mn.OpenID))
		}
		for _, l := range strings.Split(atNames(text), "\n") {
			out = append(out, "   "+l)
		}
	case m.MsgType == "post":
		for _, l := range postLines(m.Content) {
			out = append(out, "   "+l)
		}
	default:
		out = append(out, fmt.Sprintf("   (%s) %s", m.MsgType, m.Content))
	}
	if len(m.Reactions) > 0 {
		out = append(out, "   reactions: "+strings.Join(m.Reactions, ", "))
	}
	return out
}

// messageNumber resolves a "#3" or "3" shown by this session to a message id.
func (s *chatSession) messageNumber(arg string) (string, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(arg, "#"))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.ids) == 0:
		return "", fmt.Errorf("there is no message #%s: no message is shown yet", strings.TrimPrefix(arg, "#"))
	case err != nil || n < 1 || n > len(s.ids):
		return "", fmt.Errorf("there is no message #%s: use a number shown as #N (#1 to #%d)", strings.TrimPrefix(arg, "#"), len(s.ids))
	}
	return s.ids[n-1], nil
}

// onScreen replaces the message ids in an error from the sandbox with the numbers this
// session shows them as (#3): a person never sees the ids.
func (s *chatSession) onScreen(text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.nums {
		if strings.Contains(text, id) {
			text = regexp.MustCompile(regexp.QuoteMeta(id)+`\b`).ReplaceAllString(text, "#"+strconv.Itoa(n))
		}
	}
	return text
}

// handle runs one input line; it reports true on /quit.
func (s *chatSession) handle(ctx context.Context, line string) bool {
	if line == "" {
		return false
	}
	fields := strings.Fields(line)
	rest := func(k int) string {
		// The text after the first k words, spacing kept.
		t := line
		for range k {
			t = strings.TrimSpace(t)
			if i := strings.IndexAny(t, " \t"); i >= 0 {
				t = t[i:]
			} else {
				t = ""
			}
		}
		return strings.TrimSpace(t)
	}
	var err error
	switch fields[0] {
	case "/quit", "/exit":
		return true
	case "/?":
		s.printf("%s\n", chatHelp)
	case "/as":
		if len(fields) != 2 {
			err = errors.New("usage: /as <open_id>")
			break
		}
		s.mu.Lock()
		s.user = fields[1]
		s.mu.Unlock()
		s.printf("* you are now %s\n", fields[1])
	case "/chat":
		if len(fields) < 2 || len(fields) > 3 {
			err = errors.New("usage: /chat <chat_id> [p2p|group]")
			break
		}
		typ := ChatType("")
		if len(fields) == 3 {
			typ = ChatType(fields[2])
			if typ != ChatP2P && typ != ChatGroup {
				err = fmt.Errorf("chat type %q: use p2p or group", fields[2])
				break
			}
		}
		if err = s.switchChat(ctx, fields[1], typ); err == nil {
			s.printf("* now in chat %s\n", fields[1])
		}
	case "/dm":
		s.mu.Lock()
		id := "oc_p2p_" + s.user
		s.mu.Unlock()
		if err = s.switchChat(ctx, id, ChatP2P); err == nil {
			s.printf("* now in your one-to-one chat with the bot (%s)\n", id)
		}
	case "/chats":
		var chats []ChatInfo
		if chats, err = s.cli.Chats(ctx); err == nil {
			for _, c := range chats {
				s.printf("  %s (%s) %d messages %s\n", c.ID, c.Type, c.Messages, c.Name)
			}
		}
	case "/click":
		err = s.click(ctx, fields)
	case "/file":
		if len(fields) < 2 {
			err = errors.New("usage: /file <path> [caption]")
			break
		}
		err = s.sendFile(ctx, fields[1], rest(2))
	case "/thread", "/reply":
		if len(fields) < 3 {
			err = fmt.Errorf("usage: %s <msg#> <text>", fields[0])
			break
		}
		var id string
		if id, err = s.messageNumber(fields[1]); err == nil {
			err = s.post(ctx, rest(2), id, fields[0] == "/thread")
		}
	default:
		err = s.post(ctx, line, "", false)
	}
	if err != nil {
		s.printf("! %s\n", s.onScreen(err.Error()))
	}
	return false
}

func (s *chatSession) click(ctx context.Context, fields []string) error {
	if len(fields) != 3 {
		return errors.New("usage: /click <msg#> <button#>")
	}
	id, err := s.messageNumber(fields[1])
	if err != nil {
		return err
	}
	b, err := strconv.Atoi(strings.Trim(fields[2], "[]"))
	if err != nil {
		return fmt.Errorf("button %q: use the number shown in [N ...]", fields[2])
	}
	s.mu.Lock()
	user, v, n := s.user, s.views[id], s.nums[id]
	s.mu.Unlock()
	// Checked here against what the screen shows, so the answer speaks of #N and [N].
	switch {
	case v.Recalled:
		return fmt.Errorf("#%d was recalled: there is nothing to click", n)
	case v.Card == nil:
		return fmt.Errorf("#%d is a message, not a card: only cards have buttons", n)
	case len(v.Card.Buttons) == 0:
		return fmt.Errorf("card #%d has no buttons (an answered card has none)", n)
	case b < 1 || b > len(v.Card.Buttons):
		return fmt.Errorf("card #%d has buttons [1] to [%d]; there is no button [%d]", n, len(v.Card.Buttons), b)
	}
	ans, err := s.cli.Click(ctx, ClickRequest{MessageID: id, Button: b, OpenID: user})
	if err != nil {
		return fmt.Errorf("click: %w", err)
	}
	toast := ans.Toast.Content
	if toast == "" {
		toast = "(no toast)"
	}
	s.printf("* toast [%s]: %s\n", cmp.Or(ans.Toast.Type, "info"), toast)
	if ans.Error != "" {
		s.printf("! %s\n", s.onScreen(ans.Error))
	}
	return nil
}

func (s *chatSession) post(ctx context.Context, text, replyTo string, inThread bool) error {
	s.mu.Lock()
	req := PostRequest{ChatID: s.chat, ChatType: s.chatType, OpenID: s.user, Text: text, ReplyTo: replyTo, InThread: inThread}
	s.mu.Unlock()
	req.MentionBot = req.ChatType != ChatP2P
	ans, err := s.cli.Post(ctx, req)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if !ans.Delivered {
		s.printf("! the bot will not see this message (it is not in the chat)\n")
	}
	return nil
}

// sendFile sends the file at path as the user, with an optional caption.
func (s *chatSession) sendFile(ctx context.Context, path, caption string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the file: %w", err)
	}
	s.mu.Lock()
	req := FileRequest{ChatID: s.chat, ChatType: s.chatType, OpenID: s.user, Name: filepath.Base(path), Data: data, Caption: caption}
	s.mu.Unlock()
	req.MentionBot = req.ChatType != ChatP2P
	ans, err := s.cli.PostFile(ctx, req)
	if err != nil {
		return fmt.Errorf("send file: %w", err)
	}
	if !ans.Delivered {
		s.printf("! the bot does not see this file: in a group Lark delivers a file message only to an app that reads every group message; send images here, files in /dm\n")
	}
	return nil
}

// atNames shows Lark's mention tags as Lark clients do: <at user_id="ou_x">Name</at> (text)
// and <at id=ou_x></at> (card markdown) become @Name, or @ou_x when the tag has no name.
// postLines renders a rich-text post as a person sees it: its title, then each paragraph's
// text with @names, links and its images and files as 📎 marks. Content it cannot read is
// shown as it is.
func postLines(content string) []string {
	var p struct {
		Title   string `json:"title"`
		Content [][]struct {
			Tag      string `json:"tag"`
			Text     string `json:"text"`
			UserName string `json:"user_name"`
			UserID   string `json:"user_id"`
			Href     string `json:"href"`
			FileName string `json:"file_name"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(content), &p); err != nil || len(p.Content) == 0 {
		return []string{"(post) " + content}
	}
	var out []string
	if p.Title != "" {
		out = append(out, p.Title)
	}
	for _, para := range p.Content {
		var b strings.Builder
		for _, e := range para {
			switch e.Tag {
			case "text":
				b.WriteString(e.Text)
			case "at":
				b.WriteString("@" + cmp.Or(e.UserName, e.UserID))
			case "a":
				b.WriteString(cmp.Or(e.Text, e.Href))
				if e.Text != "" && e.Href != "" {
					b.WriteString(" (" + e.Href + ")")
				}
			case "img":
				b.WriteString("📎 image")
			case "media", "file":
				b.WriteString("📎 " + cmp.Or(e.FileName, e.Tag))
			}
		}
		if line := strings.TrimSpace(b.String()); line != "" {
			out = append(out, strings.Split(line, "\n")...)
		}
	}
	return out
}

func atNames(text string) string {
	if !strings.Contains(text, "<at ") {
		return text
	}
	re := regexp.MustCompile(`<at (?:user_)?id=["']?([^"'>\s]+)["']?\s*>([^<]*)</at>`)
	return re.ReplaceAllStringFunc(text, func(tag string) string {
		sub := re.FindStringSubmatch(tag)
		return "@" + cmp.Or(strings.TrimSpace(sub[2]), sub[1])
	})
}
