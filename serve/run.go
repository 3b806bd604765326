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
	// Grace is how long requests that are running (their request has arrived) may take to
	// finish once Serve's context ends (30s).
	Grace time.Duration
	// Arrival is how long, once Serve's context ends, a request still arriving (its body, or a
	// gRPC stream's message) may take to arrive (2s); then its connection is cut, so that a
	// stalled client does not hold the exit.
	Arrival time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&t.Header, 10 * time.Second}, {&t.Read, 30 * time.Second}, {&t.Write, time.Minute}, {&t.Idle, 2 * time.Minute}, {&t.Grace, 30 * time.Second}, {&t.Arrival, 2 * time.Second}} {
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
	if t.Header < 0 || t.Read < 0 || t.Write < 0 || t.Idle < 0 || t.Grace < 0 || t.Arrival < 0 {
		return fmt.Errorf("serve: timeouts must not be negative")
	}
	t = t.withDefaults()
	if t.Write < t.Read {
		return fmt.Errorf("serve: the write timeout %s is shorter than the read timeout %s", t.Write, t.Read)
	}
	var gs *grpc.Server
	if grpcLn != nil {
		gs = s.GRPC(t)
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
	start := time.Now()
	shutdown, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpDone := make(chan error, 1)
	go func() { httpDone <- hs.Shutdown(shutdown) }()
	grpcDone := make(chan struct{})
	if gs != nil {
		go func() { gs.GracefulStop(); close(grpcDone) }()
	} else {
		close(grpcDone)
	}
	// Wait for the running requests (within the grace) and for requests still arriving
	// (within the arrival time); then whatever connections are left are stalled clients,
	// and are cut.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	httpIdle, grpcIdle := false, false
	var late error
	for !httpIdle || !grpcIdle {
		select {
		case err := <-httpDone:
			httpIdle = true
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			continue
		case <-grpcDone:
			grpcIdle, grpcDone = true, nil
			continue
		case <-tick.C:
		}
		el := time.Since(start)
		running, arriving := s.running.Load(), s.arriving.Load()
		if el >= t.Grace && running > 0 {
			late = fmt.Errorf("serve: %d requests still running after %s", running, t.Grace)
		}
		if late != nil || (running == 0 && (arriving == 0 || el >= t.Arrival)) {
			cancel()
			hs.Close()
			if gs != nil {
				gs.Stop()
			}
			break
		}
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	if late != nil {
		return late
	}
	s.log.Info("stopped", "drain_ms", time.Since(start).Milliseconds())
	return nil
}
