package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeModel is a scripted local model endpoint: no model, a fixed sequence of answers. It
// speaks what the hosts' own clients send: Anthropic's Messages API (Claude Code, POST
// /v1/messages, streamed as server-sent events) and OpenAI's Responses API (Codex, POST
// /v1/responses). It keeps every request, so a test reads what the host told the model, and
// asks script what to answer next, given the conversation so far.
type fakeModel struct {
	srv    *httptest.Server
	script func(c *conversation) modelStep

	mu       sync.Mutex
	requests []string // request bodies, in order
}

// conversation is what a request says, as the script needs it.
type conversation struct {
	api   string   // "anthropic" or "openai"
	tools []string // the tool names offered (Codex: namespace__name)
	// calls and results are the tool calls made so far and their results' text, in order.
	calls   []toolCall
	results []string
}

type toolCall struct {
	name string
	args json.RawMessage
}

// modelStep is one answer: a tool call, or a final text when tool is "".
type modelStep struct {
	tool string
	args any
	text string
}

func newFakeModel(t *testing.T, script func(c *conversation) modelStep) *fakeModel {
	t.Helper()
	m := &fakeModel{script: script}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// Requests returns the request bodies so far.
func (m *fakeModel) Requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.requests...)
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusOK)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(r.URL.Path, "count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens": 100}`)
		return
	}
	m.mu.Lock()
	m.requests = append(m.requests, string(body))
	n := len(m.requests)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/messages"):
		c := parseAnthropic(body)
		writeAnthropic(w, m.script(c), n)
	case strings.HasPrefix(r.URL.Path, "/v1/responses"):
		c := parseOpenAI(body)
		writeOpenAI(w, m.script(c), n)
	default:
		http.NotFound(w, r)
	}
}

func sse(w io.Writer, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func parseAnthropic(body []byte) *conversation {
	var req struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	c := &conversation{api: "anthropic"}
	for _, tl := range req.Tools {
		c.tools = append(c.tools, tl.Name)
	}
	for _, msg := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Name    string          `json:"name"`
			Input   json.RawMessage `json:"input"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				c.calls = append(c.calls, toolCall{name: b.Name, args: b.Input})
			case "tool_result":
				c.results = append(c.results, contentText(b.Content))
			}
		}
	}
	return c
}

// contentText is a result's text: a string, or the text of its text blocks.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

func writeAnthropic(w io.Writer, step modelStep, n int) {
	id := fmt.Sprintf("msg_%d", n)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": "claude-scripted", "content": []any{},
		"stop_reason": nil, "usage": map[string]int{"input_tokens": 1, "output_tokens": 1}}})
	stop := "end_turn"
	if step.tool != "" {
		args, _ := json.Marshal(step.args)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": step.tool, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
		stop = "tool_use"
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": step.text}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop},
		"usage": map[string]int{"output_tokens": 1}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func parseOpenAI(body []byte) *conversation {
	var req struct {
		Tools []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
		Input []struct {
			Type      string          `json:"type"`
			Name      string          `json:"name"`
			Namespace string          `json:"namespace"`
			Arguments string          `json:"arguments"`
			Output    json.RawMessage `json:"output"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	c := &conversation{api: "openai"}
	for _, tl := range req.Tools {
		c.tools = append(c.tools, tl.Name)
		for _, inner := range tl.Tools {
			c.tools = append(c.tools, tl.Name+"__"+inner.Name)
		}
	}
	for _, it := range req.Input {
		switch it.Type {
		case "function_call":
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + "__" + it.Name
			}
			c.calls = append(c.calls, toolCall{name: name, args: json.RawMessage(it.Arguments)})
		case "function_call_output":
			c.results = append(c.results, contentText(it.Output))
		}
	}
	return c
}

func writeOpenAI(w io.Writer, step modelStep, n int) {
	rid := fmt.Sprintf("resp_%d", n)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": rid}})
	var item map[string]any
	if step.tool != "" {
		args, _ := json.Marshal(step.args)
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": fmt.Sprintf("call_%d", n),
			"arguments": string(args), "status": "completed", "name": step.tool}
		if ns, name, ok := strings.Cut(step.tool, "__loopx__"); ok { // mcp__loopx__x: the namespace mcp__loopx, the function x
			item["namespace"], item["name"] = ns+"__loopx", name
		}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("m_%d", n), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": step.text}}}
	}
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": rid,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
			"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}}})
}

// loopxCalls are the conversation's calls of loopx tools (short names) and their results.
func (c *conversation) loopxCalls() (names []string, results []string) {
	for i, call := range c.calls {
		if _, name, ok := strings.Cut(call.name, "mcp__loopx__"); ok && i < len(c.results) {
			names = append(names, name)
			results = append(results, c.results[i])
		}
	}
	return names, results
}

func (c *conversation) offers(tool string) bool {
	for _, t := range c.tools {
		if t == tool {
			return true
		}
	}
	return false
}

func (c *conversation) called(tool string) bool {
	for _, call := range c.calls {
		if call.name == tool {
			return true
		}
	}
	return false
}

// jsonIn is the first JSON object in a tool result's text (Codex puts a header before it).
func jsonIn(text string) map[string]any {
	for i := strings.Index(text, "{"); i >= 0; {
		var m map[string]any
		if json.NewDecoder(strings.NewReader(text[i:])).Decode(&m) == nil {
			return m
		}
		j := strings.Index(text[i+1:], "{")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return nil
}

// loopScript does what the /loopx steps say for task: todo_add (claim), should_run with its
// todo_id; on a skip it tells the user the next_step and stops; on a run it records evidence
// for the turn's todo, refresh_state and spend_slot. Claude Code defers MCP tools: the script
// first loads them with ToolSearch.
func loopScript(task string) func(c *conversation) modelStep {
	const p = "mcp__loopx__"
	return func(c *conversation) modelStep {
		if c.api == "anthropic" && !c.offers(p+"todo_add") && c.offers("ToolSearch") && !c.called("ToolSearch") {
			return modelStep{tool: "ToolSearch", args: map[string]any{"query": "select:" + p + "todo_add," + p + "should_run," +
				p + "acknowledge," + p + "evidence_add," + p + "refresh_state," + p + "spend_slot", "max_results": 6}}
		}
		names, results := c.loopxCalls()
		switch len(names) {
		case 0:
			return modelStep{tool: p + "todo_add", args: map[string]any{"text": task, "claim": true}}
		case 1:
			todo, _ := jsonIn(results[0])["todo"].(map[string]any)
			return modelStep{tool: p + "should_run", args: map[string]any{"todo_id": todo["todo_id"]}}
		}
		d := jsonIn(results[1])
		if run, _ := d["should_run"].(bool); !run {
			return modelStep{text: fmt.Sprintf("LoopX did not open a turn: %v", d["next_step"])}
		}
		// Step 3: a continuation is read, then acknowledged.
		if cont, _ := d["continuation"].(map[string]any); cont != nil && !slices.Contains(names, "acknowledge") {
			return modelStep{tool: p + "acknowledge", args: map[string]any{"handoff_id": cont["handoff_id"]}}
		}
		switch names[len(names)-1] {
		case "should_run", "acknowledge":
			turn, _ := d["your_turn"].(map[string]any)
			return modelStep{tool: p + "evidence_add", args: map[string]any{"todo_id": turn["todo_id"], "summary": "did: " + task}}
		case "evidence_add":
			return modelStep{tool: p + "refresh_state", args: map[string]any{"next_action": "review " + task}}
		case "refresh_state":
			return modelStep{tool: p + "spend_slot", args: map[string]any{}}
		}
		return modelStep{text: "Turn done and spent."}
	}
}
