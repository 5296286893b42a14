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
	"strconv"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher/callback"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
)

// maxCallbackBody bounds a callback body; Lark events are a few KB.
const maxCallbackBody = 1 << 20

// EventsHandler serves POST /lark/events (Lark's event subscription request URL).
func (in *Intake) EventsHandler() http.Handler { return http.HandlerFunc(in.serveCallback) }

// CardsHandler serves POST /lark/cards (the card callback URL). card.action.trigger callbacks
// carry the same envelope, encryption and signature as events, so both share one handler.
func (in *Intake) CardsHandler() http.Handler { return http.HandlerFunc(in.serveCallback) }

type envelope struct {
	Encrypt   string `json:"encrypt"`
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
	Token     string `json:"token"`
	Header    *struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
		Token     string `json:"token"`
	} `json:"header"`
}

func (in *Intake) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := withTransport(r.Context(), TransportHTTP)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"msg": "use POST"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCallbackBody+1))
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
	plain, env, reason, err := in.authenticate(r, body)
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
	if env.Type == "url_verification" {
		// Lark checks the URL once when it is saved: echo the challenge.
		writeJSON(w, http.StatusOK, map[string]string{"challenge": env.Challenge})
		return
	}
	// The two events LoopX handles are decoded here, once, into the SDK's types: a verified
	// event whose fields have the wrong types can never be handled, so it is acknowledged and
	// counted instead of answered 5xx (which Lark would redeliver for hours). The dispatcher
	// routes the rest (the events acknowledged and ignored).
	switch eventType(env) {
	case eventMessage:
		var ev larkim.P2MessageReceiveV1
		if err := json.Unmarshal(plain, &ev); err != nil {
			in.malformed(ctx, w, TransportHTTP, "message", err)
			return
		}
		if err := in.onMessage(ctx, &ev); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"msg": "not processed, retry later"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"msg": "success"})
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
		in.log.DebugContext(ctx, "lark event ignored", "event_type", eventType(env))
		writeJSON(w, http.StatusOK, map[string]string{"msg": "ignored"})
	case err != nil:
		// Not committed: a non-2xx answer makes Lark push the event again.
		writeJSON(w, http.StatusInternalServerError, map[string]string{"msg": "not processed, retry later"})
	case result != nil:
		writeJSON(w, http.StatusOK, result)
	default:
		writeJSON(w, http.StatusOK, map[string]string{"msg": "success"})
	}
}

func eventType(env envelope) string {
	if env.Header != nil {
		return env.Header.EventType
	}
	return env.Type
}

// authenticate returns the plaintext event after checking what the configuration allows:
// with an encrypt key, the body must be encrypted with it and carry a valid signature (Lark
// does not sign the URL-verification challenge, which the verification token then covers);
// with a verification token, the token inside the event must match. It returns the plaintext
// parsed into env too: the event is parsed once here, not again by the caller.
func (in *Intake) authenticate(r *http.Request, body []byte) (plain []byte, env envelope, reason string, err error) {
	plain = body
	signed := false
	if in.cfg.EncryptKey != "" {
		var outer struct {
			Encrypt string `json:"encrypt"`
		}
		if json.Unmarshal(body, &outer) != nil || outer.Encrypt == "" {
			return nil, env, "not_encrypted", errors.New("body is not encrypted with the encrypt key")
		}
		if sig := r.Header.Get(larkevent.EventSignature); sig != "" {
			want := larkevent.Signature(r.Header.Get(larkevent.EventRequestTimestamp),
				r.Header.Get(larkevent.EventRequestNonce), in.cfg.EncryptKey, string(body))
			if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
				return nil, env, "bad_signature", errors.New("signature does not match")
			}
			signed = true
		}
		p, err := decryptEvent(outer.Encrypt, in.cfg.EncryptKey)
		if err != nil {
			return nil, env, "bad_encryption", errors.New("cannot decrypt with the encrypt key")
		}
		plain = p
	}
	if err := json.Unmarshal(plain, &env); err != nil {
		// What a wrong key decrypts to is rarely JSON: that is a key mismatch, not a bad event.
		var syntax *json.SyntaxError
		if in.cfg.EncryptKey != "" && errors.As(err, &syntax) {
			return nil, env, "bad_encryption", errors.New("cannot decrypt with the encrypt key")
		}
		if signed {
			return nil, env, "malformed", fmt.Errorf("%w: %v", errVerifiedMalformed, err)
		}
		return nil, env, "malformed", errors.New("body is not a JSON event")
	}
	if in.cfg.EncryptKey != "" && !signed && env.Type != "url_verification" {
		return nil, env, "bad_signature", errors.New("signature missing")
	}
	if in.cfg.VerificationToken != "" {
		tok := env.Token
		if env.Header != nil {
			tok = env.Header.Token
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(in.cfg.VerificationToken)) != 1 {
			return nil, env, "bad_token", errors.New("verification token does not match")
		}
	} else if env.Type == "url_verification" && !signed {
		// Nothing vouches for an unsigned challenge without a token; refuse rather than echo.
		return nil, env, "bad_token", errors.New("no verification token configured for the URL challenge")
	}
	return plain, env, "", nil
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
		writeJSON(w, http.StatusOK, &callback.CardActionTriggerResponse{Toast: &callback.Toast{Type: "error", Content: unreadableClick}})
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

// decryptEvent opens Lark's {"encrypt": …} envelope: base64 of a 16-byte IV and the event
// JSON, AES-256-CBC under sha256(encrypt key). Like the SDK's EventDecrypt it keeps what lies
// between the first "{" and the last "}" (the padding); unlike it, it never panics: with a
// wrong key or forged bytes the SDK sliced past its buffer when the last "}" came before the
// first "{", which an unsigned request could trigger.
func decryptEvent(encrypted, key string) ([]byte, error) {
	buf, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return nil, fmt.Errorf("decode encrypted event: %w", err)
	}
	if len(buf) < 2*aes.BlockSize || len(buf)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("encrypted event is %d bytes, not an IV and whole AES blocks", len(buf))
	}
	k := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, fmt.Errorf("decrypt event: %w", err)
	}
	plain := buf[aes.BlockSize:]
	cipher.NewCBCDecrypter(block, buf[:aes.BlockSize]).CryptBlocks(plain, plain)
	first, last := bytes.IndexByte(plain, '{'), bytes.LastIndexByte(plain, '}')
	if first < 0 || last < first {
		return nil, errors.New("decrypted event is not a JSON object")
	}
	return plain[first : last+1], nil
}
