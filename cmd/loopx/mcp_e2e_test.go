package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
	"loopx/mcp"
	"loopx/store"
	"loopx/store/storetest"
)

// mcpEnv is a real loopx serve wired to a sandbox Lark, and a database pool to check it.
type mcpEnv struct {
	sb    *sandbox.Sandbox
	s     *serveProc
	pool  *pgxpool.Pool
	owner string
}

func newMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	ctx := t.Context()
	sb, err := sandbox.New(sandbox.Options{})
	require.NoError(t, err)
	sb.Start(ctx)
	t.Cleanup(sb.Close)
	dbURL := storetest.NewDatabase(t)
	pool, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := startServe(t, map[string]string{"DATABASE_URL": dbURL, "LOOPX_ADMIN_TOKEN": e2eAdminToken,
		"LARK_APP_ID": sb.AppID(), "LARK_APP_SECRET": sb.AppSecret(), "LARK_BASE_URL": sb.URL(),
		"LARK_TRANSPORT": "ws", "LOOPX_SCHEDULER": "off"})
	require.Eventually(t, func() bool { return len(sb.WSConnections()) == 1 }, 2*time.Minute, 20*time.Millisecond,
		"the bot holds its long connection")
	return &mcpEnv{sb: sb, s: s, pool: pool, owner: "ou_mcp_owner"}
}

