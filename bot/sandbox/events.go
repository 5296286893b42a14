package sandbox

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Transports an event can travel over.
const (
	TransportHTTP = "http"
	TransportWS   = "ws"
)

// Delivery tracks one event through its pushes: the first and Lark's redeliveries, all with
// the same event id.
type Delivery struct {
	EventID   string
	EventType string
	MessageID string // the user's message, for im.message.receive_v1
	Payload   []byte // the plain schema-2.0 event JSON
	card      bool
	done      chan struct{}
	res       DeliveryResult
}

// DeliveryResult is the outcome of a delivery.
type DeliveryResult struct {
	Acked     bool   // answered 200 (HTTP) or acked with code 200 (WS)
	Skipped   bool   // not pushed at all (a group message that does not mention the bot)
	Attempts  int    // pushes made
	Transport string // transport of the last push
	Status    int    // HTTP status or WS ack code of the last push, 0 when nothing answered
	Body      []byte // HTTP answer body or WS ack data of the last push
	Err       string // why the last push failed, "" when acked
}

// Done is closed when the delivery was acked or gave up.
func (d *Delivery) Done() <-chan struct{} { return d.done }

// Wait blocks until the delivery is acked or gives up, or ctx ends.
func (d *Delivery) Wait(ctx context.Context) (DeliveryResult, error) {
	select {
	case <-d.done:
		return d.res, nil
	case <-ctx.Done():
		return DeliveryResult{}, fmt.Errorf("wait for delivery of %s: %w", d.EventID, ctx.Err())
	}
}

// envelope wraps an event body in Lark's schema-2.0 header.
func (s *Sandbox) envelope(eventID, eventType string, event any) ([]byte, error) {
	b, err := json.Marshal(map[string]any{
		"schema": "2.0",
		"header": map[string]any{
			"event_id": eventID, "token": s.opts.VerificationToken, "create_time": msString(s.now()),
			"event_type": eventType, "tenant_key": s.opts.TenantKey, "app_id": s.opts.AppID,
		},
		"event": event,
	})
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", eventType, err)
	}
	return b, nil
}

// Deliver pushes a new event (a fresh event id) of eventType whose "event" object is event,
// over the active transport, with Lark's redelivery ladder. It returns at once.
func (s *Sandbox) Deliver(eventType string, event any) (*Delivery, error) {
	return s.deliver(eventType, event, "")
}

func (s *Sandbox) deliver(eventType string, event any, messageID string) (*Delivery, error) {
	if eventType == "" {
		return nil, &InputError{Field: "eventType", Msg: "must not be empty"}
	}
	s.mu.Lock()
	id := s.nextIDLocked("ev_")
	s.mu.Unlock()
	payload, err := s.envelope(id, eventType, event)
	if err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	d := &Delivery{EventID: id, EventType: eventType, MessageID: messageID, Payload: payload, done: make(chan struct{})}
	s.startDelivery(d)
	return d, nil
}

// Redeliver pushes the same event again (same event id and payload), as Lark does for an
// event that was answered but is delivered once more.
func (s *Sandbox) Redeliver(d *Delivery) *Delivery {
	again := &Delivery{EventID: d.EventID, EventType: d.EventType, MessageID: d.MessageID, Payload: d.Payload, card: d.card, done: make(chan struct{})}
	s.startDelivery(again)
	return again
}

func (s *Sandbox) startDelivery(d *Delivery) {
	started := s.spawn(func() {
		defer close(d.done)
		d.res = s.deliverLoop(d)
		if !d.res.Acked {
			s.log.Warn("sandbox: event not acknowledged, giving up", "event_id", d.EventID, "event_type", d.EventType, "attempts", d.res.Attempts, "last", d.res.Err)
		}
	})
	if !started {
		d.res = DeliveryResult{Err: "sandbox closed"}
		close(d.done)
	}
}

func (s *Sandbox) deliverLoop(d *Delivery) DeliveryResult {
	var res DeliveryResult
	for i := 0; ; i++ {
		res = s.pushOnce(s.bg, d)
		res.Attempts = i + 1
		if res.Acked || i >= len(s.opts.RetryIntervals) {
			return res
		}
		s.log.Info("sandbox: push failed, redelivering", "event_id", d.EventID, "attempt", i+1, "err", res.Err)
		t := time.NewTimer(s.opts.RetryIntervals[i])
		select {
		case <-t.C:
		case <-s.bg.Done():
			t.Stop()
			res.Err = "sandbox closed"
			return res
		}
	}
}

