package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// DefaultMaxFileBytes is the size cap of one file when the server sets none (20 MiB: Lark
// takes images up to 10 MB and files up to 30 MB).
const DefaultMaxFileBytes = 20 << 20

// blobChunk is the size of one file_chunk row: reads stream a file chunk by chunk.
const blobChunk = 1 << 20

// FetchChannel is the NOTIFY channel that wakes the bot's file fetcher: a message brought
// files to download from Lark.
const FetchChannel = "loopx_fetch"

// BlobStore keeps file contents by their SHA-256 outside PostgreSQL (an S3-compatible
// store). The default, nil in Options, keeps them in PostgreSQL (file_chunk). Put is called
// before the transaction that records the file, never inside one; Put of a blob already
// there is a no-op.
type BlobStore interface {
	Name() string // the backend's name in file_blob.backend: "s3"
	Put(ctx context.Context, sum []byte, data []byte) error
	Get(ctx context.Context, sum []byte) (io.ReadCloser, error)
	Delete(ctx context.Context, sum []byte) error
}

// pgBlobs keeps contents in file_chunk, written in the recording transaction.
type pgBlobs struct{}

func (pgBlobs) Name() string                                       { return "pg" }
func (pgBlobs) Put(context.Context, []byte, []byte) error          { return nil }
func (pgBlobs) Get(context.Context, []byte) (io.ReadCloser, error) { return nil, errors.ErrUnsupported }
func (pgBlobs) Delete(context.Context, []byte) error               { return nil }

// Blob is a file's content ready to be stored: its SHA-256 and size, checked against the cap.
type Blob struct {
	SHA256 []byte `json:"sha256"`
	Size   int64  `json:"size"`
	data   []byte
}

// Hex is the blob's SHA-256 in hex.
func (b Blob) Hex() string { return hex.EncodeToString(b.SHA256) }

// NewBlob checks data against the size cap and hashes it. An empty file or one over the cap
// is ErrInvalid (ReasonTooLarge for the latter).
func (s *Store) NewBlob(data []byte) (Blob, error) {
	if len(data) == 0 {
		return Blob{}, Errorf(ErrInvalid, "file", "is empty")
	}
	if int64(len(data)) > s.maxFile {
		return Blob{}, because(ReasonTooLarge, Errorf(ErrInvalid, "file", "is %s; this server takes files up to %s",
			HumanBytes(int64(len(data))), HumanBytes(s.maxFile)))
	}
	sum := sha256.Sum256(data)
	return Blob{SHA256: sum[:], Size: int64(len(data)), data: data}, nil
}

// MaxFileBytes is the size cap of one file.
func (s *Store) MaxFileBytes() int64 { return s.maxFile }

// StageBlob does the part of storing b that happens outside any transaction: the upload to
// an S3-compatible store. Call it before the operation that records the file.
func (s *Store) StageBlob(ctx context.Context, b Blob) error {
	if err := s.blobs.Put(ctx, b.SHA256, b.data); err != nil {
		return fmt.Errorf("store file %s: %w", b.Hex()[:12], err)
	}
	return nil
}