func (e *mcpEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// goal creates a goal owned by e.owner, bound to its own sandbox group chat through the chat
// (/bind), with agent codex and one todo; it returns the chat, the agent's token and the todo.
func (e *mcpEnv) goal(t *testing.T, goal string) (chat, token string, todo int64) {
	t.Helper()
	e.s.ok(t, e2eAdminToken, "goal", "create", "--goal-id", goal, "--owner", e.owner)
	token = e.s.ok(t, e2eAdminToken, "agent", "register", "--goal-id", goal, "--agent-id", "codex")["token"].(string)
	todo = int64(e.s.ok(t, e2eAdminToken, "todo", "add", "--goal-id", goal, "--text", "write the parser", "--priority", "P1")["todo_id"].(float64))
	chat = "oc_" + strings.ReplaceAll(goal, "-", "_")
	require.NoError(t, e.sb.AddChat(chat, sandbox.ChatGroup, goal))
	d, err := e.sb.UserSays(chat, sandbox.ChatGroup, e.owner, "/bind #"+goal, sandbox.MentionBot())
	require.NoError(t, err)
	res, err := d.Wait(t.Context())
	require.NoError(t, err)
	require.True(t, res.Acked, res.Err)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM binding WHERE chat_id = $1 AND goal_id = $2`, chat, goal))
	return chat, token, todo
}

// clickGate waits for the gate's card in chat and approves it as the owner, as a person
// would in Lark.
func (e *mcpEnv) clickGate(t *testing.T, chat, question string) {
	t.Helper()
	var card sandbox.Message
	require.Eventually(t, func() bool {
		for _, m := range e.sb.Chat(chat).BotMessages() {
			if m.MsgType == "interactive" && strings.Contains(m.Content, question) {
				card = m
				return true
			}
		}
		return false
	}, 2*time.Minute, 20*time.Millisecond, "the gate card reached the chat")
	res, err := e.sb.ClickButtonN(t.Context(), card.ID, e.owner, 1) // Approve comes first
	require.NoError(t, err)
	require.Equal(t, "success", res.Toast.Type, res.Toast.Content)
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	return res
}

func toolOK[T any](t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) T {
	t.Helper()
	res := callTool(t, cs, name, args)
	require.False(t, res.IsError, "%s: %s", name, toolText(res))
	var out T
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return out
}

func toolText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// stdioSession runs `loopx mcp` as a subprocess in dir, the way a host does.
func stdioSession(t *testing.T, dir string, env ...string) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(loopxBinary(t), "mcp")
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-host", Version: "v0"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bearerRT adds an agent's bearer token to every request, as a remote host does.
type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// governedTurn drives one whole turn through the MCP tools and checks it in the database.
func governedTurn(t *testing.T, e *mcpEnv, cs *sdk.ClientSession, goal, chat string, todo int64) {
	t.Helper()
	d := toolOK[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.True(t, d.ShouldRun, d.NextStep)
	require.Equal(t, goal, d.GoalID)
	require.Equal(t, todo, d.SelectedTodo.ID)
	require.NotNil(t, d.YourTurn)
	turn := d.YourTurn.TurnInstanceID

	claimed := toolOK[mcp.TodoOut](t, cs, "todo_claim", map[string]any{"todo_id": todo})
	require.Equal(t, "codex", claimed.Todo.ClaimedBy)

	ev := map[string]any{"todo_id": todo, "summary": "parser passes 40 tests", "kind": "command", "ref": "go test ./parser"}
	first := toolOK[mcp.EvidenceOut](t, cs, "evidence_add", ev)
	retried := toolOK[mcp.EvidenceOut](t, cs, "evidence_add", ev) // the host retries the call
	require.Equal(t, first.Evidence.ID, retried.Evidence.ID)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM evidence WHERE goal_id = $1`, goal), "a retried call has one effect")

	question := "Ship the parser for " + goal + "?"
	g := toolOK[mcp.GateOut](t, cs, "gate_ask", map[string]any{"todo_id": todo, "question": question})
	require.Equal(t, store.GateOpen, g.Gate.Status)
	waiting := toolOK[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.Contains(t, waiting.Gates.Open, g.Gate.ID)

	e.clickGate(t, chat, question)

	seen := toolOK[mcp.ShouldRunOut](t, cs, "should_run", nil)
	require.Equal(t, turn, seen.YourTurn.TurnInstanceID, "the same turn goes on")
	require.NotContains(t, seen.Gates.Open, g.Gate.ID)
	require.Equal(t, g.Gate.ID, seen.RecentGates[0].ID)
	require.Equal(t, store.GateApproved, seen.RecentGates[0].Status)
	require.Equal(t, e.owner, seen.RecentGates[0].AnsweredBy)
	require.Contains(t, seen.NextStep, "approved by "+e.owner)

	toolOK[mcp.RefreshStateOut](t, cs, "refresh_state", map[string]any{"next_action": "add error messages"})
	spent := toolOK[mcp.SpendSlotOut](t, cs, "spend_slot", nil)
	require.Equal(t, 1, spent.Receipt.SpentSlots)
	require.Equal(t, turn, spent.Receipt.Turn.InstanceID)
	again := toolOK[mcp.SpendSlotOut](t, cs, "spend_slot", nil)
	require.Equal(t, spent.Receipt.Entry.ID, again.Receipt.Entry.ID)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM quota_ledger WHERE goal_id = $1 AND kind = 'slot_spent'`, goal), "one spend")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM turn WHERE goal_id = $1 AND instance_id = $2 AND state = 'ok'`, goal, turn))

	st := toolOK[map[string]any](t, cs, "goal_status", nil)
	require.Equal(t, "add error messages", dig(st, "decision", "next_action"))
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestMCPGovernedTurn drives a whole governed turn through `loopx mcp` (a subprocess over
// stdio, as a host runs it) and through /mcp on loopx serve (Streamable HTTP, an agent's
// bearer token), against a real server whose owner answers the gate in the sandbox chat.
func TestMCPGovernedTurn(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t)

	t.Run("stdio", func(t *testing.T) {
		chat, token, todo := e.goal(t, "mcp-stdio")
		project, cfg := t.TempDir(), t.TempDir()
		// The project is connected with the agent's token, which goes to the config folder.
		r := e.s.cliIn(t, project, token, []string{"LOOPX_CONFIG_DIR=" + cfg}, "connect", "--format", "json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "mcp-stdio", r.json(t)["goal_id"])
		cs := stdioSession(t, project, "LOOPX_CONFIG_DIR="+cfg) // no LOOPX_URL, no LOOPX_TOKEN
		require.Contains(t, cs.InitializeResult().Instructions, `agent "codex" on goal "mcp-stdio"`)
		governedTurn(t, e, cs, "mcp-stdio", chat, todo)
	})

	t.Run("streamable http", func(t *testing.T) {
		chat, token, todo := e.goal(t, "mcp-http")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e-remote-host", Version: "v0"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: e.s.url + "/mcp", HTTPClient: &http.Client{Transport: bearerRT(token)}}, nil)
		require.NoError(t, err)
		defer cs.Close()
		governedTurn(t, e, cs, "mcp-http", chat, todo)

		_, err = sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "v0"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: e.s.url + "/mcp", HTTPClient: &http.Client{Transport: bearerRT(e2eAdminToken)}}, nil)
		require.Error(t, err, "/mcp works as one agent: the admin token is refused")
	})

	t.Run("a token of another goal is refused with what to do", func(t *testing.T) {
		_, other, _ := e.goal(t, "mcp-other")
		project := t.TempDir()
		conn := `{"server_url": "` + e.s.url + `", "goal_id": "mcp-stdio", "agent_id": "codex"}`
		require.NoError(t, os.MkdirAll(filepath.Join(project, ".loopx"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(project, ".loopx", "connection.json"), []byte(conn), 0o644))
		cs := stdioSession(t, project, "LOOPX_TOKEN="+other, "LOOPX_CONFIG_DIR="+t.TempDir())
		res := callTool(t, cs, "should_run", nil)
		require.True(t, res.IsError)
		msg := toolText(res)
		require.Contains(t, msg, `this agent token belongs to goal "mcp-other"`)
		require.Contains(t, msg, `connected to goal "mcp-stdio"`)
		require.Contains(t, msg, "loopx connect")
		require.Equal(t, 0, e.count(t, `SELECT count(*) FROM turn WHERE goal_id = 'mcp-stdio' AND state = 'live'`))
		require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit WHERE NOT allowed AND actor = 'agent:mcp-other/codex'`), "the refusal is audited")
	})

	t.Run("an unconnected folder still lists the tools and says what to do", func(t *testing.T) {
		cs := stdioSession(t, t.TempDir(), "LOOPX_CONFIG_DIR="+t.TempDir())
		n := 0
		for tool, err := range cs.Tools(t.Context(), nil) {
			require.NoError(t, err)
			require.NotEmpty(t, tool.Description)
			n++
		}
		require.Equal(t, 19, n, "15 tools, progress and file_get, and the contract's todo_handoff and acknowledge")
		res := callTool(t, cs, "should_run", nil)
		require.True(t, res.IsError)
		require.Contains(t, toolText(res), "loopx connect")
	})
}

// cliIn runs the real binary in dir against s with token ("" = none) and extra environment
// (later values win).
func (s *serveProc) cliIn(t *testing.T, dir, token string, env []string, args ...string) cliResult {
	t.Helper()
	full := append(baseEnv(), "LOOPX_URL="+s.url)
	if token != "" {
		full = append(full, "LOOPX_TOKEN="+token)
	}
	return runBinary(t, dir, append(full, env...), args...)
}

// runBinary runs the loopx binary in dir with exactly env.
func runBinary(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), loopxBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}
