package serving

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/api/responses"
	"github.com/ruvllm/ruvllm/sona"
)

// Hooks let a caller watch the server; the zero value does nothing.
type Hooks struct {
	// OnListen receives the address the server listens on.
	OnListen func(addr string)
	// OnSignal is called when the server begins to shut down.
	OnSignal func()
}

// Run serves c until ctx ends, then shuts down gracefully: it listens at
// once (/health answers 503 while the models load), opens the models one
// after the other and loads the first ones, and when ctx ends lets
// in-flight requests finish for c.ShutdownTimeout before cancelling them.
func Run(ctx context.Context, c *Config, hooks Hooks) error {
	o := c.API
	o.Logger = c.Log
	responseStore, err := responses.NewStore(responses.StoreOptions{Dir: c.ResponseStore})
	if err != nil {
		return fmt.Errorf("--response-store: %w", err)
	}
	o.ResponseStore = responseStore
	if o.RouterName != "" {
		router, err := c.Route.open()
		if err != nil {
			return err
		}
		defer func() {
			if err := router.Close(); err != nil {
				c.Log.Error().Err(err).Msg("closing the router's store")
			}
		}()
		o.Router = router
	}
	srv := api.New(o)

	ln, err := net.Listen("tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	if err != nil {
		return err
	}
	// Request contexts derive from reqCtx, so that cancelling it ends every
	// in-flight generation when the grace period is over.
	reqCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          log.New(c.Log.With().Str("component", "http").Logger(), "", 0),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	addr := ln.Addr().String()
	c.Log.Info().Str("addr", "http://"+addr).Bool("auth", len(o.APIKeys) > 0).Int("models", len(c.Models)).Msg("listening; the models are loading")
	if hooks.OnListen != nil {
		hooks.OnListen(addr)
	}

	// /health says 503 until the models are loaded, not only registered.
	srv.SetStarting(true)
	loaded, err := loadModels(ctx, c, srv)
	defer func() {
		// The requests are over: unload the engines, then close the files.
		srv.Close()
		for i := len(loaded) - 1; i >= 0; i-- {
			loaded[i].close()
		}
	}()
	if err == nil {
		srv.SetStarting(false)
		c.Log.Info().Int("models", len(loaded)).Str("addr", "http://"+addr).Msg("ready")
		select {
		case <-ctx.Done():
		case err = <-served:
		}
	} else if ctx.Err() != nil {
		err = nil // interrupted while loading: not a failure
	}
	if hooks.OnSignal != nil {
		hooks.OnSignal()
	}
	if shutErr := shutdownHTTP(hs, c.ShutdownTimeout, cancelRequests, c.Log); err == nil && !errors.Is(shutErr, http.ErrServerClosed) {
		err = shutErr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// open makes the router, replaying its store.
func (r Route) open() (*sona.Router, error) {
	o := sona.Options{CostWeight: r.CostWeight, Seed: r.Seed}
	if r.Store != "" {
		st, err := sona.OpenFileStore(r.Store)
		if err != nil {
			return nil, fmt.Errorf("--route-store: %w", err)
		}
		o.Store = st
	}
	router, err := sona.New(o)
	if err != nil && o.Store != nil {
		o.Store.Close()
	}
	return router, err
}

// shutdownHTTP stops accepting connections and waits up to grace for the
// in-flight requests; then it cancels them (their engine requests stop
// within a step) and waits for the handlers to return.
func shutdownHTTP(hs *http.Server, grace time.Duration, cancelRequests context.CancelFunc, log zerolog.Logger) error {
	log.Info().Dur("grace_ms", grace).Msg("shutting down: finishing in-flight requests")
	gctx, cancel := context.WithTimeout(context.Background(), grace)
	err := hs.Shutdown(gctx)
	cancel()
	if err == nil {
		return nil
	}
	log.Warn().Msg("grace period over: cancelling in-flight requests")
	cancelRequests()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(cctx); err != nil {
		hs.Close()
		return err
	}
	return nil
}
