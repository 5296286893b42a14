package bot

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher/callback"
)

// maxCallbackBody bounds a callback body; Lark events are a few KB.
const maxCallbackBody = 1 << 20

// EventsHandler serves POST /lark/events (Lark's event subscription request URL).
func (in *Intake) EventsHandler() http.Handler { return http.HandlerFunc(in.serveCallback) }

// CardsHandler serves POST /lark/cards (the card callback URL). card.action.trigger callbacks
// carry the same envelope, encryption and signature as events, so both share one handler.
func (in *Intake) CardsHandler() http.Handler { return http.HandlerFunc(in.serveCallback) }

func (in *Intake) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := withTransport(r.Context(), TransportHTTP)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"msg": "use POST"})
		return
	}
	// The body and its plaintext live in pooled buffers until the answer is written: nothing
	// decoded from them keeps a reference (decoding copies every string out).
	bufs := in.bufs.get()
	defer in.bufs.put(bufs)
	body, err := readBody(r.Body, &bufs.body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"msg": "read body failed"})
		return
	}
	if len(body) > maxCallbackBody {
		in.m.eventsRejected.WithLabelValues(TransportHTTP, "too_large").Inc()
		in.log.WarnContext(ctx, "lark callback rejected", "reason", "too_large", "detail", "body larger than 1 MiB")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"msg": "rejected: body larger than 1 MiB"})
		return
	}
	plain, f, reason, err := in.authenticate(r, body, &bufs.plain)
	if errors.Is(err, errVerifiedMalformed) {
		in.malformed(ctx, w, TransportHTTP, "event", err)
		return
	}
	if err != nil {
		in.reject(ctx, w, reason, err.Error())
		return
	}
	if err := in.checkFresh(r); err != nil {
		in.reject(ctx, w, "stale", err.Error())
		return
	}
	if f.Type == "url_verification" {
		// Lark checks the URL once when it is saved: echo the challenge.
		writeJSON(w, http.StatusOK, map[string]string{"challenge": f.Challenge})
		return
	}
	// The two events LoopX handles are handled here: a message from the one decode
	// authenticate made, a card callback decoded into the SDK's types. A verified event whose
	// fields have the wrong types can never be handled, so it is acknowledged and counted
	// instead of answered 5xx (which Lark would redeliver for hours). The dispatcher routes the
	// rest (the events acknowledged and ignored).
	switch f.eventType() {
	case eventMessage:
		if err := in.onMessage(ctx, f); err != nil {
			writeBody(w, http.StatusInternalServerError, answerRetry)
			return
		}
		writeBody(w, http.StatusOK, answerSuccess)
		return
	case eventCardAction:
		var ev callback.CardActionTriggerEvent
		if err := json.Unmarshal(plain, &ev); err != nil {
			in.malformed(ctx, w, TransportHTTP, "card", err)
			return
		}
		res, _ := in.onCardAction(ctx, &ev) // never fails: a failure is a toast
		writeJSON(w, http.StatusOK, res)
		return
	}
	result, err := in.disp.Do(ctx, plain)
	var nf *dispatcher.NotFoundEventHandlerErr
	switch {
	case errors.As(err, &nf):
		in.m.eventsReceived.WithLabelValues(TransportHTTP, "ignored").Inc()
		in.log.DebugContext(ctx, "lark event ignored", "event_type", f.eventType())
		writeJSON(w, http.StatusOK, map[string]string{"msg": "ignored"})
	case err != nil:
		// Not committed: a non-2xx answer makes Lark push the event again.
		writeBody(w, http.StatusInternalServerError, answerRetry)
	case result != nil:
		writeJSON(w, http.StatusOK, result)
	default:
		writeBody(w, http.StatusOK, answerSuccess)
	}
}

// The answers every event gets, encoded once.
const (
	answerSuccess = `{"msg":"success"}`
	answerRetry   = `{"msg":"not processed, retry later"}`
)

// callbackBuffers are one callback's body and plaintext, reused across callbacks.
type callbackBuffers struct{ body, plain []byte }

// bufferPool hands out callbackBuffers. Buffers that grew past keepBuffer (a body near the
// 1 MiB bound) are dropped rather than kept for every later callback.
type bufferPool struct{ p sync.Pool }

const keepBuffer = 64 << 10

func (b *bufferPool) get() *callbackBuffers {
	if v, ok := b.p.Get().(*callbackBuffers); ok {
		return v
	}
	return &callbackBuffers{body: make([]byte, 0, 4096), plain: make([]byte, 0, 4096)}
}

func (b *bufferPool) put(c *callbackBuffers) {
	if cap(c.body) > keepBuffer || cap(c.plain) > keepBuffer {
		return
	}
	c.body, c.plain = c.body[:0], c.plain[:0]
	b.p.Put(c)
}

// readBody reads r into *buf (grown as needed, kept for reuse) up to maxCallbackBody+1 bytes,
// so that a longer body is seen as too large.
func readBody(r io.Reader, buf *[]byte) ([]byte, error) {
	b := (*buf)[:0]
	for len(b) <= maxCallbackBody {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):min(cap(b), maxCallbackBody+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*buf = b
			return nil, err
		}
	}
	*buf = b
	return b, nil
}

