package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// Defaults for the zero fields of Config ("Every listener has
// timeouts ... and body size limits").
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10 // 64 KiB
	DefaultBodyLimit         = 1 << 20  // 1 MiB, per request body
	DefaultLongWriteTimeout  = defaultLongWrite
	DefaultShutdownTimeout   = 10 * time.Second
)

// Config is the listener's configuration. Every zero field takes its
// Default*; a negative one is an error from New.
type Config struct {
	// Addr is the host:port ListenAndServe listens on (http.listen,
	// "127.0.0.1:8080"). Serve ignores it.
	Addr string
	// TLS, when non-nil, makes Serve and ListenAndServe speak HTTPS with
	// it (http.tls: auto or cert/key, made by the daemon).
	TLS *tls.Config

	ReadHeaderTimeout time.Duration // 5 s
	ReadTimeout       time.Duration // 30 s, whole request
	WriteTimeout      time.Duration // 30 s, from the end of the request headers
	IdleTimeout       time.Duration // 120 s, keep-alive
	MaxHeaderBytes    int           // 64 KiB

	// BodyLimit caps a request body in bytes for routes without their own
	// limit (1 MiB); a larger body is answered 413.
	BodyLimit int64
	// LongWriteTimeout replaces WriteTimeout on the routes that may answer
	// late (script runs: 10 min 30 s).
	LongWriteTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown when Serve's ctx ends;
	// connections still open after it are closed (10 s).
	ShutdownTimeout time.Duration

	// Now is the clock used to check grant expiry; nil is time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	for name, d := range map[string]time.Duration{"read_header_timeout": c.ReadHeaderTimeout,
		"read_timeout": c.ReadTimeout, "write_timeout": c.WriteTimeout, "idle_timeout": c.IdleTimeout,
		"long_write_timeout": c.LongWriteTimeout, "shutdown_timeout": c.ShutdownTimeout} {
		if d < 0 {
			return c, fmt.Errorf("api config: %s %v is negative", name, d)
		}
	}
	if c.MaxHeaderBytes < 0 || c.BodyLimit < 0 {
		return c, fmt.Errorf("api config: max_header_bytes %d and body_limit %d must not be negative", c.MaxHeaderBytes, c.BodyLimit)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.LongWriteTimeout, DefaultLongWriteTimeout)
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.BodyLimit == 0 {
		c.BodyLimit = DefaultBodyLimit
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Server is the REST API server. Build it with New; it is safe for
// concurrent use.
type Server struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	mux  *http.ServeMux
}

// New returns a server answering the route table with deps. A nil logger
// discards logs. It returns an error for a negative Config field.
func New(cfg Config, deps Deps, logger *slog.Logger) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, deps: deps, log: logger, mux: http.NewServeMux()}
	for _, rt := range routes {
		s.mux.Handle(rt.pattern(), s.wrap(rt))
	}
	s.mountLiveView()
	s.mountConsole()
	return s, nil
}

// Handler returns the server's http.Handler: the route table, with 404 and
// 405 answered as problems. It is what Serve serves; tests and the daemon
// may mount it elsewhere.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// methods that a path may be registered for, to tell 405 from 404.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pat := s.mux.Handler(r); pat != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	var allow []string
	for _, m := range methods {
		if m == r.Method {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pat := s.mux.Handler(r2); pat != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, KindMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))))
		return
	}
	writeProblem(w, newProblem(http.StatusNotFound, KindNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
}

func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         s.cfg.TLS,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// it stops accepting, waits up to Config.ShutdownTimeout for requests in
// flight, then closes what is left. It closes ln. It returns nil after a
// shutdown caused by ctx, or the error that stopped serving.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.httpServer()
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLS != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	s.log.InfoContext(ctx, "api listening", slog.String("addr", ln.Addr().String()), slog.Bool("tls", s.cfg.TLS != nil))
	select {
	case err := <-errc:
		return fmt.Errorf("api: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		s.log.WarnContext(ctx, "api shutdown timed out; closing connections", slog.Any("error", err))
		if cerr := srv.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("api: shutdown %s: %w", ln.Addr(), err)
	}
	s.log.InfoContext(ctx, "api stopped", slog.String("addr", ln.Addr().String()))
	return nil
}

// ListenAndServe listens on Config.Addr (TCP) and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("api: listen %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}
