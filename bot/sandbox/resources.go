package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Files in the sandbox, as Lark has them: a user's image or file message carries an
// image_key or file_key that the bot downloads through GET
// /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file (only with the
// message it came in); the bot uploads an image (POST /open-apis/im/v1/images, multipart
// image_type=message, image) or a file (POST /open-apis/im/v1/files, multipart file_type,
// file_name, file) and sends the key it got in an image or file message.

// Platform limits on files, as Lark documents them.
const (
	MaxImageBytes = 10 << 20 // an uploaded image
	MaxFileBytes  = 30 << 20 // an uploaded file
	// MaxResourceBytes is the largest resource the message resource API hands out.
	MaxResourceBytes = 100 << 20
)

// Codes of the file APIs.
const (
	CodeResourceNotFound = 234003 // the key is not a resource of that message
	CodeFileTooLarge     = 234006
	CodeFileEmpty        = 234010
)

// Resource is one stored image or file.
type Resource struct {
	Key       string `json:"key"`
	Kind      string `json:"kind"` // image | file
	Name      string `json:"name"`
	MessageID string `json:"message_id,omitempty"` // the user's message it came in; "" = uploaded by the app
	Data      []byte `json:"data"`
}

// resourcesDir is where resources are kept under Options.StateDir.
const resourcesDir = "resources"

func (s *Sandbox) putResourceLocked(r *Resource) {
	s.resources[r.Key] = r
	if s.state == nil {
		return
	}
	dir := filepath.Join(s.state.dir, resourcesDir)
	b, err := json.Marshal(r)
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err == nil {
		tmp := filepath.Join(dir, "."+r.Key+".tmp")
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, filepath.Join(dir, r.Key+".json"))
		}
	}
	if err != nil {
		s.log.Warn("sandbox: keep resource", "key", r.Key, "err", err)
	}
}

// resourceLocked finds a resource, reading it from the state directory when an earlier
// sandbox stored it.
func (s *Sandbox) resourceLocked(key string) *Resource {
	if r := s.resources[key]; r != nil {
		return r
	}
	if s.state == nil || strings.ContainsAny(key, `/\.`) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(s.state.dir, resourcesDir, key+".json"))
	if err != nil {
		return nil
	}
	var r Resource
	if json.Unmarshal(b, &r) != nil || r.Key != key {
		return nil
	}
	s.resources[key] = &r
	return &r
}

// Resource returns a stored resource by key.
func (s *Sandbox) Resource(key string) (Resource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resourceLocked(key)
	if r == nil {
		return Resource{}, false
	}
	return *r, true
}

func (s *Sandbox) getResource(r *http.Request, body []byte) answer {
	id, key, kind := r.PathValue("message_id"), r.PathValue("file_key"), r.URL.Query().Get("type")
	if kind != "image" && kind != "file" {
		return badRequest("type %q: must be image or file", kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messages[id]
	if m == nil || m.Recalled {
		return recalled(id)
	}
	res := s.resourceLocked(key)
	if res == nil || res.MessageID != id || (kind == "image") != (res.Kind == "image") {
		return larkErr(http.StatusBadRequest, CodeResourceNotFound, "file_key %s is not a %s of message %s", key, kind, id)
	}
	name := res.Name
	if name == "" {
		name = res.Key
	}
	return answer{status: http.StatusOK, raw: res.Data, headers: map[string]string{
		"Content-Type":        "application/octet-stream",
		"Content-Disposition": mime.FormatMediaType("attachment", map[string]string{"filename": name}),
	}}
}

// readUpload reads a multipart upload: its form values and the one file part named field.
func readUpload(r *http.Request, body []byte, field string) (map[string]string, []byte, string, answer, bool) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, nil, "", badRequest("an upload must be multipart/form-data"), false
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	values := map[string]string{}
	var data []byte
	name := ""
	found := false
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, "", badRequest("multipart body: %v", err), false
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, nil, "", badRequest("multipart body: %v", err), false
		}
		if p.FormName() == field {
			data, name, found = b, p.FileName(), true
			continue
		}
		values[p.FormName()] = string(b)
	}
	if !found {
		return nil, nil, "", badRequest("the upload has no %s part", field), false
	}
	return values, data, name, answer{}, true
}

