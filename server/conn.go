package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTPLimits bound what a client connection may hold: time to send its
// headers and body, time idle between requests, header bytes, and
// connections open at once, in all and per source address. A connection
// over a connection limit is closed as soon as it is accepted (counted in
// vouch_connections_refused_total). The zero value takes the defaults.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration // default 10s
	ReadTimeout       time.Duration // the whole request, headers and body; default 60s
	IdleTimeout       time.Duration // between requests on a kept-alive connection; default 60s
	MaxHeaderBytes    int           // default 1 MiB
	MaxConns          int           // default 4096
	MaxConnsPerIP     int           // default 512
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 60 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 60 * time.Second
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 1 << 20
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 4096
	}
	if l.MaxConnsPerIP <= 0 {
		l.MaxConnsPerIP = 512
	}
	return l
}

// NewHTTPServer returns an http.Server for Handler with the timeouts of
// Options.HTTP. Serve it on Listen(l) to apply the connection limits.
func (s *Server) NewHTTPServer() *http.Server {
	hs := &http.Server{Handler: s.Handler()}
	s.ConfigureHTTP(hs)
	return hs
}

// Listener wraps l (a TCP listener, beneath any TLS) with the connection
// limits of Options.HTTP; gRPC listeners take it too.
func (s *Server) Listener(l net.Listener) net.Listener {
	lim := s.opt.HTTP.withDefaults()
	return &limitListener{Listener: l, s: s, max: lim.MaxConns, perIP: lim.MaxConnsPerIP, byIP: map[string]int{}}
}

type limitListener struct {
	net.Listener
	s          *Server
	max, perIP int

	mu   sync.Mutex
	open int
	byIP map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(ip); err == nil {
			ip = h
		}
		l.mu.Lock()
		if l.open >= l.max || l.byIP[ip] >= l.perIP {
			l.mu.Unlock()
			l.s.m.connRefused.Inc()
			l.s.refused("conn", refusedConnLimit, "from "+ip)
			c.Close()
			continue
		}
		l.open++
		l.byIP[ip]++
		l.mu.Unlock()
		l.s.m.connOpen.Inc()
		return &limitedConn{Conn: c, l: l, ip: ip}, nil
	}
}

func (l *limitListener) release(ip string) {
	l.mu.Lock()
	l.open--
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	l.mu.Unlock()
	l.s.m.connOpen.Dec()
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}
