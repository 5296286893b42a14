package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"loopx/bot/sandbox"
	"loopx/hosts/project"
	"loopx/server"
)

// clientSettings say where a client command reaches LoopX and with which token. They are
// the one place that reads LOOPX_URL, LOOPX_TOKEN, LOOPX_SANDBOX_URL and LOOPX_SANDBOX_TOKEN,
// resolved once per invocation (app.settings) for every client command, `loopx chat`,
// `loopx doctor` and `loopx mcp`. Each part carries its own error, so a command that needs
// only the sandbox is not stopped by a broken project connection.
type clientSettings struct {
	// Server is the API's base URL: LOOPX_URL, else the project's connection (.loopx/), else
	// the serve running on LOOPX_HOME (its record, server.Serving), else the default listen
	// address.
	Server     string
	ServerFrom string // where Server came from, for messages: LOOPX_URL, a file, or the default
	// Local: Server is this machine's serve (the one LOOPX_HOME records, or the default
	// address), so the admin token it keeps under LOOPX_HOME may be sent to it. The local
	// admin token never goes to another server.
	Local     bool
	serverErr error

	// Token is the bearer token: LOOPX_TOKEN, else (Local) the admin token file under
	// LOOPX_HOME, else the connected agent's token in the credentials file.
	Token     string
	TokenFrom string // LOOPX_TOKEN, or the file it was read from
	tokenErr  error  // no token: where it looked and what to do

	// Sandbox is the Lark sandbox `loopx chat` talks to: LOOPX_SANDBOX_URL, else the one the
	// serve running on LOOPX_HOME recorded, else sandbox.DefaultSandboxURL. SandboxToken is
	// LOOPX_SANDBOX_TOKEN: the record never holds a secret.
	Sandbox      string
	SandboxToken string
	sandboxErr   error

	envToken    string               // LOOPX_TOKEN
	home        string               // LOOPX_HOME (default ~/.loopx); "" when unknown
	credentials *project.Credentials // nil when there is no config directory
	credsErr    error                // why there is none
	conn        connectionLookup     // the project's connection, as found
	connErr     error                // why the connection could not be read
}

// connectionLookup is the project's connection found from the working folder up.
type connectionLookup struct {
	root  string
	c     project.Connection
	found bool
}

// defaultServer is the API's address when nothing says otherwise.
const defaultServer = "http://" + server.DefaultListen

// loadSettings resolves the client settings from the environment, the project's connection
// (asked once) and the files under LOOPX_HOME and the user's config folder.
func loadSettings(getenv func(string) string, connection func() (string, project.Connection, bool, error)) *clientSettings {
	s := &clientSettings{home: server.HomeDir(getenv), envToken: getenv("LOOPX_TOKEN"), SandboxToken: getenv("LOOPX_SANDBOX_TOKEN")}
	if dir, err := project.ConfigDir(getenv); err != nil {
		s.credsErr = err
	} else {
		s.credentials = project.NewCredentials(dir)
	}

	// The record of the serve running on this home: where it listens now, whatever
	// LOOPX_LISTEN and LOOPX_SANDBOX_ADDR said.
	var rec server.Serving
	var live bool
	var recErr error
	if s.home != "" {
		rec, live, recErr = server.ReadServing(s.home)
	}

	root, conn, found, connErr := connection()
	s.connErr = connErr
	if connErr == nil {
		s.conn = connectionLookup{root: root, c: conn, found: found}
	}
	switch u := getenv("LOOPX_URL"); {
	case u != "":
		s.Server, s.ServerFrom = u, "LOOPX_URL"
	case connErr != nil:
		s.serverErr = connErr
	case found:
		s.Server, s.ServerFrom = conn.ServerURL, "server_url in "+project.Path(root)
	case recErr != nil:
		s.serverErr = usageError{fmt.Errorf("%w; or set LOOPX_URL", recErr)}
	case live:
		s.Server, s.ServerFrom = rec.URL, "loopx serve's record "+server.ServingPath(s.home)
	default:
		s.Server, s.ServerFrom = defaultServer, "the default"
	}
	if s.serverErr == nil {
		if p, err := url.Parse(s.Server); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			s.serverErr = usageError{fmt.Errorf("%s: %q is not an http(s) URL like %s", s.ServerFrom, s.Server, defaultServer)}
		} else {
			s.Server = strings.TrimRight(s.Server, "/")
			at := project.NormalizeURL(s.Server)
			s.Local = at == defaultServer || (live && at == project.NormalizeURL(rec.URL))
		}
	}

	switch u := getenv("LOOPX_SANDBOX_URL"); {
	case u != "":
		s.Sandbox = u
	case recErr != nil:
		s.sandboxErr = usageError{fmt.Errorf("%w; or set LOOPX_SANDBOX_URL", recErr)}
	case live && rec.SandboxURL != "":
		s.Sandbox = rec.SandboxURL
	default:
		s.Sandbox = sandbox.DefaultSandboxURL
	}

	if s.serverErr == nil {
		s.Token, s.TokenFrom, s.tokenErr = s.findToken()
	}
	return s
}

