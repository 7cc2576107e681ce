package cli

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/vouchml/vouch/server"
)

// serveLimits are serve's bounds on what clients may hold: request sizes
// per protocol, the tensor budget of one request, time, connections, and
// the roles of anonymous callers.
type serveLimits struct {
	MaxJSON, MaxGRPC  int64
	MaxTensorBytes    int64
	MaxInputs         int
	RequestTimeout    time.Duration
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxConns          int
	MaxConnsPerIP     int
	AnonymousRoles    string
}

func (l *serveLimits) flags(fs *flag.FlagSet) {
	fs.Int64Var(&l.MaxJSON, "max-json", 0, "largest JSON request body (and JSON header of a binary one) in bytes (default --max-body)")
	fs.Int64Var(&l.MaxGRPC, "max-grpc-message", 0, "largest gRPC request message in bytes (default --max-body)")
	fs.Int64Var(&l.MaxTensorBytes, "max-request-tensors", 256<<20, "memory budget of one request: bytes of its input tensors together (shape × dtype size), checked before allocating; more gets 413")
	fs.IntVar(&l.MaxInputs, "max-inputs", 64, "most input tensors in one request")
	fs.DurationVar(&l.RequestTimeout, "request-timeout", 5*time.Minute, "answer 504 (and record it) when an inference request has no answer by then (0: never)")
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send a request's headers")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", 60*time.Second, "time a client has to send a whole request, body included (a trickling body is cut)")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", 60*time.Second, "how long a kept-alive connection may wait for its next request")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", 1<<20, "largest request header block in bytes")
	fs.IntVar(&l.MaxConns, "max-conns", 4096, "client connections open at once (HTTP and gRPC each); more are closed on accept")
	fs.IntVar(&l.MaxConnsPerIP, "max-conns-per-ip", 512, "client connections open at once from one address")
	fs.StringVar(&l.AnonymousRoles, "anonymous-roles", "infer", "without --credentials, the roles of every (anonymous) caller: infer, or infer,audit,admin (admin lets anyone unload models)")
}

// apply puts the limits into the server's options.
func (l serveLimits) apply(so *server.Options) error {
	so.MaxJSONBytes, so.MaxGRPCBytes = l.MaxJSON, l.MaxGRPC
	so.Limits = server.Limits{TensorBytes: l.MaxTensorBytes, Inputs: l.MaxInputs}
	so.RequestTimeout = l.RequestTimeout
	so.HTTP = server.HTTPLimits{ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout, IdleTimeout: l.IdleTimeout,
		MaxHeaderBytes: l.MaxHeaderBytes, MaxConns: l.MaxConns, MaxConnsPerIP: l.MaxConnsPerIP}
	so.AnonymousRoles = nil
	for _, r := range strings.Split(l.AnonymousRoles, ",") {
		switch r = strings.TrimSpace(r); r {
		case server.RoleInfer, server.RoleAudit, server.RoleAdmin:
			so.AnonymousRoles = append(so.AnonymousRoles, r)
		case "":
		default:
			return fmt.Errorf("%w: --anonymous-roles: unknown role %q (want infer, audit, admin)", ErrUsage, r)
		}
	}
	return nil
}

// configure sets an HTTP server's timeouts and header limit from l (the
// same defaults as server.HTTPLimits).
func (l serveLimits) configure(hs *http.Server, s *server.Server) {
	s.ConfigureHTTP(hs) // also counts and alarms on what net/http refuses itself
}

// bindListeners binds --listen and --grpc before anything is written (keys
// under DATA, the log), so that a server that cannot bind leaves nothing
// behind; it warns when a non-loopback address is bound without
// credentials.
func (m *Main) bindListeners(o ServeOptions) (hl, gl net.Listener, err error) {
	if hl, err = net.Listen("tcp", o.Listen); err != nil {
		return nil, nil, err
	}
	if o.GRPC != "" {
		if gl, err = net.Listen("tcp", o.GRPC); err != nil {
			hl.Close()
			return nil, nil, err
		}
	}
	if o.Credentials == "" {
		for _, l := range []net.Listener{hl, gl} {
			if l == nil {
				continue
			}
			if a, ok := l.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
				fmt.Fprintf(m.Stderr, "warning: listening on %s, reachable from other machines, without --credentials: every caller is anonymous with the roles %q\n", l.Addr(), o.Limits.AnonymousRoles)
			}
		}
	}
	return hl, gl, nil
}
