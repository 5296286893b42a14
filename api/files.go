package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	"loopx/store"
)

// Files: an agent's deliverables attached to evidence, files sent back with an inbox reply,
// and the images and files people sent with their messages, each served to whoever may read
// what it belongs to.

// FileBody is a file carried in a JSON body: its name, its content in base64 (standard
// encoding) and, optionally, its media type (sniffed from the content otherwise).
type FileBody struct {
	Name          string `json:"name"`
	Mime          string `json:"mime,omitempty"`
	ContentBase64 string `json:"content_base64"`
}

// upload decodes f into a file ready to store and stages it (an S3-compatible store gets it
// now, before the operation records it). field names f in errors.
func (s *Server) upload(ctx context.Context, f *FileBody, field string) (*store.FileUpload, error) {
	if f == nil {
		return nil, nil
	}
	if f.Name == "" {
		return nil, invalid(field+".name", "is required: the file's name (e.g. report.pdf)")
	}
	data, err := base64.StdEncoding.DecodeString(f.ContentBase64)
	if err != nil {
		return nil, invalid(field+".content_base64", "is not standard base64: %v", err)
	}
	b, err := s.st.NewBlob(data)
	if err != nil {
		return nil, err
	}
	if err := s.st.StageBlob(ctx, b); err != nil {
		return nil, err
	}
	return &store.FileUpload{Name: f.Name, Mime: f.Mime, Blob: b}, nil
}

// withURLs sets where each file can be downloaded.
func withURLs(files []store.Attachment) {
	for i := range files {
		files[i].URL = "/v1/files/" + strconv.FormatInt(files[i].ID, 10)
	}
}

// download is a file answer: served as its bytes, not as JSON.
type download struct {
	att  store.Attachment
	body io.ReadCloser
}

func (d *download) write(ctx context.Context, w http.ResponseWriter, log *slog.Logger) {
	defer d.body.Close()
	h := w.Header()
	h.Set("Content-Type", d.att.Mime)
	h.Set("Content-Length", strconv.FormatInt(d.att.Size, 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.att.Name}))
	h.Set("X-Loopx-Sha256", d.att.SHA256)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, d.body); err != nil && ctx.Err() == nil {
		log.WarnContext(ctx, "serve file", "file_id", d.att.ID, "err", err)
	}
}

// getFile serves a file's content: the admin token any; an agent token a file of its own
// goal, and of an inbox item (or a reply to one) only when the item is its own. A file the
// token may not read is 404, like one that does not exist.
func (s *Server) getFile(ctx context.Context, r *request) (int, any, error) {
	id, err := strconv.ParseInt(r.PathValue("file"), 10, 64)
	if err != nil || id <= 0 {
		return 0, nil, invalid("file_id", "%q is not a file id (a positive number)", r.PathValue("file"))
	}
	a, err := s.st.GetAttachment(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if !r.who.admin {
		owner, err := s.st.FileOwner(ctx, a)
		if err != nil {
			return 0, nil, err
		}
		inboxFile := a.ItemID != 0 || a.ReplyOf != 0
		if a.GoalID != r.who.goalID || (inboxFile && owner != r.who.agentID) {
			_ = s.refuse(r, "read file", a.GoalID, store.ReasonTokenScope, "file of another goal or agent")
			return 0, nil, store.Errorf(store.ErrNotFound, "file_id", "no file %d", id)
		}
	}
	body, err := s.st.OpenAttachment(ctx, a)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, &download{att: a, body: body}, nil
}

// listFiles lists a goal's deliverables (files attached to evidence), newest first.
func (s *Server) listFiles(ctx context.Context, r *request) (int, any, error) {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	files, err := store.ListGoalFiles(ctx, s.st.DB(), r.PathValue("goal"), int(limit))
	if err != nil {
		return 0, nil, err
	}
	if len(files) == 0 {
		if err := s.goalExists(ctx, r); err != nil {
			return 0, nil, err
		}
	}
	withURLs(files)
	if files == nil {
		files = []store.Attachment{}
	}
	return http.StatusOK, map[string]any{"files": files}, nil
}

// ProgressBody is the body of POST .../agents/{agent}/progress.
type ProgressBody struct {
	TurnInstanceID string `json:"turn_instance_id,omitempty"` // "" = the agent's live turn
	Text           string `json:"text"`
}

func (s *Server) progress(ctx context.Context, r *request) (int, any, error) {
	var b ProgressBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	agent, err := s.actingAgent(r, "report progress", r.PathValue("agent"), true)
	if err != nil {
		return 0, nil, err
	}
	n, err := s.st.AddTurnNote(ctx, store.TurnNoteParams{GoalID: r.PathValue("goal"), AgentID: agent,
		InstanceID: b.TurnInstanceID, Text: b.Text, Meta: r.meta()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, n, nil
}

// runWork is stop, run, hold and resume of one agent: the admin token only (owners act from
// chat or the workspace).
func (s *Server) runWork(verb string) handlerFunc {
	return func(ctx context.Context, r *request) (int, any, error) {
		if err := decode(r, &struct{}{}); err != nil {
			return 0, nil, err
		}
		if err := s.requireAdmin(r, verb+" agent"); err != nil {
			return 0, nil, err
		}
		g, a := r.PathValue("goal"), r.PathValue("agent")
		switch verb {
		case "stop":
			t, err := s.st.RequestStop(ctx, store.StopParams{GoalID: g, AgentID: a, Meta: r.meta()})
			if err != nil {
				return 0, nil, err
			}
			return http.StatusAccepted, map[string]any{"turn": t}, nil
		case "run":
			req, err := s.st.RequestRun(ctx, store.RunParams{GoalID: g, AgentID: a, Meta: r.meta()})
			if err != nil {
				return 0, nil, err
			}
			return http.StatusAccepted, req, nil
		case "hold":
			res, err := s.st.HoldAgent(ctx, store.HoldParams{GoalID: g, AgentID: a, Meta: r.meta()})
			if err != nil {
				return 0, nil, err
			}
			return http.StatusOK, res, nil
		case "resume":
			res, err := s.st.ResumeAgent(ctx, store.ResumeParams{GoalID: g, AgentID: a,
				Notice: s.turnCards.BreakerUpdate, Meta: r.meta()})
			if err != nil {
				return 0, nil, err
			}
			return http.StatusOK, res, nil
		}
		return 0, nil, fmt.Errorf("run work: unknown verb %q", verb)
	}
}

// getRun reads a heartbeat fired now and what it did.
func (s *Server) getRun(ctx context.Context, r *request) (int, any, error) {
	id, err := strconv.ParseInt(r.PathValue("run"), 10, 64)
	if err != nil || id <= 0 {
		return 0, nil, invalid("run_id", "%q is not a run id", r.PathValue("run"))
	}
	req, err := s.st.GetRunRequest(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if req.GoalID != r.PathValue("goal") {
		return 0, nil, store.Errorf(store.ErrNotFound, "run_id", "no run %d on goal %q", id, r.PathValue("goal"))
	}
	return http.StatusOK, req, nil
}
