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
// gRPC server as a plugin process) and attaches a client to it.
func startInProcess(name string, v variant.Variant, opts HostOptions) (*Client, error) {
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *goplugin.ReattachConfig, 1)
	closed := make(chan struct{})
	logger := hclog.NewNullLogger()
	if opts.Logs != nil && opts.Verbose {
		logger = hclog.New(&hclog.LoggerOptions{Name: "plugin." + name, Level: hclog.Debug, Output: opts.Logs})
	}
	go goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(&GRPCPlugin{Service: &server{v: v, logger: logger}}, ProtocolVersion),
		GRPCServer:       newGRPCServer,
		Logger:           logger,
		Test:             &goplugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed},
	})
	stop := func() {
		cancel()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
		}
	}
	var rc *goplugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-time.After(opts.StartTimeout):
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
	if err := c.connect(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// InProcess serves v in this process through the real gRPC server and returns a client
// attached to it, for tests and debuggers. Close the client to stop the server.
func InProcess(v variant.Variant, opts HostOptions) (*Client, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.BuildTimeout <= 0 {
		opts.BuildTimeout = DefaultBuildTimeout
	}
	return startInProcess(v.Describe().Name, v, opts)
}
