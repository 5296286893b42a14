package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"loopx/api"
	"loopx/api/client"
)

// ConnectParams are the inputs of Connect.
type ConnectParams struct {
	Root string // the project's root folder
	// Client calls the server as the person connecting: the admin token (creates the goal,
	// registers the agent) or the agent's own token (only stores the connection).
	Client      *client.Client
	Credentials *Credentials
	// GoalID and AgentID are the flags; "" means the existing connection's, else a question
	// (Ask), else the default (the folder's name, "agent").
	GoalID, AgentID string
	// Title, Objective and Owners fill a goal Connect creates.
	Title, Objective string
	Owners           []string
	// RotateToken issues a new token for an existing agent this machine has no token for
	// (the old token stops working).
	RotateToken bool
	// Ask asks a person; nil when nobody can be asked (not a terminal).
	Ask func(question, def string) (string, error)
	// Key returns the Idempotency-Key of one step of this run.
	Key func(step string) string
	// ServerHome is the LOOPX_HOME of a local server: a project there would mix with the
	// server's own files.
	ServerHome string
}

// ConnectResult says what Connect found and did.
type ConnectResult struct {
	Root string `json:"root"`
	Connection
	GoalCreated       bool     `json:"goal_created"`
	AgentRegistered   bool     `json:"agent_registered"`
	TokenRotated      bool     `json:"token_rotated"`
	TokenStored       bool     `json:"token_stored"`
	ConnectionWritten bool     `json:"connection_written"`
	CredentialsFile   string   `json:"credentials_file"`
	GitignoreHint     string   `json:"gitignore_hint,omitempty"`
	Notes             []string `json:"notes,omitempty"`
}

// Changed reports whether Connect changed anything.
func (r ConnectResult) Changed() bool {
	return r.GoalCreated || r.AgentRegistered || r.TokenRotated || r.TokenStored || r.ConnectionWritten
}

// UsageError is an error of the person's input or of the folder's state that a flag or a
// command fixes; the CLI exits 2 on it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// Connect links the project rooted at p.Root to a goal and agent on the server: it finds or
// creates the goal, finds or registers the agent, keeps the agent's token in the user's
// config directory and writes .loopx/connection.json. It reuses everything that exists and
// changes nothing when everything is in place.
func Connect(ctx context.Context, p ConnectParams) (ConnectResult, error) {
	res := ConnectResult{Root: p.Root, CredentialsFile: p.Credentials.Path()}
	server := NormalizeURL(p.Client.BaseURL())
	if p.ServerHome != "" && filepath.Clean(filepath.Join(p.Root, Dir)) == filepath.Clean(p.ServerHome) {
		return res, usage("%s is the server's own folder (LOOPX_HOME): connect from the project's root folder instead", p.ServerHome)
	}
	existing, err := Load(p.Root)
	switch {
	case err == nil:
		if NormalizeURL(existing.ServerURL) != server {
			return res, usage("this folder is connected to %s (%s); unset LOOPX_URL to use it, or remove that file to connect elsewhere", existing.ServerURL, Path(p.Root))
		}
		if (p.GoalID != "" && p.GoalID != existing.GoalID) || (p.AgentID != "" && p.AgentID != existing.AgentID) {
			return res, usage("this folder is connected to goal %q as agent %q (%s); remove that file to connect it to another goal or agent", existing.GoalID, existing.AgentID, Path(p.Root))
		}
		p.GoalID, p.AgentID = existing.GoalID, existing.AgentID
	case errors.Is(err, fs.ErrNotExist):
	default:
		return res, err
	}

	var who api.Whoami
	if err := p.Client.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: "/v1/whoami"}, &who); err != nil {
		return res, fmt.Errorf("check the token: %w", err)
	}
	if !who.Admin {
		return connectAsAgent(ctx, p, res, server, who)
	}

	if p.GoalID == "" {
		if p.GoalID, err = ask(p, "Goal id (a new goal is created if it does not exist)", Slug(filepath.Base(p.Root))); err != nil {
			return res, err
		}
	}
	if p.AgentID == "" {
		if p.AgentID, err = ask(p, "Agent id (who works on this project, e.g. claude or codex)", "agent"); err != nil {
			return res, err
		}
	}
	for _, id := range []struct{ name, v string }{{"goal id", p.GoalID}, {"agent id", p.AgentID}} {
		if Slug(id.v) != id.v {
			return res, usage("%s %q: use 1-63 characters a-z 0-9 . _ -, starting with a letter or digit (e.g. %q)", id.name, id.v, Slug(id.v))
		}
	}
	res.Connection = Connection{ServerURL: server, GoalID: p.GoalID, AgentID: p.AgentID}

	if res.GoalCreated, err = ensureGoal(ctx, p, &res); err != nil {
		return res, err
	}
	if err := ensureAgent(ctx, p, &res, server); err != nil {
		return res, err
	}
	if res.ConnectionWritten, err = Save(p.Root, res.Connection); err != nil {
		return res, err
	}
	res.GitignoreHint = GitignoreHint(p.Root)
	return res, nil
}

