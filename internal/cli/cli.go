package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/leasehold/leasehold/internal/buildinfo"
	"github.com/leasehold/leasehold/internal/server"
)

const usage = `leasehold: a Kubernetes API server for Leases and Endpoints.

Usage:
  leasehold serve [flags]   run the server
  leasehold bench <scenario> load-test a running server (fill, list, renew, fanout)
  leasehold version         print the version

Run "leasehold serve -h" for the server's flags.
`

// Run runs the command line args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		v := buildinfo.KubeVersion()
		fmt.Fprintf(stdout, "leasehold %s (Kubernetes API %s, %s)\n", buildinfo.Version, v.GitVersion, v.GoVersion)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg server.Config
	var logLevel string
	fs.StringVar(&cfg.DataDir, "data-dir", "./leasehold-data", "directory for the store, certificates and admin.kubeconfig")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address to serve HTTPS on")
	fs.BoolVar(&cfg.CoordinatedLeaderElection, "coordinated-leader-election", true,
		"keep and validate Lease spec.strategy and spec.preferredHolder (false drops them, as kube-apiserver does by default)")
	fs.IntVar(&cfg.WatchWindow, "watch-window", 10000, "events per resource kept for watches that resume from an older resourceVersion")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	etcdServers := storageFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := checkStorageFlags(fs, &cfg, *etcdServers); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log

	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-srv.Ready():
			log.Info("leasehold is serving; to use it: export KUBECONFIG="+srv.Kubeconfig(), "url", srv.URL(), "version", buildinfo.Version)
		case <-ctx.Done():
		}
	}()
	return srv.Run(ctx)
}