// pushOnce makes one push of d over the transport active now.
func (s *Sandbox) pushOnce(ctx context.Context, d *Delivery) DeliveryResult {
	s.mu.Lock()
	url := s.eventURL
	if d.card && s.cardURL != "" {
		url = s.cardURL
	}
	s.mu.Unlock()
	if url != "" {
		status, body, err := s.PushHTTP(ctx, url, d.Payload)
		res := DeliveryResult{Transport: TransportHTTP, Status: status, Body: body}
		switch {
		case err != nil:
			res.Err = err.Error()
		case status != http.StatusOK:
			res.Err = "answered HTTP " + strconv.Itoa(status)
		default:
			res.Acked = true
		}
		return res
	}
	ack, err := s.PushWS(ctx, "", d.Payload)
	res := DeliveryResult{Transport: TransportWS, Status: ack.Code, Body: ack.Data}
	switch {
	case err != nil:
		res.Err = err.Error()
	case ack.Code != http.StatusOK:
		res.Err = "acked with code " + strconv.Itoa(ack.Code)
	default:
		res.Acked = true
	}
	return res
}

// BuildHTTPRequest builds the POST Lark makes to a callback URL for payload: the body
// encrypted as {"encrypt": base64(iv + AES-256-CBC)} with key sha256(EncryptKey) when an
// encrypt key is set, and the X-Lark-Request-Timestamp, X-Lark-Request-Nonce and
// X-Lark-Signature (hex sha256 of timestamp + nonce + encrypt key + body) headers. Tests may
// tamper with it to forge a request.
func (s *Sandbox) BuildHTTPRequest(ctx context.Context, url string, payload []byte) (*http.Request, error) {
	body := payload
	if s.opts.EncryptKey != "" {
		enc, err := Encrypt(payload, s.opts.EncryptKey)
		if err != nil {
			return nil, fmt.Errorf("build callback request: %w", err)
		}
		body, err = json.Marshal(map[string]string{"encrypt": enc})
		if err != nil {
			return nil, fmt.Errorf("build callback request: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build callback request: %w", err)
	}
	ts := strconv.FormatInt(s.now().Unix(), 10)
	nonce := randomHex(8)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Lark-Sandbox")
	req.Header.Set("X-Lark-Request-Timestamp", ts)
	req.Header.Set("X-Lark-Request-Nonce", nonce)
	req.Header.Set("X-Lark-Signature", Sign(ts, nonce, s.opts.EncryptKey, body))
	return req, nil
}

// PushHTTP makes one signed (and, with an encrypt key, encrypted) push of payload to url and
// returns the answer. An answer slower than the ack budget is an error, as Lark counts it
// failed.
func (s *Sandbox) PushHTTP(ctx context.Context, url string, payload []byte) (int, []byte, error) {
	req, err := s.BuildHTTPRequest(ctx, url, payload)
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("push event: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read callback answer: %w", err)
	}
	return resp.StatusCode, body, nil
}

// Sign is Lark's event signature: hex(sha256(timestamp + nonce + encryptKey + body)).
func Sign(timestamp, nonce, encryptKey string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(timestamp + nonce + encryptKey))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Encrypt is Lark's event encryption: base64(iv + AES-256-CBC(PKCS#7(plain))) with the key
// sha256(encryptKey) and a random iv.
func Encrypt(plain []byte, encryptKey string) (string, error) {
	if encryptKey == "" {
		return "", errors.New("encrypt: empty encrypt key")
	}
	k := sha256.Sum256([]byte(encryptKey))
	blk, err := aes.NewCipher(k[:])
	if err != nil {
		return "", fmt.Errorf("encrypt: %w", err)
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	buf := append(append([]byte{}, plain...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, aes.BlockSize+len(buf))
	if _, err := rand.Read(out[:aes.BlockSize]); err != nil {
		return "", fmt.Errorf("encrypt: %w", err)
	}
	cipher.NewCBCEncrypter(blk, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], buf)
	return base64.StdEncoding.EncodeToString(out), nil
}

// VerifyCallbackURL sends Lark's URL verification to url, as the developer console does when
// a callback URL is saved: {"type":"url_verification","challenge","token"} (encrypted when
// an encrypt key is set). It fails unless the answer is 200 with the same challenge.
func (s *Sandbox) VerifyCallbackURL(ctx context.Context, url string) error {
	challenge := randomHex(12)
	payload, err := json.Marshal(map[string]string{"type": "url_verification", "challenge": challenge, "token": s.opts.VerificationToken})
	if err != nil {
		return fmt.Errorf("verify callback url: %w", err)
	}
	status, body, err := s.PushHTTP(ctx, url, payload)
	if err != nil {
		return fmt.Errorf("verify callback url: %w", err)
	}
	var ans struct {
		Challenge string `json:"challenge"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Challenge != challenge {
		return fmt.Errorf("verify callback url %s: answered %d %q, want 200 {\"challenge\":%q}", url, status, body, challenge)
	}
	return nil
}
