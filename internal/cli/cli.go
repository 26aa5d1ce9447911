package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/leasehold/leasehold/internal/buildinfo"
	"github.com/leasehold/leasehold/internal/httpserver"
	"github.com/leasehold/leasehold/internal/server"
)

const usage = `leasehold: a Kubernetes API server for Leases and Endpoints.

Usage:
  leasehold serve [flags]          run the server
  leasehold bench <scenario>       load-test a running server (fill, list, renew, fanout)
  leasehold lock NAME -- COMMAND   run COMMAND only while holding the Lease NAME
  leasehold elect NAME             campaign for the Lease NAME; print its leader on every change
  leasehold version                print the version

Run "leasehold serve -h" (lock -h, elect -h) for a command's flags.
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
	case "lock":
		return lockCmd(ctx, args[1:], stderr)
	case "elect":
		return electCmd(ctx, args[1:], stdout, stderr)
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
	securityFlags(fs, &cfg)
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
	if err := checkSecurityFlags(&cfg); err != nil {
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

// securityFlags defines the authentication, authorization and limit
// flags, named and defaulting as kube-apiserver's, except --anonymous-auth
// (false here, true in kube-apiserver).
func securityFlags(fs *flag.FlagSet, cfg *server.Config) {
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "PEM serving certificate (followed by its intermediates); default: one signed by leasehold's own CA")
	fs.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "PEM CAs whose client certificates authenticate users (common name: user, organizations: groups), besides leasehold's own CA; re-read when it changes")
	fs.StringVar(&cfg.TokenAuthFile, "token-auth-file", "", "static bearer tokens, CSV lines token,user,uid,\"group1,group2\"; re-read when it changes")
	fs.BoolVar(&cfg.AnonymousAuth, "anonymous-auth", false, "let requests without credentials in as system:anonymous (group system:unauthenticated) instead of answering 401")
	fs.StringVar(&cfg.AuthorizationPolicyFile, "authorization-policy-file", "", "ABAC policy file, one JSON policy per line; re-read when it changes (default: every authenticated user may do everything)")
	fs.IntVar(&cfg.MaxRequestsInflight, "max-requests-inflight", httpserver.DefaultMaxRequestsInflight, "reads served at once, watches excepted; more are answered 429 (0: no limit)")
	fs.IntVar(&cfg.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", httpserver.DefaultMaxMutatingRequestsInflight, "writes served at once; more are answered 429 (0: no limit)")
	fs.IntVar(&cfg.MaxWatchesPerUser, "max-watches-per-user", 0, "open watches per user name, system:masters excepted; more are answered 429 (0: no limit)")
}

// checkSecurityFlags validates the security flags after parsing and maps
// them to server.Config's conventions.
func checkSecurityFlags(cfg *server.Config) error {
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	for _, l := range []struct {
		name  string
		value *int
	}{
		{"--max-requests-inflight", &cfg.MaxRequestsInflight},
		{"--max-mutating-requests-inflight", &cfg.MaxMutatingRequestsInflight},
	} {
		switch {
		case *l.value < 0:
			return fmt.Errorf("%s must not be negative", l.name)
		case *l.value == 0:
			*l.value = -1 // server.Config: negative means no limit
		}
	}
	if cfg.MaxWatchesPerUser < 0 {
		return errors.New("--max-watches-per-user must not be negative")
	}
	return nil
}