// connectAsAgent connects with the agent's own token: the goal and agent are the token's.
func connectAsAgent(ctx context.Context, p ConnectParams, res ConnectResult, server string, who api.Whoami) (ConnectResult, error) {
	if (p.GoalID != "" && p.GoalID != who.GoalID) || (p.AgentID != "" && p.AgentID != who.AgentID) {
		return res, usage("the token (LOOPX_TOKEN) belongs to agent %q on goal %q, not %q on %q: use that agent's token, or the admin token to create or register", who.AgentID, who.GoalID, p.AgentID, p.GoalID)
	}
	res.Connection = Connection{ServerURL: server, GoalID: who.GoalID, AgentID: who.AgentID}
	var err error
	if res.TokenStored, err = p.Credentials.SaveToken(server, who.GoalID, who.AgentID, p.Client.Token()); err != nil {
		return res, err
	}
	if res.ConnectionWritten, err = Save(p.Root, res.Connection); err != nil {
		return res, err
	}
	res.GitignoreHint = GitignoreHint(p.Root)
	return res, nil
}

func ask(p ConnectParams, question, def string) (string, error) {
	if p.Ask == nil {
		return def, nil
	}
	v, err := p.Ask(question, def)
	if err != nil {
		return "", fmt.Errorf("read answer: %w", err)
	}
	if v = strings.TrimSpace(v); v == "" {
		return def, nil
	}
	return v, nil
}

// ensureGoal finds the goal or creates it; it reports whether it created it.
func ensureGoal(ctx context.Context, p ConnectParams, res *ConnectResult) (bool, error) {
	path := client.GoalPath(p.GoalID)
	_, err := p.Client.Do(ctx, client.Request{Method: http.MethodGet, Path: path})
	var ae *api.Error
	switch {
	case err == nil:
		res.Notes = append(res.Notes, fmt.Sprintf("goal %s exists: reused as it is", p.GoalID))
		return false, nil
	case !errors.As(err, &ae) || ae.Code != api.CodeNotFound:
		return false, fmt.Errorf("look up goal %s: %w", p.GoalID, err)
	}
	title := p.Title
	if title == "" {
		if title, err = ask(p, "Goal title", filepath.Base(p.Root)); err != nil {
			return false, err
		}
	}
	owners := p.Owners
	if len(owners) == 0 && p.Ask != nil {
		v, err := ask(p, "Lark open_id of the goal's owner, who answers gates (comma-separated; empty for none yet)", "")
		if err != nil {
			return false, err
		}
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				owners = append(owners, o)
			}
		}
	}
	body := api.GoalBody{GoalID: p.GoalID, Title: &title}
	if p.Objective != "" {
		body.Objective = &p.Objective
	}
	if len(owners) > 0 {
		body.Owners = &owners
	} else {
		res.Notes = append(res.Notes, "the goal has no owner yet, so nobody can answer its gates: loopx goal set --goal-id "+p.GoalID+" --owner <open_id>")
	}
	if _, err := p.Client.Do(ctx, client.Request{Method: http.MethodPost, Path: "/v1/goals", Body: body, IdempotencyKey: p.Key("goal")}); err != nil {
		return false, fmt.Errorf("create goal %s: %w", p.GoalID, err)
	}
	return true, nil
}

