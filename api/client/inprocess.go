package client

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// InProcess returns a RoundTripper that serves each request with h in the calling goroutine,
// without a network connection. Use it as the Transport of Options.HTTPClient to call the
// API from inside `loopx serve`: the request passes the same handler chain (authentication,
// idempotency receipts, metrics) as one that arrived over the network.
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h: h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	// The handler reads RequestURI-less server requests: give it what a server would.
	sreq := req.Clone(req.Context())
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "in-process"
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	w := &recorder{header: http.Header{}}
	t.h.ServeHTTP(w, sreq)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// recorder is the ResponseWriter an in-process request writes to.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