// findToken is LOOPX_TOKEN, else (for this machine's serve) the admin token it keeps under
// LOOPX_HOME, else the connected agent's stored token; with none, an error that names the
// files looked in and what to do.
func (s *clientSettings) findToken() (token, from string, err error) {
	if s.envToken != "" {
		return s.envToken, "LOOPX_TOKEN", nil
	}
	var looked []string
	switch {
	case !s.Local:
		looked = append(looked, "the admin token under LOOPX_HOME goes only to this machine's loopx serve, not to "+s.Server)
	case s.home == "":
		looked = append(looked, "neither LOOPX_HOME nor HOME is set, so loopx serve's admin token cannot be found")
	default:
		path := server.AdminTokenPath(s.home)
		t, err := server.ReadAdminToken(s.home)
		if err == nil {
			return t, path, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			looked = append(looked, path+" does not exist (loopx serve keeps the admin token there when LOOPX_ADMIN_TOKEN is unset)")
		} else {
			looked = append(looked, err.Error())
		}
	}
	c := s.conn
	switch {
	case s.connErr != nil:
		return "", "", s.connErr
	case !c.found:
		looked = append(looked, "no project connection (.loopx/connection.json) here or above names an agent whose token this machine keeps")
	case project.NormalizeURL(c.c.ServerURL) != project.NormalizeURL(s.Server):
		looked = append(looked, fmt.Sprintf("the project's connection (%s) is to %s, not %s", project.Path(c.root), c.c.ServerURL, s.Server))
	case s.credentials == nil:
		looked = append(looked, s.credsErr.Error())
	default:
		t, err := s.credentials.Token(s.Server, c.c.GoalID, c.c.AgentID)
		if err != nil {
			return "", "", usageError{err}
		}
		if t != "" {
			return t, s.credentials.Path(), nil
		}
		looked = append(looked, fmt.Sprintf("%s holds no token of agent %q on goal %q there", s.credentials.Path(), c.c.AgentID, c.c.GoalID))
	}
	return "", "", usageError{fmt.Errorf("LOOPX_TOKEN: not set, and no token for %s was found: %s. "+
		"Set LOOPX_TOKEN to the admin token or an agent token (loopx agent register prints one), or run loopx connect in the project's folder",
		s.Server, strings.Join(looked, "; "))}
}

// agentToken is the token `loopx mcp` works with as agent on goal: LOOPX_TOKEN, else the one
// loopx connect stored for that agent on Server. Never the admin token: the MCP tools act as
// one agent. "" when this machine holds none.
func (s *clientSettings) agentToken(goal, agent string) (string, error) {
	if s.envToken != "" {
		return s.envToken, nil
	}
	if s.credentials == nil {
		return "", s.credsErr
	}
	return s.credentials.Token(s.Server, goal, agent)
}

// settings are this invocation's client settings, resolved on first use.
func (a *app) settings() *clientSettings {
	if a.resolved == nil {
		a.resolved = loadSettings(a.getenv, a.connection)
	}
	return a.resolved
}
