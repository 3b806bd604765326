package serve_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/serve"
)

// TestServeDrains: Serve answers on its listener until its context ends, then returns nil
// with the listener closed; bad timeouts are refused before anything is served.
func TestServeDrains(t *testing.T) {
	srv, err := serve.New(serve.Config{}, []serve.Encoder{toyEncoder{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), nil, nil, serve.Timeouts{Read: time.Second, Write: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "shorter than the read timeout") {
		t.Errorf("write < read: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil, serve.Timeouts{}) }()
	url := "http://" + ln.Addr().String() + "/v2/health/ready"
	var resp *http.Response
	for range 100 {
		if resp, err = http.Get(url); err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ready: %v %v", err, resp)
	}
	resp.Body.Close()
	cancel(errors.New("test over"))
	if err := <-done; err != nil {
		t.Fatalf("Serve after its context ended: %v", err)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("the listener still answers after Serve returned")
	}
}
