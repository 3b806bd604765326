package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stallGRPC opens a connection to a gRPC server at addr and starts n ModelInfer streams on
// it, each sending its headers and 15 bytes of a 100-byte message, then nothing more. It
// returns the connection (the caller closes it) and the number of streams the server
// refused (RST_STREAM) within settle.
func stallGRPC(addr string, n int, settle time.Duration) (net.Conn, int, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, 0, err
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		conn.Close()
		return nil, 0, err
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	msg := append([]byte{0, 0, 0, 0, 100}, make([]byte, 10)...)
	for i := 0; i < n; i++ {
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/inference.GRPCInferenceService/ModelInfer"},
			{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			conn.Close()
			return nil, 0, err
		}
		if err := fr.WriteData(id, false, msg); err != nil {
			conn.Close()
			return nil, 0, err
		}
	}
	// Read frames for a while: SETTINGS, window updates, and the refused streams.
	refused := 0
	conn.SetReadDeadline(time.Now().Add(settle))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.ErrCode == http2.ErrCodeRefusedStream {
				refused++
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	}
	conn.SetReadDeadline(time.Time{})
	return conn, refused, nil
}

func settleGoroutines(want int, within time.Duration) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(within); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// TestGRPCStalls: one connection may hold at most MaxStreams streams (the others are
// refused), and a stream whose message stalls is cancelled after the read timeout, so the
// goroutines come back with the connection still open.
func TestGRPCStalls(t *testing.T) {
	s, err := New(Config{MaxStreams: 10}, []Encoder{(&fakeModel{}).model()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.Serve(ctx, ln, gln, Timeouts{Read: 500 * time.Millisecond, Arrival: 200 * time.Millisecond})
	}()
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	conn, refused, err := stallGRPC(gln.Addr().String(), 200, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	during := runtime.NumGoroutine()
	if refused < 180 || during-before > 40 {
		t.Errorf("200 streams on one connection with MaxStreams 10: %d refused, goroutines %d → %d", refused, before, during)
	}
	if after := settleGoroutines(before+5, 3*time.Second); after > before+5 {
		t.Errorf("stalled streams still held after the read timeout: goroutines %d → %d → %d", before, during, after)
	}
	// A stalled HTTP body and a stalled gRPC stream do not hold the drain past Arrival.
	hc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	fmt.Fprintf(hc, "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inputs\":")
	conn2, _, err := stallGRPC(gln.Addr().String(), 1, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	t0 := time.Now()
	cancel(errors.New("test over"))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("drain with stalled clients took %s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still draining 10s after its context ended")
	}
}

// TestDrainWaitsForRunning: a request that is running when the drain starts is answered.
func TestDrainWaitsForRunning(t *testing.T) {
	f := &fakeModel{gate: make(chan struct{}), ran: make(chan struct{}, 1)}
	s, err := New(Config{}, []Encoder{f.model()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil, Timeouts{Arrival: 50 * time.Millisecond}) }()
	answered := make(chan string, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/embed", "application/json", strings.NewReader(`{"inputs":"abc"}`))
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	<-f.ran
	cancel(errors.New("test over"))
	time.Sleep(300 * time.Millisecond) // well past Arrival: the running request holds the drain
	f.gate <- struct{}{}
	if a := <-answered; !strings.HasPrefix(a, "200 [[") {
		t.Errorf("the running request: %s", a)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
