package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// startAdmin serves Go's profiler on its own listener at addr (the
// configuration's admin.listen), never on the public one, with the public
// server's timeouts except the write timeout: a CPU profile or trace
// streams for as long as its seconds ask. Its errors go to errc.
func startAdmin(addr string, public *http.Server, errc chan<- error, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: public.ReadHeaderTimeout,
		ReadTimeout:       public.ReadTimeout,
		IdleTimeout:       public.IdleTimeout,
		ErrorLog:          public.ErrorLog,
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin.listen: %w", err)
	}
	log.Info("admin listening", "url", "http://"+ln.Addr().String(), "serves", "/debug/pprof/")
	go func() { errc <- srv.Serve(ln) }()
	return srv, nil
}