// putBlobTx records b in the caller's transaction (content-addressed: a blob stored before
// is kept as it is). With PostgreSQL as the store its chunks are written too.
func (s *Store) putBlobTx(ctx context.Context, db DB, b Blob) error {
	if b.SHA256 == nil {
		return Errorf(ErrInvalid, "file", "has no content")
	}
	tag, err := db.Exec(ctx, `INSERT INTO file_blob (sha256, size, backend) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		b.SHA256, b.Size, s.blobs.Name())
	if err != nil {
		return fmt.Errorf("record file: %w", mapErr(err))
	}
	if tag.RowsAffected() == 0 || s.blobs.Name() != "pg" {
		return nil
	}
	for seq, off := 0, 0; off < len(b.data); seq, off = seq+1, off+blobChunk {
		end := min(off+blobChunk, len(b.data))
		if _, err := db.Exec(ctx, `INSERT INTO file_chunk (sha256, seq, data) VALUES ($1, $2, $3)`, b.SHA256, seq, b.data[off:end]); err != nil {
			return fmt.Errorf("store file chunk: %w", mapErr(err))
		}
	}
	return nil
}

// OpenBlob streams a stored blob's content. Chunks stored in PostgreSQL are read one query
// at a time on the pool, so no transaction is held while the caller writes them out.
func (s *Store) OpenBlob(ctx context.Context, sum []byte) (io.ReadCloser, error) {
	var backend string
	err := s.pool.QueryRow(ctx, `SELECT backend FROM file_blob WHERE sha256 = $1`, sum).Scan(&backend)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, Errorf(ErrNotFound, "file", "the file's content is gone")
	}
	if err != nil {
		return nil, fmt.Errorf("read file: %w", mapErr(err))
	}
	if backend != "pg" {
		if backend != s.blobs.Name() {
			return nil, fmt.Errorf("read file: it is kept in %s, which this server is not configured for", backend)
		}
		return s.blobs.Get(ctx, sum)
	}
	return &chunkReader{ctx: ctx, st: s, sum: sum}, nil
}

type chunkReader struct {
	ctx  context.Context
	st   *Store
	sum  []byte
	seq  int
	buf  []byte
	done bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.done {
			return 0, io.EOF
		}
		err := r.st.pool.QueryRow(r.ctx, `SELECT data FROM file_chunk WHERE sha256 = $1 AND seq = $2`, r.sum, r.seq).Scan(&r.buf)
		if errors.Is(err, pgx.ErrNoRows) {
			r.done = true
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read file chunk: %w", mapErr(err))
		}
		r.seq++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *chunkReader) Close() error { return nil }

// Attachment states.
const (
	FileFetching = "fetching" // to be downloaded from Lark
	FileStored   = "stored"
	FileFailed   = "failed" // never downloaded (Error says why)
)

// Attachment is a file that belongs to an inbox item (sent by a person in chat), to a reply
// to one (sent by an agent), or to evidence (a deliverable). Whoever may read what it belongs
// to may download it.
type Attachment struct {
	ID         int64     `json:"file_id"`
	GoalID     string    `json:"goal_id"`
	ItemID     int64     `json:"item_id,omitempty"`
	ReplyOf    int64     `json:"reply_of,omitempty"`
	EvidenceID int64     `json:"evidence_id,omitempty"`
	Name       string    `json:"name"`
	Mime       string    `json:"mime"`
	Kind       string    `json:"kind"` // image | file
	SHA256     string    `json:"sha256,omitempty"`
	Size       int64     `json:"size,omitempty"`
	State      string    `json:"state"`
	Error      string    `json:"error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// URL is where the API serves the content (GET /v1/files/{id}); set by the API.
	URL string `json:"url,omitempty"`

	larkMessage, larkKey string
	attempts             int
}

const attachmentCols = `id, goal_id, coalesce(inbox_item_id, 0), coalesce(reply_of, 0), coalesce(evidence_id, 0), name,
	mime, kind, coalesce(encode(sha256, 'hex'), ''), coalesce(size, 0), state, error, created_at, lark_message, lark_key, attempts`

func scanAttachment(row pgx.Row) (Attachment, error) {
	var a Attachment
	err := row.Scan(&a.ID, &a.GoalID, &a.ItemID, &a.ReplyOf, &a.EvidenceID, &a.Name, &a.Mime, &a.Kind, &a.SHA256,
		&a.Size, &a.State, &a.Error, &a.CreatedAt, &a.larkMessage, &a.larkKey, &a.attempts)
	return a, err
}

// FileUpload is a file to attach: its name, content and (optional) media type.
type FileUpload struct {
	Name string
	Mime string // "" = sniffed from the content
	Blob Blob
}

// CleanFileName makes a name safe to show and to send as a download name: the base name,
// no control characters, at most 255 bytes; "" becomes "file".
func CleanFileName(name string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base(strings.TrimSpace(name))
	name = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '"' {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, ""))
	if name == "" || name == "." || name == "/" || name == ".." {
		name = "file"
	}
	for len(name) > 255 {
		_, size := utf8.DecodeLastRuneInString(name[:255])
		name = name[:255-size+1]
		if !utf8.ValidString(name) {
			name = strings.ToValidUTF8(name, "")
		}
	}
	return name
}

// sniff is the media type of a file: the one given when it parses, else what the content
// and the name's extension say.
func sniff(given, name string, data []byte) string {
	if given != "" {
		if mt, _, err := mime.ParseMediaType(given); err == nil {
			return mt
		}
	}
	if len(data) > 0 {
		if mt := http.DetectContentType(data[:min(len(data), 512)]); mt != "application/octet-stream" {
			mt, _, _ = mime.ParseMediaType(mt)
			return mt
		}
	}
	if mt := mime.TypeByExtension(path.Ext(name)); mt != "" {
		mt, _, _ = mime.ParseMediaType(mt)
		return mt
	}
	return "application/octet-stream"
}