// authenticate returns the plaintext event after checking what the configuration allows:
// with an encrypt key, the body must be encrypted with it and carry a valid signature (Lark
// does not sign the URL-verification challenge, which the verification token then covers);
// with a verification token, the token inside the event must match. It returns the plaintext
// parsed into env too: the event is parsed once here, not again by the caller.
func (in *Intake) authenticate(r *http.Request, body []byte, plainBuf *[]byte) (plain []byte, f *frame, reason string, err error) {
	plain = body
	signed := false
	if in.cfg.EncryptKey != "" {
		enc, ok := encryptedField(body)
		if !ok {
			return nil, nil, "not_encrypted", errors.New("body is not encrypted with the encrypt key")
		}
		if sig := r.Header.Get(larkevent.EventSignature); sig != "" {
			want := larkevent.Signature(r.Header.Get(larkevent.EventRequestTimestamp),
				r.Header.Get(larkevent.EventRequestNonce), in.cfg.EncryptKey, string(body))
			if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
				return nil, nil, "bad_signature", errors.New("signature does not match")
			}
			signed = true
		}
		p, err := openEvent(plainBuf, enc, in.block)
		if err != nil {
			return nil, nil, "bad_encryption", errors.New("cannot decrypt with the encrypt key")
		}
		plain = p
	}
	f, err = decodeFrame(plain)
	if err != nil {
		// What a wrong key decrypts to is rarely JSON: that is a key mismatch, not a bad event.
		if in.cfg.EncryptKey != "" && isSyntaxError(err) {
			return nil, nil, "bad_encryption", errors.New("cannot decrypt with the encrypt key")
		}
		// An event whose fields have the wrong types is still Lark's when it is signed, or when
		// its envelope alone decodes and carries the verification token.
		if signed || in.cfg.EncryptKey == "" && in.envelopeVerified(plain) {
			return nil, nil, "malformed", fmt.Errorf("%w: %v", errVerifiedMalformed, err)
		}
		return nil, nil, "malformed", errors.New("body is not a JSON event")
	}
	if in.cfg.EncryptKey != "" && !signed && f.Type != "url_verification" {
		return nil, nil, "bad_signature", errors.New("signature missing")
	}
	if in.cfg.VerificationToken != "" {
		if subtle.ConstantTimeCompare([]byte(f.token()), []byte(in.cfg.VerificationToken)) != 1 {
			return nil, nil, "bad_token", errors.New("verification token does not match")
		}
	} else if f.Type == "url_verification" && !signed {
		// Nothing vouches for an unsigned challenge without a token; refuse rather than echo.
		return nil, nil, "bad_token", errors.New("no verification token configured for the URL challenge")
	}
	return plain, f, "", nil
}

// isSyntaxError reports whether err says the input is not JSON at all (rather than JSON of
// the wrong shape). unmarshalJSON reports errors as encoding/json does, in the v1 types of
// the JSON v2 module; its own syntactic error is checked too.
func isSyntaxError(err error) bool {
	var v1 *jsonv1.SyntaxError
	var v2 *jsontext.SyntacticError
	return errors.As(err, &v1) || errors.As(err, &v2)
}

// envelopeVerified reports whether plain's envelope (its header alone) decodes and carries
// the verification token.
func (in *Intake) envelopeVerified(plain []byte) bool {
	if in.cfg.VerificationToken == "" {
		return false
	}
	var env struct {
		Token  string       `json:"token"`
		Header *frameHeader `json:"header"`
	}
	if unmarshalJSON(plain, &env) != nil {
		return false
	}
	tok := env.Token
	if env.Header != nil {
		tok = env.Header.Token
	}
	return subtle.ConstantTimeCompare([]byte(tok), []byte(in.cfg.VerificationToken)) == 1
}

