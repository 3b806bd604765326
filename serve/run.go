package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
)

// Timeouts bound a served connection; a zero field takes the default named beside it.
type Timeouts struct {
	// Header bounds the arrival of a request's headers, and of the gRPC port's HTTP/2
	// handshake (10s, or Read when shorter).
	Header time.Duration
	// Read bounds the arrival of a whole request, body included (30s); a client dribbling
	// bytes is cut off (408 when the body is late, the connection closed when the headers
	// are) and holds only its own goroutine meanwhile, never a batch slot.
	Read time.Duration
	// Write runs from the end of the headers to the end of the answer, as Go's http.Server
	// measures it, so it covers the read, the queue, the batch and the write (60s).
	Write time.Duration
	// Idle closes a keep-alive connection (or gRPC connection) idle this long (2m).
	Idle time.Duration
	// Grace is how long in-flight requests may take to finish once Serve's context ends (30s).
	Grace time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&t.Header, 10 * time.Second}, {&t.Read, 30 * time.Second}, {&t.Write, time.Minute}, {&t.Idle, 2 * time.Minute}, {&t.Grace, 30 * time.Second}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	t.Header = min(t.Header, t.Read)
	return t
}

// Serve starts the server (Start), answers REST on ln and, when grpcLn is not nil, gRPC on
// grpcLn until ctx ends, then drains: readiness turns false, the listeners close, in-flight
// requests finish within t.Grace, the batchers stop, and Serve returns nil. A listener that
// fails returns its error at once; requests still running when the grace ends make Serve
// return an error saying so. Negative timeouts, or a write timeout shorter than the read
// timeout, are an error before anything is served.
func (s *Server) Serve(ctx context.Context, ln, grpcLn net.Listener, t Timeouts) error {
	if t.Header < 0 || t.Read < 0 || t.Write < 0 || t.Idle < 0 || t.Grace < 0 {
		return fmt.Errorf("serve: timeouts must not be negative")
	}
	t = t.withDefaults()
	if t.Write < t.Read {
		return fmt.Errorf("serve: the write timeout %s is shorter than the read timeout %s", t.Write, t.Read)
	}
	var gs *grpc.Server
	if grpcLn != nil {
		gs = s.GRPC(t.Header, t.Idle)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: t.Header, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.Start()
	defer s.Stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	grpcServed := make(chan error, 1)
	if gs != nil {
		go func() { grpcServed <- gs.Serve(grpcLn) }()
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case err := <-grpcServed:
		return fmt.Errorf("serve gRPC: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("draining", "cause", context.Cause(ctx).Error())
	s.SetReady(false)
	shutdown, cancel := context.WithTimeout(context.Background(), t.Grace)
	defer cancel()
	if gs != nil {
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		defer func() {
			select {
			case <-stopped:
			case <-shutdown.Done():
				gs.Stop()
			}
		}()
	}
	if err := hs.Shutdown(shutdown); err != nil {
		return fmt.Errorf("serve: requests still in flight after %s: %w", t.Grace, err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}