// IsImage tells whether a media type is an image Lark shows as one.
func IsImage(mimeType string) bool {
	switch mimeType {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/x-icon", "image/tiff":
		return true
	}
	return false
}

// attachTx records a stored file as belonging to one owner (column = its id).
func (s *Store) attachTx(ctx context.Context, db DB, goalID, column string, ownerID int64, f FileUpload, now time.Time) (Attachment, error) {
	if err := s.putBlobTx(ctx, db, f.Blob); err != nil {
		return Attachment{}, err
	}
	name := CleanFileName(f.Name)
	mt := sniff(f.Mime, name, f.Blob.data)
	kind := "file"
	if IsImage(mt) {
		kind = "image"
	}
	a, err := scanAttachment(db.QueryRow(ctx, `INSERT INTO attachment (goal_id, `+column+`, name, mime, kind, sha256, size, state, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'stored', $8) RETURNING `+attachmentCols,
		goalID, ownerID, name, mt, kind, f.Blob.SHA256, f.Blob.Size, now))
	if err != nil {
		return Attachment{}, fmt.Errorf("record file: %w", mapErr(err))
	}
	return a, nil
}

// LarkFile is a file a chat message brought, to be downloaded from Lark (the message
// resource API) by the bot's fetcher.
type LarkFile struct {
	Key  string // image_key or file_key
	Kind string // image | file
	Name string // "" for images
}

// AddFetchesTx records the files of message messageID as attachments of inbox item itemID,
// to be fetched, and wakes the fetcher.
func AddFetchesTx(ctx context.Context, db DB, goalID string, itemID int64, messageID string, files []LarkFile, now time.Time) error {
	for _, f := range files {
		kind := f.Kind
		if kind != "image" {
			kind = "file"
		}
		name := CleanFileName(f.Name)
		if f.Name == "" {
			name = "image"
		}
		if _, err := db.Exec(ctx, `INSERT INTO attachment (goal_id, inbox_item_id, name, kind, state, lark_message, lark_key,
			next_attempt_at, created_at) VALUES ($1, $2, $3, $4, 'fetching', $5, $6, $7, $7)`,
			goalID, itemID, name, kind, messageID, f.Key, now); err != nil {
			return fmt.Errorf("record file to fetch: %w", mapErr(err))
		}
	}
	if _, err := db.Exec(ctx, `SELECT pg_notify($1, '')`, FetchChannel); err != nil {
		return fmt.Errorf("wake file fetcher: %w", mapErr(err))
	}
	return nil
}

// Fetch is one file the fetcher must download from Lark.
type Fetch struct {
	AttachmentID int64
	MessageID    string
	Key          string
	Kind         string // image | file: the message resource API's type
	Name         string
	Attempts     int
}

// ClaimFetches claims up to limit due downloads for owner until now+lease.
func (s *Store) ClaimFetches(ctx context.Context, owner string, lease time.Duration, limit int) ([]Fetch, error) {
	rows, err := s.DB().Query(ctx, `WITH picked AS (
			SELECT id FROM attachment WHERE state = 'fetching' AND next_attempt_at <= now()
			ORDER BY next_attempt_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
		UPDATE attachment a SET claimed_by = $2, next_attempt_at = now() + $3 * interval '1 microsecond'
		FROM picked WHERE a.id = picked.id
		RETURNING a.id, a.lark_message, a.lark_key, a.kind, a.name, a.attempts`, limit, owner, lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("claim file downloads: %w", mapErr(err))
	}
	return collect(rows, "claim file downloads", func(r pgx.Row) (Fetch, error) {
		var f Fetch
		err := r.Scan(&f.AttachmentID, &f.MessageID, &f.Key, &f.Kind, &f.Name, &f.Attempts)
		return f, err
	})
}

// NextFetchDue is when the next download is due; ok is false when none waits.
func (s *Store) NextFetchDue(ctx context.Context) (time.Time, bool, error) {
	var at *time.Time
	if err := s.DB().QueryRow(ctx, `SELECT min(next_attempt_at) FROM attachment WHERE state = 'fetching'`).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("read next file download: %w", mapErr(err))
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}