// encryptedField is the "encrypt" member of an encrypted callback's body. Lark sends exactly
// {"encrypt":"<base64>"}, read here without a JSON decode or a copy; any other shape is
// decoded.
func encryptedField(body []byte) ([]byte, bool) {
	b := bytes.TrimSpace(body)
	const pre, post = `{"encrypt":"`, `"}`
	if bytes.HasPrefix(b, []byte(pre)) && bytes.HasSuffix(b, []byte(post)) {
		v := b[len(pre) : len(b)-len(post)]
		if len(v) > 0 && bytes.IndexAny(v, `"\`) < 0 {
			return v, true
		}
	}
	var outer struct {
		Encrypt string `json:"encrypt"`
	}
	if unmarshalJSON(body, &outer) != nil || outer.Encrypt == "" {
		return nil, false
	}
	return []byte(outer.Encrypt), true
}

// checkFresh refuses a callback whose X-Lark-Request-Timestamp lies outside the window
// (IntakeOptions.MaxCallbackAge, default 1 h) of this server's clock: a captured request
// replayed later. Lark stamps every push, redeliveries included, with the time it is sent.
// With an encrypt key the stamp is signed and must be present; without one it is checked
// when present (nothing vouches for it then).
func (in *Intake) checkFresh(r *http.Request) error {
	if in.maxAge < 0 {
		return nil
	}
	v := r.Header.Get(larkevent.EventRequestTimestamp)
	if v == "" {
		if in.cfg.EncryptKey != "" {
			return errors.New("X-Lark-Request-Timestamp missing")
		}
		return nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("X-Lark-Request-Timestamp %q is not unix seconds", clipHeader(v))
	}
	age := in.now().Sub(time.Unix(sec, 0))
	if age > in.maxAge || age < -in.maxAge {
		return fmt.Errorf("X-Lark-Request-Timestamp is %s from this server's clock; the window is %s", age.Round(time.Second), in.maxAge)
	}
	return nil
}

func clipHeader(v string) string {
	if len(v) > 40 {
		return v[:40] + "…"
	}
	return v
}

// errVerifiedMalformed marks an event whose signature holds but whose JSON does not fit an
// event's shape: Lark signed it, so it is acknowledged, never refused or redelivered.
var errVerifiedMalformed = errors.New("the signed event does not have an event's shape")

// malformed acknowledges a verified event that cannot be decoded (200, so Lark does not
// redeliver it), logs and counts it. A card click gets a toast saying nothing changed.
func (in *Intake) malformed(ctx context.Context, w http.ResponseWriter, transport, kind string, err error) {
	in.m.eventsRejected.WithLabelValues(transport, "malformed").Inc()
	in.log.WarnContext(ctx, "lark event dropped: its fields do not have the types Lark sends", "kind", kind, "err", err)
	if kind == "card" {
		writeJSON(w, http.StatusOK, &callback.CardActionTriggerResponse{Toast: in.unreadable})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"msg": "dropped: malformed event"})
}

func (in *Intake) reject(ctx context.Context, w http.ResponseWriter, reason, detail string) {
	in.m.eventsRejected.WithLabelValues(TransportHTTP, reason).Inc()
	in.log.WarnContext(ctx, "lark callback rejected", "reason", reason, "detail", detail)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"msg": "rejected: " + reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"msg":"encode answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeBody answers status with a JSON body encoded beforehand.
func writeBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// sdkLogger routes the SDK's log lines to slog.
type sdkLogger struct{ l *slog.Logger }

func (s sdkLogger) Debug(ctx context.Context, args ...any) {
	s.l.DebugContext(ctx, "lark sdk", "msg", fmt.Sprint(args...))
}
func (s sdkLogger) Info(ctx context.Context, args ...any) {
	s.l.DebugContext(ctx, "lark sdk", "msg", fmt.Sprint(args...))
}
func (s sdkLogger) Warn(ctx context.Context, args ...any) {
	s.l.WarnContext(ctx, "lark sdk", "msg", fmt.Sprint(args...))
}
func (s sdkLogger) Error(ctx context.Context, args ...any) {
	s.l.ErrorContext(ctx, "lark sdk", "msg", fmt.Sprint(args...))
}

var _ larkcore.Logger = sdkLogger{}

// eventCipher is the AES-256 block of Lark's encrypt key (the key's SHA-256), made once per
// intake.
func eventCipher(key string) (cipher.Block, error) {
	k := sha256.Sum256([]byte(key))
	return aes.NewCipher(k[:])
}

// decryptEvent opens Lark's {"encrypt": …} envelope with key.
func decryptEvent(encrypted, key string) ([]byte, error) {
	block, err := eventCipher(key)
	if err != nil {
		return nil, fmt.Errorf("decrypt event: %w", err)
	}
	var buf []byte
	return openEvent(&buf, []byte(encrypted), block)
}

// openEvent decrypts an encrypted event with block into *dst (grown as needed, kept for
// reuse): base64 of a 16-byte IV and the event encrypted with AES-256-CBC, padded; the JSON
// object inside is returned, a slice of *dst.
func openEvent(dst *[]byte, encrypted []byte, block cipher.Block) ([]byte, error) {
	buf := slices.Grow((*dst)[:0], base64.StdEncoding.DecodedLen(len(encrypted)))
	*dst = buf
	n, err := base64.StdEncoding.Decode(buf[:cap(buf)], encrypted)
	if err != nil {
		return nil, fmt.Errorf("decode encrypted event: %w", err)
	}
	buf = buf[:n]
	if len(buf) < 2*aes.BlockSize || len(buf)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("encrypted event is %d bytes, not an IV and whole AES blocks", len(buf))
	}
	plain := buf[aes.BlockSize:]
	cipher.NewCBCDecrypter(block, buf[:aes.BlockSize]).CryptBlocks(plain, plain)
	first, last := bytes.IndexByte(plain, '{'), bytes.LastIndexByte(plain, '}')
	if first < 0 || last < first {
		return nil, errors.New("decrypted event is not a JSON object")
	}
	return plain[first : last+1], nil
}