// ensureAgent finds the agent with a working stored token, or registers it, or rotates its
// token when asked to, and stores the token.
func ensureAgent(ctx context.Context, p ConnectParams, res *ConnectResult, server string) error {
	var list struct {
		Agents []struct {
			ID string `json:"agent_id"`
		} `json:"agents"`
	}
	if err := p.Client.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: client.GoalPath(p.GoalID, "agents")}, &list); err != nil {
		return fmt.Errorf("list agents of %s: %w", p.GoalID, err)
	}
	exists := slices.ContainsFunc(list.Agents, func(a struct {
		ID string `json:"agent_id"`
	}) bool {
		return a.ID == p.AgentID
	})
	var issued struct {
		Token string `json:"token"`
	}
	switch {
	case !exists:
		body := api.AgentBody{AgentID: p.AgentID, Runner: "poll"}
		if err := p.Client.DoJSON(ctx, client.Request{Method: http.MethodPost, Path: client.GoalPath(p.GoalID, "agents"),
			Body: body, IdempotencyKey: p.Key("agent")}, &issued); err != nil {
			return fmt.Errorf("register agent %s: %w", p.AgentID, err)
		}
		res.AgentRegistered = true
	default:
		ok, err := tokenWorks(ctx, p, server)
		if err != nil {
			return err
		}
		if ok {
			res.Notes = append(res.Notes, fmt.Sprintf("agent %s exists and this machine holds its token: reused", p.AgentID))
			return nil
		}
		if !p.RotateToken {
			return usage("agent %q already exists on goal %q and this machine has no working token for it: pass --rotate-token to issue a new one (the old one stops working), or connect as another --agent-id", p.AgentID, p.GoalID)
		}
		if err := p.Client.DoJSON(ctx, client.Request{Method: http.MethodPost, Path: client.GoalPath(p.GoalID, "agents", p.AgentID, "rotate-token"),
			Body: struct{}{}, IdempotencyKey: p.Key("rotate")}, &issued); err != nil {
			return fmt.Errorf("rotate the token of %s: %w", p.AgentID, err)
		}
		res.TokenRotated = true
	}
	if issued.Token == "" {
		return usage("the server did not show agent %q's token (a replayed call shows it only once): run loopx connect --rotate-token", p.AgentID)
	}
	var err error
	res.TokenStored, err = p.Credentials.SaveToken(server, p.GoalID, p.AgentID, issued.Token)
	return err
}

// tokenWorks reports whether the stored token authenticates as the agent.
func tokenWorks(ctx context.Context, p ConnectParams, server string) (bool, error) {
	tok, err := p.Credentials.Token(server, p.GoalID, p.AgentID)
	if err != nil || tok == "" {
		return false, err
	}
	c, err := p.Client.WithToken(tok)
	if err != nil {
		return false, err
	}
	var who api.Whoami
	err = c.DoJSON(ctx, client.Request{Method: http.MethodGet, Path: "/v1/whoami"}, &who)
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == api.CodeUnauthenticated {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check the stored token: %w", err)
	}
	return !who.Admin && who.GoalID == p.GoalID && who.AgentID == p.AgentID, nil
}

// Slug turns s into a valid goal or agent id: lower case, other characters as '-', at most
// 63 characters, starting with a letter or digit ("project" when nothing is left).
func Slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	out := strings.TrimLeft(b.String(), "._-")
	if len(out) > 63 {
		out = out[:63]
	}
	if out == "" {
		return "project"
	}
	return out
}
