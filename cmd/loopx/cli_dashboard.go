package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// dashboardCommand is `loopx dashboard`: a fresh one-time sign-in link to the workspace of the
// server this machine serves (its admin token asks for it), opened in the browser.
func (a *app) dashboardCommand() *cobra.Command {
	var as, next string
	var noOpen bool
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Open the web workspace, signed in with a fresh one-time link",
		Long: `Open the LoopX web workspace in the browser, signed in: the server (its admin token, which
loopx serve keeps under LOOPX_HOME on the machine it runs on, or LOOPX_TOKEN) issues a
one-time sign-in link (10 minutes, single use) and the browser opens it. The link is printed
too, for a browser on another machine or a phone (add the workspace to its home screen to
install it as an app).

By default the link signs the admin in; --as signs in a Lark person (their goals, their
roles), as the link the bot sends them would.`,
		Example: `  loopx dashboard
  loopx dashboard --as ou_alice --next /web/goals
  loopx dashboard --no-open`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := a.settings()
			if s.serverErr != nil {
				return s.serverErr
			}
			if s.tokenErr != nil {
				return s.tokenErr
			}
			link, err := issueSignInLink(cmd, s.Server, s.Token, as, next)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, link)
			if !noOpen {
				if err := openBrowser(link); err != nil {
					fmt.Fprintf(a.stderr, "open the link above in a browser (%v)\n", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "sign in this Lark open_id instead of the admin")
	cmd.Flags().StringVar(&next, "next", "", "the workspace page to land on, e.g. /web/goals")
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "print the link only; do not start a browser")
	return cmd
}

// issueSignInLink asks the workspace for a sign-in link (POST /web/signin/links).
func issueSignInLink(cmd *cobra.Command, server, token, as, next string) (string, error) {
	body, _ := json.Marshal(map[string]string{"open_id": as, "next": next})
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, strings.TrimRight(server, "/")+"/web/signin/links", bytes.NewReader(body))
	if err != nil {
		return "", usageError{fmt.Errorf("LOOPX_URL: %w", err)}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return "", unreachableError{fmt.Errorf("the server at %s did not answer: %w", server, err)}
	}
	defer res.Body.Close()
	var out struct {
		URL   string `json:"url"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return "", unreachableError{fmt.Errorf("the server at %s answered %s without a link (is the workspace on? LOOPX_WEB)", server, res.Status)}
	}
	switch {
	case res.StatusCode == http.StatusCreated && out.URL != "":
		return out.URL, nil
	case res.StatusCode == http.StatusUnauthorized:
		return "", errors.New("the server refused the token: loopx dashboard needs the admin token (on the serving machine it is found under LOOPX_HOME; else set LOOPX_TOKEN)")
	case res.StatusCode < 500:
		return "", usageError{errors.New(out.Error)}
	}
	return "", unreachableError{fmt.Errorf("the server at %s failed: %s", server, out.Error)}
}

// openBrowser starts the system's browser on url.
func openBrowser(url string) error {
	var name string
	var args []string
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("no %s on this machine", name)
	}
	c := exec.Command(path, append(args, url)...)
	if err := c.Start(); err != nil {
		return err
	}
	go func() { _ = c.Wait() }() // the browser outlives this command; reap the launcher
	return nil
}
