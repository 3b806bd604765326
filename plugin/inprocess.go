package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/zoo-dev/zoo/zoo/variant"
)

// startInProcess serves v on goroutines of this process with go-plugin's test mode (the same
// gRPC server and ServeConfig as a plugin process) and attaches a client to it. ctx and
// opts.StartTimeout bound the start.
func startInProcess(ctx context.Context, name string, v variant.Variant, opts HostOptions) (*Client, error) {
	serveCtx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *goplugin.ReattachConfig, 1)
	closed := make(chan struct{})
	logger := hclog.NewNullLogger()
	if opts.Logs != nil && opts.Verbose {
		logger = hclog.New(&hclog.LoggerOptions{Name: "plugin." + name, Level: hclog.Debug, Output: opts.Logs})
	}
	cfg := serveConfig(v, logger)
	cfg.Test = &goplugin.ServeTestConfig{Context: serveCtx, ReattachConfigCh: reattach, CloseCh: closed}
	go goplugin.Serve(cfg)
	stop := func() {
		cancel()
		select {
		case <-closed:
		case <-time.After(killWait):
		}
	}
	t := time.NewTimer(opts.StartTimeout)
	defer t.Stop()
	var rc *goplugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-ctx.Done():
		stop()
		return nil, stopped(name, "", "start", ctx)
	case <-t.C:
		stop()
		return nil, &Error{Kind: ErrTimeout, Plugin: name, Msg: fmt.Sprintf("the in-process server did not start within %s", opts.StartTimeout)}
	}
	pc := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          pluginSets(&GRPCPlugin{}, ProtocolVersion)[ProtocolVersion],
		Reattach:         rc,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hostLogger(name, opts),
		GRPCDialOptions:  dialOptions(),
	})
	c := &Client{name: name, opts: opts, pc: pc, tail: newTail(40), stopInP: stop}
	if err := c.connect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// InProcess serves v in this process through the real gRPC server and returns a client
// attached to it, for tests and debuggers. ctx bounds the start; close the client to stop
// the server.
func InProcess(ctx context.Context, v variant.Variant, opts HostOptions) (*Client, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.BuildTimeout <= 0 {
		opts.BuildTimeout = DefaultBuildTimeout
	}
	return startInProcess(ctx, v.Describe().Name, v, opts)
}
