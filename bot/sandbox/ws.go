package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
)

// MaxWSConnections is Lark's limit of long connections per app.
const MaxWSConnections = 50

// ErrNoConnection is returned by PushWS when no WebSocket client is connected.
var ErrNoConnection = errors.New("no websocket client connected")

// WSAck is a client's answer to one pushed frame.
type WSAck struct {
	ConnID string
	Code   int    // 200, or 500 when the handler failed or no handler was registered
	Data   []byte // the handler's answer (a card callback's JSON), nil for events
	BizRT  string // the client's handling time in ms, as it reported it
}

type wsState struct {
	conns    map[string]*wsConn
	tickets  map[string]time.Time
	reject   []int
	connects int
	pings    int
	seq      uint64
}

func newWSState() wsState {
	return wsState{conns: map[string]*wsConn{}, tickets: map[string]time.Time{}}
}

type wsConn struct {
	id      string
	service int32
	sock    *websocket.Conn
	wmu     sync.Mutex // gorilla allows one concurrent writer
	pmu     sync.Mutex
	pending map[string]chan WSAck
	gone    chan struct{}
	once    sync.Once
}

func (c *wsConn) close() {
	c.once.Do(func() {
		close(c.gone)
		_ = c.sock.Close()
	})
}

func (c *wsConn) write(f *larkws.Frame) error {
	b, err := f.Marshal()
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.sock.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := c.sock.WriteMessage(websocket.BinaryMessage, b); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

func (s *Sandbox) wsConfigJSON() []byte {
	c := s.opts.WS
	b, _ := json.Marshal(map[string]int{
		"ReconnectCount": c.ReconnectCount, "ReconnectInterval": c.ReconnectInterval,
		"ReconnectNonce": c.ReconnectNonce, "PingInterval": c.PingInterval,
	})
	return b
}

// wsEndpoint answers the SDK's endpoint discovery with a one-time ticket in the URL, so the
// upgrade is authenticated by the app secret checked here.
func (s *Sandbox) wsEndpoint(r *http.Request, body []byte) answer {
	var req larkws.BootstrapRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("body is not JSON {AppID, AppSecret}: %v", err)
	}
	if req.AppID != s.opts.AppID || req.AppSecret != s.opts.AppSecret {
		return larkErr(http.StatusOK, CodeAppSecretInvalid, "AppID or AppSecret invalid")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ticket := randomHex(16)
	s.ws.tickets[ticket] = s.now().Add(5 * time.Minute)
	device := s.nextIDLocked("dev_")
	service := 1 + rand.Int32N(1<<20)
	q := url.Values{"device_id": {device}, "service_id": {strconv.Itoa(int(service))}, "ticket": {ticket}}
	u := "ws://" + s.ln.Addr().String() + "/ws?" + q.Encode()
	return answer{status: http.StatusOK, body: map[string]any{"code": 0, "msg": "ok", "data": map[string]any{
		"URL": u, "ClientConfig": json.RawMessage(s.wsConfigJSON()),
	}}}
}

func handshakeRefusal(w http.ResponseWriter, status int, authCode int, msg string) {
	w.Header().Set(larkws.HeaderHandshakeStatus, strconv.Itoa(status))
	w.Header().Set(larkws.HeaderHandshakeMsg, msg)
	if authCode != 0 {
		w.Header().Set(larkws.HeaderHandshakeAuthErrCode, strconv.Itoa(authCode))
	}
	httpStatus := status
	if httpStatus < 400 || httpStatus > 599 {
		httpStatus = http.StatusBadRequest
	}
	writeJSON(w, httpStatus, nil, map[string]any{"code": status, "msg": msg})
}

func (s *Sandbox) wsUpgrade(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	if len(s.ws.reject) > 0 {
		status := s.ws.reject[0]
		s.ws.reject = s.ws.reject[1:]
		s.mu.Unlock()
		handshakeRefusal(w, status, 0, "sandbox: handshake rejected on request")
		return
	}
	exp, known := s.ws.tickets[q.Get("ticket")]
	delete(s.ws.tickets, q.Get("ticket"))
	full := len(s.ws.conns) >= MaxWSConnections
	s.mu.Unlock()
	if !known || !s.now().Before(exp) {
		handshakeRefusal(w, larkws.Forbidden, 0, "ticket unknown, used or expired: discover the endpoint again")
		return
	}
	if full {
		handshakeRefusal(w, larkws.AuthFailed, larkws.ExceedConnLimit, "connection limit exceeded")
		return
	}
	service, _ := strconv.Atoi(q.Get("service_id"))
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	sock, err := up.Upgrade(w, r, nil)
	if err != nil {
		s.log.Warn("sandbox: websocket upgrade failed", "err", err)
		return
	}
	c := &wsConn{id: q.Get("device_id"), service: int32(service), sock: sock, pending: map[string]chan WSAck{}, gone: make(chan struct{})}
	s.mu.Lock()
	s.ws.conns[c.id] = c
	s.ws.connects++
	s.mu.Unlock()
	if !s.spawn(func() { s.readLoop(c) }) {
		c.close()
	}
	s.log.Info("sandbox: websocket client connected", "conn_id", c.id)
}

func (s *Sandbox) readLoop(c *wsConn) {
	defer func() {
		c.close()
		s.mu.Lock()
		if s.ws.conns[c.id] == c {
			delete(s.ws.conns, c.id)
		}
		s.mu.Unlock()
		s.log.Info("sandbox: websocket client gone", "conn_id", c.id)
	}()
	for {
		_, msg, err := c.sock.ReadMessage()
		if err != nil {
			return
		}
		var f larkws.Frame
		if err := f.Unmarshal(msg); err != nil {
			s.log.Warn("sandbox: undecodable frame", "conn_id", c.id, "err", err)
			continue
		}
		hs := larkws.Headers(f.Headers)
		switch larkws.FrameType(f.Method) {
		case larkws.FrameTypeControl:
			if hs.GetString(larkws.HeaderType) != string(larkws.MessageTypePing) {
				continue
			}
			s.mu.Lock()
			s.ws.pings++
			s.mu.Unlock()
			pong := &larkws.Frame{SeqID: f.SeqID, LogID: f.LogID, Service: f.Service, Method: int32(larkws.FrameTypeControl),
				Headers: []larkws.Header{{Key: larkws.HeaderType, Value: string(larkws.MessageTypePong)}}, Payload: s.wsConfigJSON()}
			if err := c.write(pong); err != nil {
				return
			}
		case larkws.FrameTypeData:
			var resp larkws.Response
			if err := json.Unmarshal(f.Payload, &resp); err != nil {
				s.log.Warn("sandbox: undecodable ack", "conn_id", c.id, "err", err)
				continue
			}
			id := hs.GetString(larkws.HeaderMessageID)
			c.pmu.Lock()
			ch := c.pending[id]
			c.pmu.Unlock()
			if ch != nil {
				select {
				case ch <- WSAck{ConnID: c.id, Code: resp.StatusCode, Data: resp.Data, BizRT: hs.GetString(larkws.HeaderBizRt)}:
				default:
				}
			}
		}
	}
}

// PushWS writes payload as one event frame to the connection connID, or to a random
// connected client when connID is "" (Lark's cluster mode), and waits for its ack up to the
// ack budget. It makes exactly one push; Deliver adds the redelivery ladder.
func (s *Sandbox) PushWS(ctx context.Context, connID string, payload []byte) (WSAck, error) {
	s.mu.Lock()
	var c *wsConn
	if connID != "" {
		c = s.ws.conns[connID]
	} else if len(s.ws.conns) > 0 {
		ids := make([]string, 0, len(s.ws.conns))
		for id := range s.ws.conns {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		c = s.ws.conns[ids[rand.IntN(len(ids))]]
	}
	s.ws.seq++
	seq := s.ws.seq
	frameID := s.nextIDLocked("wsm_")
	s.mu.Unlock()
	if c == nil {
		if connID != "" {
			return WSAck{}, fmt.Errorf("push over websocket: connection %q: %w", connID, ErrNoConnection)
		}
		return WSAck{}, fmt.Errorf("push over websocket: %w", ErrNoConnection)
	}

	ch := make(chan WSAck, 1)
	c.pmu.Lock()
	c.pending[frameID] = ch
	c.pmu.Unlock()
	defer func() {
		c.pmu.Lock()
		delete(c.pending, frameID)
		c.pmu.Unlock()
	}()

	f := &larkws.Frame{SeqID: seq, LogID: seq, Service: c.service, Method: int32(larkws.FrameTypeData), Payload: payload}
	hs := larkws.Headers{}
	hs.Add(larkws.HeaderType, string(larkws.MessageTypeEvent))
	hs.Add(larkws.HeaderMessageID, frameID)
	hs.Add(larkws.HeaderSum, "1")
	hs.Add(larkws.HeaderSeq, "0")
	hs.Add(larkws.HeaderTraceID, randomHex(8))
	hs.Add(larkws.HeaderTimestamp, msString(s.now()))
	f.Headers = hs
	if err := c.write(f); err != nil {
		c.close()
		return WSAck{ConnID: c.id}, fmt.Errorf("push over websocket to %s: %w", c.id, err)
	}
	t := time.NewTimer(s.opts.AckBudget)
	defer t.Stop()
	select {
	case ack := <-ch:
		return ack, nil
	case <-c.gone:
		return WSAck{ConnID: c.id}, fmt.Errorf("push over websocket to %s: connection closed before the ack", c.id)
	case <-t.C:
		return WSAck{ConnID: c.id}, fmt.Errorf("push over websocket to %s: no ack within %v", c.id, s.opts.AckBudget)
	case <-ctx.Done():
		return WSAck{ConnID: c.id}, fmt.Errorf("push over websocket to %s: %w", c.id, ctx.Err())
	}
}

// DropConnections closes every WebSocket connection, as a gateway restart does; the SDK
// rediscovers the endpoint and reconnects. It returns how many were closed.
func (s *Sandbox) DropConnections() int {
	s.mu.Lock()
	conns := make([]*wsConn, 0, len(s.ws.conns))
	for id, c := range s.ws.conns {
		conns = append(conns, c)
		delete(s.ws.conns, id)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return len(conns)
}

// RejectNextHandshake makes the next n WebSocket upgrades fail with Handshake-Status status
// (403 is fatal to the SDK; 5xx makes it retry).
func (s *Sandbox) RejectNextHandshake(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.ws.reject = append(s.ws.reject, status)
	}
}

// WSConnections lists the ids of the connected WebSocket clients, sorted.
func (s *Sandbox) WSConnections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.ws.conns))
	for id := range s.ws.conns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// WSConnects counts the WebSocket handshakes accepted so far (reconnects included).
func (s *Sandbox) WSConnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ws.connects
}

// WSPings counts the pings received from clients.
func (s *Sandbox) WSPings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ws.pings
}