// FileNotice renders what a chat is told about a file that could not be taken (a reply to
// the message that brought it), inside the operation's transaction.
type FileNotice func(ctx context.Context, db DB, a Attachment, item InboxItem) ([]OutboxInsert, error)

// SaveFetched stores the downloaded content of attachment id (claimed by owner); name is
// the download's file name when Lark gave one. Content over the size cap fails the file
// for good (and notice tells the chat). When the item's last file is settled the item is
// handed to its agent. A claim lost meanwhile writes nothing.
func (s *Store) SaveFetched(ctx context.Context, id int64, owner, name string, data []byte, refused FileNotice) error {
	b, berr := s.NewBlob(data)
	if berr != nil {
		// The reason starts with its code, so the notice can tell a file too large.
		return s.FailFetch(ctx, id, owner, ReasonTooLarge+": "+berr.Error(), true, 0, refused)
	}
	if err := s.StageBlob(ctx, b); err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx *Tx) error {
		a, err := lockFetch(ctx, tx, id, owner)
		if err != nil || a.ID == 0 {
			return err
		}
		if err := s.putBlobTx(ctx, tx, b); err != nil {
			return err
		}
		if name = CleanFileName(name); name == "file" || a.Kind == "image" && name == "image" {
			name = a.Name
		}
		mt := sniff("", name, data)
		if a.Kind == "image" && !strings.Contains(name, ".") {
			if ext, _ := mime.ExtensionsByType(mt); len(ext) > 0 {
				name += ext[len(ext)-1]
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE attachment SET state = 'stored', sha256 = $2, size = $3, mime = $4, name = $5,
			claimed_by = '', error = '' WHERE id = $1`, id, b.SHA256, b.Size, mt, name); err != nil {
			return fmt.Errorf("record downloaded file: %w", mapErr(err))
		}
		return releaseItem(ctx, tx, a.ItemID)
	})
}

// FailFetch records a failed download of attachment id. A permanent failure, or the tenth,
// fails the file for good: the item goes to its agent with the file marked failed, and
// notice (when set) tells the chat. Otherwise it is due again after retry.
func (s *Store) FailFetch(ctx context.Context, id int64, owner, reason string, permanent bool, retry time.Duration, notice FileNotice) error {
	return s.WithTx(ctx, func(tx *Tx) error {
		a, err := lockFetch(ctx, tx, id, owner)
		if err != nil || a.ID == 0 {
			return err
		}
		reason = clip(reason)
		if !permanent && a.attempts+1 < 10 {
			_, err := tx.Exec(ctx, `UPDATE attachment SET attempts = attempts + 1, error = $2, claimed_by = '',
				next_attempt_at = now() + $3 * interval '1 microsecond' WHERE id = $1`, id, reason, max(retry, time.Second).Microseconds())
			if err != nil {
				return fmt.Errorf("reschedule file download: %w", mapErr(err))
			}
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE attachment SET state = 'failed', attempts = attempts + 1, error = $2, claimed_by = ''
			WHERE id = $1`, id, reason); err != nil {
			return fmt.Errorf("fail file download: %w", mapErr(err))
		}
		a.State, a.Error = FileFailed, reason
		if notice != nil {
			item, err := GetInboxItem(ctx, tx, a.ItemID)
			if err != nil {
				return err
			}
			rows, err := notice(ctx, tx, a, item)
			if err != nil {
				return err
			}
			if _, err := InsertOutboxAll(ctx, tx, rows); err != nil {
				return err
			}
		}
		return releaseItem(ctx, tx, a.ItemID)
	})
}