func (s *Sandbox) uploadImage(r *http.Request, body []byte) answer {
	values, data, _, a, good := readUpload(r, body, "image")
	if !good {
		return a
	}
	switch {
	case values["image_type"] != "message" && values["image_type"] != "avatar":
		return badRequest("image_type %q: must be message or avatar", values["image_type"])
	case len(data) == 0:
		return larkErr(http.StatusBadRequest, CodeFileEmpty, "the image is empty")
	case len(data) > MaxImageBytes:
		return larkErr(http.StatusBadRequest, CodeFileTooLarge, "the image is %d bytes, the limit is %d", len(data), MaxImageBytes)
	case !strings.HasPrefix(http.DetectContentType(data), "image/"):
		return badRequest("the upload is not an image (%s)", http.DetectContentType(data))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.nextIDLocked("img_v3_")
	s.putResourceLocked(&Resource{Key: key, Kind: "image", Data: data})
	return ok(map[string]any{"image_key": key})
}

func (s *Sandbox) uploadFile(r *http.Request, body []byte) answer {
	values, data, partName, a, good := readUpload(r, body, "file")
	if !good {
		return a
	}
	name := values["file_name"]
	if name == "" {
		name = partName
	}
	switch values["file_type"] {
	case "opus", "mp4", "pdf", "doc", "xls", "ppt", "stream":
	default:
		return badRequest("file_type %q: must be opus, mp4, pdf, doc, xls, ppt or stream", values["file_type"])
	}
	switch {
	case name == "":
		return badRequest("file_name is required")
	case len(data) == 0:
		return larkErr(http.StatusBadRequest, CodeFileEmpty, "the file is empty")
	case len(data) > MaxFileBytes:
		return larkErr(http.StatusBadRequest, CodeFileTooLarge, "the file is %d bytes, the limit is %d", len(data), MaxFileBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.nextIDLocked("file_v3_")
	s.putResourceLocked(&Resource{Key: key, Kind: "file", Name: name, Data: data})
	return ok(map[string]any{"file_key": key})
}

// checkBotFile validates the key of an image or file message the bot sends: one it uploaded.
func (s *Sandbox) checkBotFileLocked(msgType, content string) (answer, bool) {
	if msgType != "image" && msgType != "file" {
		return answer{}, true
	}
	var c struct {
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
	}
	_ = json.Unmarshal([]byte(content), &c)
	key := c.FileKey
	if msgType == "image" {
		key = c.ImageKey
	}
	r := s.resourceLocked(key)
	if key == "" || r == nil || r.MessageID != "" || (msgType == "image") != (r.Kind == "image") {
		return badRequest("%s message: %q is not a key this app uploaded", msgType, key), false
	}
	return answer{}, true
}

// FileInfo describes the image or file of a message, for the control API.
type FileInfo struct {
	Key  string `json:"key"`
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	Size int    `json:"size"`
}

// fileInfoLocked describes the file an image or file message carries (nil for others).
func (s *Sandbox) fileInfoLocked(m *Message) *FileInfo {
	if m.MsgType != "image" && m.MsgType != "file" {
		return nil
	}
	var c struct {
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
	}
	_ = json.Unmarshal([]byte(m.Content), &c)
	key := c.FileKey
	if m.MsgType == "image" {
		key = c.ImageKey
	}
	r := s.resourceLocked(key)
	if r == nil {
		return &FileInfo{Key: key, Kind: m.MsgType, Name: c.FileName}
	}
	return &FileInfo{Key: key, Kind: r.Kind, Name: r.Name, Size: len(r.Data)}
}

// UserSendsFile stores a file (an image when its content is one) sent by senderOpenID in
// chatID and delivers it as Lark does: an image with a caption or a mention of the bot is a
// post (text, then the image), a bare image an image message, any other file a file
// message (which cannot mention anyone: in a group it reaches the bot only with
// Options.GroupMessages, or as a reply when the bot reads every group message). The
// returned Delivery carries the message id.
func (s *Sandbox) UserSendsFile(chatID string, chatType ChatType, senderOpenID, name string, data []byte, caption string, opts ...SayOption) (*Delivery, error) {
	if len(data) == 0 {
		return nil, &InputError{Field: "data", Msg: "the file is empty"}
	}
	image := strings.HasPrefix(http.DetectContentType(data), "image/")
	limit := MaxFileBytes
	if image {
		limit = MaxImageBytes
	}
	if len(data) > limit {
		return nil, &InputError{Field: "data", Msg: fmt.Sprintf("is %d bytes; Lark takes up to %d for this kind of file", len(data), limit)}
	}
	var cfg sayConfig
	for _, o := range opts {
		o(&cfg)
	}
	s.mu.Lock()
	key := s.nextIDLocked(map[bool]string{true: "img_v3_", false: "file_v3_"}[image])
	s.mu.Unlock()
	var msgType string
	var content []byte
	var mentions []Mention
	switch {
	case image && (caption != "" || cfg.mentionBot):
		msgType = "post"
		var line []map[string]any
		if cfg.mentionBot {
			mentions = append(mentions, Mention{Key: "@_user_1", OpenID: s.opts.BotOpenID, Name: s.opts.BotName})
			line = append(line, map[string]any{"tag": "at", "user_id": "@_user_1", "user_name": s.opts.BotName})
		}
		if caption != "" {
			line = append(line, map[string]any{"tag": "text", "text": " " + caption})
		}
		paras := [][]map[string]any{}
		if len(line) > 0 {
			paras = append(paras, line)
		}
		paras = append(paras, []map[string]any{{"tag": "img", "image_key": key}})
		content, _ = json.Marshal(map[string]any{"title": "", "content": paras})
	case image:
		msgType = "image"
		content, _ = json.Marshal(map[string]string{"image_key": key})
	default:
		msgType = "file"
		content, _ = json.Marshal(map[string]string{"file_key": key, "file_name": name})
		cfg.mentionBot = false // a file message mentions no one
	}
	kind := "file"
	if image {
		kind = "image"
	}
	return s.userMessage(chatID, chatType, senderOpenID, msgType, string(content), mentions, cfg,
		&Resource{Key: key, Kind: kind, Name: name, Data: data})
}
