package bot

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
)

// WSOptions tunes the long connection's watchdog.
type WSOptions struct {
	// StallAfter: a link that has been down (not ready) this long although the SDK is still
	// trying, or that has delivered nothing and not reconnected for Silence, is torn down and
	// replaced by a fresh client. Default 3 min.
	StallAfter time.Duration
	// Silence: with no event and no (re)connect for this long, the link is presumed half-open
	// and replaced. Default 1 h; 0 keeps the default, negative disables.
	Silence time.Duration
	// RestartBackoff is the pause before a replacement client starts. Default 1 s.
	RestartBackoff time.Duration
	// Check is how often the watchdog looks. Default 5 s.
	Check time.Duration
}

func (o WSOptions) withDefaults() WSOptions {
	if o.StallAfter <= 0 {
		o.StallAfter = 3 * time.Minute
	}
	if o.Silence == 0 {
		o.Silence = time.Hour
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = time.Second
	}
	if o.Check <= 0 {
		o.Check = 5 * time.Second
	}
	return o
}

// Connected reports whether the WS link is up (for /readyz).
func (in *Intake) Connected() bool { return in.connected.Load() }

func (in *Intake) touch() { in.lastActivity.Store(in.now().UnixNano()) }

// RunWS holds the long connection until ctx ends. The SDK reconnects by itself; the watchdog
// replaces the whole client when the link stays down or silent for too long, or when the
// client stops with an error (a stopped SDK client cannot be restarted). It returns nil on
// cancel, or the error when Lark refuses the app (bad credentials, long connection not enabled).
func (in *Intake) RunWS(ctx context.Context) error {
	for {
		err := in.runWSOnce(ctx)
		in.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		var ce *larkws.ClientError
		if errors.As(err, &ce) {
			return fmt.Errorf("lark long connection refused: %w", err)
		}
		in.m.wsReconnects.Inc()
		in.log.WarnContext(ctx, "lark long connection restarting", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(in.wsOpts.RestartBackoff):
		}
	}
}

var errWatchdog = errors.New("watchdog: link stalled")

func (in *Intake) runWSOnce(ctx context.Context) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	in.touch()
	var downSince atomic.Int64
	downSince.Store(in.now().UnixNano())
	cli := larkws.NewClient(in.cfg.AppID, in.cfg.AppSecret,
		larkws.WithDomain(in.cfg.BaseURL),
		larkws.WithEventHandler(in.disp),
		larkws.WithLogger(sdkLogger{in.log}),
		larkws.WithLogLevel(larkcore.LogLevelWarn),
		larkws.WithOnReady(func() {
			in.connected.Store(true)
			downSince.Store(0)
			in.touch()
			in.log.Info("lark long connection ready")
		}),
		larkws.WithOnReconnected(func() {
			in.connected.Store(true)
			downSince.Store(0)
			in.touch()
			in.m.wsReconnects.Inc()
		}),
		larkws.WithOnDisconnected(func() {
			in.connected.Store(false)
			downSince.Store(in.now().UnixNano())
		}),
		larkws.WithOnReconnecting(func() {
			in.connected.Store(false)
			if downSince.Load() == 0 {
				downSince.Store(in.now().UnixNano())
			}
		}),
	)
	done := make(chan error, 1)
	go func() { done <- cli.Start(runCtx) }()
	tick := time.NewTicker(in.wsOpts.Check)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if cause := context.Cause(runCtx); errors.Is(cause, errWatchdog) {
				return cause
			}
			if err == nil {
				err = errors.New("long connection client stopped")
			}
			return err
		case <-tick.C:
			now := in.now()
			if d := downSince.Load(); d != 0 && now.Sub(time.Unix(0, d)) > in.wsOpts.StallAfter {
				in.log.Warn("lark long connection down too long; replacing the client", "down_for", now.Sub(time.Unix(0, d)))
				cancel(errWatchdog)
			} else if in.wsOpts.Silence > 0 && now.Sub(time.Unix(0, in.lastActivity.Load())) > in.wsOpts.Silence {
				in.log.Warn("lark long connection silent too long; replacing the client")
				cancel(errWatchdog)
			}
		}
	}
}