func lockFetch(ctx context.Context, db DB, id int64, owner string) (Attachment, error) {
	a, err := scanAttachment(db.QueryRow(ctx, `SELECT `+attachmentCols+` FROM attachment
		WHERE id = $1 AND state = 'fetching' AND claimed_by = $2 FOR UPDATE`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return Attachment{}, nil // settled or taken over meanwhile
	}
	if err != nil {
		return Attachment{}, fmt.Errorf("lock file download: %w", mapErr(err))
	}
	return a, nil
}

// releaseItem hands an inbox item to its agent once none of its files is still being
// fetched, and wakes the agent's heartbeat as a new message does.
func releaseItem(ctx context.Context, db DB, itemID int64) error {
	var goalID, agentID string
	err := db.QueryRow(ctx, `UPDATE inbox_item SET state = 'pending' WHERE id = $1 AND state = 'fetching'
		AND NOT EXISTS (SELECT 1 FROM attachment WHERE inbox_item_id = $1 AND state = 'fetching')
		RETURNING goal_id, agent_id`, itemID).Scan(&goalID, &agentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hand inbox item to its agent: %w", mapErr(err))
	}
	if _, err := db.Exec(ctx, `UPDATE schedule SET rearm = true WHERE goal_id = $1 AND kind = 'heartbeat'
		AND agent_id = $2 AND enabled AND NOT held AND NOT rearm`, goalID, agentID); err != nil {
		return fmt.Errorf("wake agent: %w", mapErr(err))
	}
	if _, err := db.Exec(ctx, `SELECT pg_notify('loopx_schedule', $1)`, goalID); err != nil {
		return fmt.Errorf("wake agent: %w", mapErr(err))
	}
	return nil
}

// GetAttachment reads one file's record.
func GetAttachment(ctx context.Context, db DB, id int64) (Attachment, error) {
	a, err := scanAttachment(db.QueryRow(ctx, `SELECT `+attachmentCols+` FROM attachment WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Attachment{}, Errorf(ErrNotFound, "file_id", "no file %d", id)
	}
	if err != nil {
		return Attachment{}, fmt.Errorf("read file record: %w", mapErr(err))
	}
	return a, nil
}

// GetAttachment reads one file's record.
func (s *Store) GetAttachment(ctx context.Context, id int64) (Attachment, error) {
	return GetAttachment(ctx, s.DB(), id)
}

// FileOwner says what a file belongs to, for authorization: the inbox item's (or replied
// item's) agent, or the evidence's agent.
func (s *Store) FileOwner(ctx context.Context, a Attachment) (agentID string, err error) {
	switch {
	case a.ItemID != 0 || a.ReplyOf != 0:
		it, err := GetInboxItem(ctx, s.DB(), max(a.ItemID, a.ReplyOf))
		return it.AgentID, err
	case a.EvidenceID != 0:
		err := s.DB().QueryRow(ctx, `SELECT agent_id FROM evidence WHERE id = $1`, a.EvidenceID).Scan(&agentID)
		if err != nil {
			return "", fmt.Errorf("read evidence of file: %w", mapErr(err))
		}
		return agentID, nil
	}
	return "", nil
}

// OpenAttachment streams a stored file's content.
func (s *Store) OpenAttachment(ctx context.Context, a Attachment) (io.ReadCloser, error) {
	if a.State != FileStored {
		return nil, Errorf(ErrRefused, "file_id", "file %d has no content: %s", a.ID, strings.TrimSpace(a.State+" "+a.Error))
	}
	sum, err := hex.DecodeString(a.SHA256)
	if err != nil {
		return nil, fmt.Errorf("read file: bad checksum %q", a.SHA256)
	}
	return s.OpenBlob(ctx, sum)
}

// ReadAttachment reads a stored file whole (the sender uploading it to Lark; it is within
// the size cap).
func (s *Store) ReadAttachment(ctx context.Context, id int64) (Attachment, []byte, error) {
	a, err := s.GetAttachment(ctx, id)
	if err != nil {
		return Attachment{}, nil, err
	}
	r, err := s.OpenAttachment(ctx, a)
	if err != nil {
		return a, nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(r, s.maxFile+1)); err != nil {
		return a, nil, fmt.Errorf("read file %d: %w", id, err)
	}
	return a, buf.Bytes(), nil
}

// listAttachments returns the files of the rows whose column is one of ids, by owner id.
func listAttachments(ctx context.Context, db DB, column string, ids []int64) (map[int64][]Attachment, error) {
	out := map[int64][]Attachment{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.Query(ctx, `SELECT `+attachmentCols+` FROM attachment WHERE `+column+` = ANY($1) ORDER BY id`, ids)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", mapErr(err))
	}
	list, err := collect(rows, "list files", scanAttachment)
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		owner := a.ItemID
		switch column {
		case "reply_of":
			owner = a.ReplyOf
		case "evidence_id":
			owner = a.EvidenceID
		}
		out[owner] = append(out[owner], a)
	}
	return out, nil
}

// WithItemFiles fills in the files of inbox items.
func WithItemFiles(ctx context.Context, db DB, items []InboxItem) ([]InboxItem, error) {
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	files, err := listAttachments(ctx, db, "inbox_item_id", ids)
	if err != nil {
		return nil, err
	}
	for i := range items {
		items[i].Files = files[items[i].ID]
	}
	return items, nil
}

// WithEvidenceFiles fills in the files of evidence rows.
func WithEvidenceFiles(ctx context.Context, db DB, es []Evidence) ([]Evidence, error) {
	ids := make([]int64, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	files, err := listAttachments(ctx, db, "evidence_id", ids)
	if err != nil {
		return nil, err
	}
	for i := range es {
		es[i].Files = files[es[i].ID]
	}
	return es, nil
}

// ListGoalFiles lists a goal's evidence files (deliverables), newest first, at most limit.
func ListGoalFiles(ctx context.Context, db DB, goalID string, limit int) ([]Attachment, error) {
	rows, err := db.Query(ctx, `SELECT `+attachmentCols+` FROM attachment WHERE goal_id = $1 AND evidence_id IS NOT NULL
		ORDER BY id DESC LIMIT $2`, goalID, limit)
	if err != nil {
		return nil, fmt.Errorf("list goal files: %w", mapErr(err))
	}
	return collect(rows, "list goal files", scanAttachment)
}

// HumanBytes writes a size as people read it: 512 B, 3.4 KiB, 20 MiB.
func HumanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	case n < 1<<30:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	}
	return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<30))) + " GiB"
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// PruneFiles deletes the contents no file refers to any more (their attachment went with
// its inbox item or evidence), an hour after they were stored so a file being recorded is
// never taken; contents in an S3-compatible store are deleted there first.
func (s *Store) PruneFiles(ctx context.Context, limit int) (int64, error) {
	rows, err := s.DB().Query(ctx, `SELECT sha256, backend FROM file_blob b
		WHERE created_at < now() - interval '1 hour'
		  AND NOT EXISTS (SELECT 1 FROM attachment a WHERE a.sha256 = b.sha256) LIMIT $1`, limit)
	if err != nil {
		return 0, fmt.Errorf("find unused files: %w", mapErr(err))
	}
	type orphan struct {
		sum     []byte
		backend string
	}
	list, err := collect(rows, "find unused files", func(r pgx.Row) (orphan, error) {
		var o orphan
		err := r.Scan(&o.sum, &o.backend)
		return o, err
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, o := range list {
		if o.backend != "pg" {
			if o.backend != s.blobs.Name() {
				continue // kept where this server cannot reach; another may
			}
			if err := s.blobs.Delete(ctx, o.sum); err != nil {
				return n, fmt.Errorf("delete unused file: %w", err)
			}
		}
		tag, err := s.DB().Exec(ctx, `DELETE FROM file_blob b WHERE sha256 = $1
			AND NOT EXISTS (SELECT 1 FROM attachment a WHERE a.sha256 = b.sha256)`, o.sum)
		if err != nil {
			return n, fmt.Errorf("delete unused file: %w", mapErr(err))
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// PendingFiles lists the stored files of the inbox items waiting for an agent (pending, or
// drained and not yet acknowledged), for the turn packet.
func (s *Store) PendingFiles(ctx context.Context, goalID, agentID string) ([]Attachment, error) {
	rows, err := s.DB().Query(ctx, `SELECT `+attachmentCols+` FROM attachment WHERE id IN (
		SELECT a.id FROM attachment a JOIN inbox_item i ON i.id = a.inbox_item_id
		WHERE i.goal_id = $1 AND i.agent_id = $2 AND i.state IN ('pending', 'delivered') AND a.state = 'stored'
		ORDER BY a.id LIMIT 50) ORDER BY id`, goalID, agentID)
	if err != nil {
		return nil, fmt.Errorf("list pending files: %w", mapErr(err))
	}
	return collect(rows, "list pending files", scanAttachment)
}

// FileURL is where the API serves a file's content, under base (LOOPX_URL).
func FileURL(base string, id int64) string {
	return strings.TrimRight(base, "/") + "/v1/files/" + strconv.FormatInt(id, 10)
}

// AttachReply records a file an agent sends back in reply to inbox item it (its content
// staged before), on the Store's executor (join the reply's transaction with In).
func (s *Store) AttachReply(ctx context.Context, it InboxItem, f FileUpload, now time.Time) (Attachment, error) {
	return s.attachTx(ctx, s.DB(), it.GoalID, "reply_of", it.ID, f, now)
}
