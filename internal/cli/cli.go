package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/buildinfo"
	"github.com/leasehold/leasehold/internal/gcpace"
	"github.com/leasehold/leasehold/internal/httpserver"
	"github.com/leasehold/leasehold/internal/lock"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/transport"
)

const usage = `leasehold: the Kubernetes API of leader election and service discovery,
without a control plane. It serves Leases, LeaseCandidates, Endpoints,
EndpointSlices, Namespaces, Events and RBAC to kubectl and client-go, with
/metrics, a live view at /ui/ and a garbage collector.

Usage:
  leasehold serve [flags]          run the server
  leasehold bench <scenario>       load-test a running server (fill, list, renew, fanout, overload, ...)
  leasehold lock NAME -- COMMAND   run COMMAND only while holding the Lease NAME
  leasehold elect NAME             campaign for the Lease NAME; print its leader on every change
  leasehold register SERVICE ADDRESS:PORT [-- COMMAND]
                                   be an endpoint of SERVICE's EndpointSlices while it runs
  leasehold snapshot save FILE     save the embedded store, online, consistent at one revision
  leasehold snapshot restore FILE --data-dir DIR
                                   create a data directory from a snapshot
  leasehold version                print the version

Run "leasehold serve -h" (lock -h, elect -h, register -h, snapshot -h,
bench -h) for a command's flags; "leasehold serve --config FILE" takes
serve's from a YAML file (key: the flag name without dashes). The manual
is README.md and docs/ in the source (/usr/share/doc/leasehold with the
Debian package).
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
	case lock.GuardCommand: // started by lock, not listed in the usage
		return lock.RunGuard(os.Stdin, stdout)
	case "elect":
		return electCmd(ctx, args[1:], stdout, stderr)
	case "register":
		return registerCmd(ctx, args[1:], stderr)
	case "snapshot":
		return snapshotCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		v := buildinfo.KubeVersion()
		commit := "commit unknown (built without VCS information)"
		if v.GitCommit != "" {
			commit = "commit " + v.GitCommit + ", " + v.GitTreeState + " tree"
		}
		fmt.Fprintf(stdout, "leasehold %s (%s; Kubernetes API %s; %s %s)\n", buildinfo.Version, commit, v.GitVersion, v.GoVersion, v.Platform)
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
	cfg, level, err := parseServe(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: logAttrs(stderr)}))
	cfg.Logger = log
	setMemoryLimit(log)
	if p, ok := gcpace.Start(gcHeadroom); ok {
		defer p.Stop()
		log.Debug("the heap may grow by at least this much between garbage collections (GOGC chooses otherwise)", "bytes", gcHeadroom)
	}

	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	quiet, stopQuiet := context.WithCancel(ctx)
	defer stopQuiet()
	go gcpace.ReturnWhenQuiet(quiet, srv.Ready(), quietInterval)
	// The service manager (systemd, Type=notify) hears READY=1 once the
	// server serves and STOPPING=1 as soon as it begins to shut down.
	stopped := make(chan struct{}) // closed when Run returns
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		select {
		case <-srv.Ready():
			log.Info("leasehold is serving; to use it: export KUBECONFIG="+srv.Kubeconfig(), "url", srv.URL(), "version", buildinfo.Version)
			notify(log, "READY=1\nSTATUS=serving on "+srv.URL())
		case <-ctx.Done():
			return
		case <-stopped:
			return
		}
		select {
		case <-ctx.Done():
			notify(log, "STOPPING=1\nSTATUS=shutting down: finishing the requests in flight")
		case <-stopped:
		}
	}()
	err = srv.Run(ctx)
	close(stopped)
	<-notified
	return err
}

const serveUsage = `Usage: leasehold serve [flags]

Serves the Kubernetes API (Leases, LeaseCandidates, Endpoints,
EndpointSlices, Namespaces, Events, RBAC) over HTTPS on --listen, with the
store, certificates and admin.kubeconfig in --data-dir, or with the
objects in etcd (--storage etcd) for several replicas. The manual's
docs/install.md explains these flags and --config, docs/security.md the
security ones, docs/deployment.md the replicas.

Flags:
`

// serveFlags are serve's flags and what they set.
type serveFlags struct {
	fs          *flag.FlagSet
	cfg         server.Config
	logLevel    string
	configFile  string
	etcdServers *string
	// disabledAdmission is --disable-admission-plugins, comma-separated.
	disabledAdmission string
	// minRequestTimeout is in seconds, as kube-apiserver's flag.
	minRequestTimeout int
}

func newServeFlags(stderr io.Writer) *serveFlags {
	s := &serveFlags{fs: flag.NewFlagSet("serve", flag.ContinueOnError)}
	fs, cfg := s.fs, &s.cfg
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage); fs.PrintDefaults() }
	fs.StringVar(&s.configFile, configFlag, "", "YAML file of flags: each key a flag name without the dashes (data-dir: /var/lib/leasehold); flags on the command line override it")
	fs.StringVar(&cfg.DataDir, "data-dir", "./leasehold-data", "directory for the store, certificates and admin.kubeconfig")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address to serve HTTPS on")
	fs.BoolVar(&cfg.CoordinatedLeaderElection, "coordinated-leader-election", true,
		"coordinated leader election: serve LeaseCandidates, keep Lease spec.strategy and spec.preferredHolder, and elect the holders of Leases with candidates (false: none of it, as kube-apiserver by default)")
	fs.IntVar(&cfg.WatchWindow, "watch-window", 10000, "events per resource kept for watches that resume from an older resourceVersion")
	fs.DurationVar(&cfg.EventTTL, "event-ttl", time.Hour, "how long an Event lives after its last write, as kube-apiserver's flag (0: forever)")
	fs.IntVar(&s.minRequestTimeout, "min-request-timeout", 1800,
		"seconds: the shortest life of a watch without timeoutSeconds; each ends cleanly after a random time between this and twice this, as kube-apiserver's flag")
	fs.StringVar(&s.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.HTTP2Server, "http2-server", transport.HTTP2Leasehold,
		"the HTTP/2 server: leasehold (its own, cheaper for small requests) or go (net/http's, kube-apiserver's): the way back the day an attack on leasehold's is published")
	fs.StringVar(&s.disabledAdmission, "disable-admission-plugins", "",
		"admission plugins to turn off, comma-separated, as kube-apiserver's flag: only "+server.OwnerReferencesPermissionEnforcement+
			" (on here, off by default in kube-apiserver: a reference that blocks its owner's deletion needs update on the owner's finalizers)")
	s.etcdServers = storageFlags(fs, cfg)
	securityFlags(fs, cfg)
	return s
}

// parseServe turns serve's command line, and the configuration file it
// names with --config, into the server's configuration and log level.
func parseServe(args []string, stderr io.Writer) (server.Config, slog.Level, error) {
	s := newServeFlags(stderr)
	var level slog.Level
	if err := s.fs.Parse(args); err != nil {
		return s.cfg, level, err
	}
	if s.fs.NArg() > 0 {
		return s.cfg, level, fmt.Errorf("unexpected arguments: %v", s.fs.Args())
	}
	if s.configFile != "" {
		if err := applyConfigFile(s.fs, s.configFile); err != nil {
			return s.cfg, level, err
		}
	}
	if s.minRequestTimeout <= 0 {
		return s.cfg, level, errors.New("--min-request-timeout must be positive")
	}
	s.cfg.MinRequestTimeout = time.Duration(s.minRequestTimeout) * time.Second
	if h := s.cfg.HTTP2Server; h != transport.HTTP2Leasehold && h != transport.HTTP2Go {
		return s.cfg, level, fmt.Errorf("--http2-server %q: want %s or %s", h, transport.HTTP2Leasehold, transport.HTTP2Go)
	}
	for _, p := range strings.Split(s.disabledAdmission, ",") {
		switch p = strings.TrimSpace(p); p {
		case "":
		case server.OwnerReferencesPermissionEnforcement:
			s.cfg.DisabledAdmissionPlugins = append(s.cfg.DisabledAdmissionPlugins, p)
		default:
			return s.cfg, level, fmt.Errorf("--disable-admission-plugins: %q is not an admission plugin leasehold can turn off (only %s)", p, server.OwnerReferencesPermissionEnforcement)
		}
	}
	if s.cfg.EventTTL < 0 {
		return s.cfg, level, errors.New("--event-ttl must not be negative")
	}
	if err := checkStorageFlags(s.fs, &s.cfg, *s.etcdServers); err != nil {
		return s.cfg, level, err
	}
	if err := checkSecurityFlags(&s.cfg); err != nil {
		return s.cfg, level, err
	}
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		return s.cfg, level, fmt.Errorf("--log-level: %w", err)
	}
	return s.cfg, level, nil
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
	fs.Func("authorization-mode", "comma-separated authorization modes, asked in order after system:masters: RBAC, ABAC, AlwaysAllow (default RBAC; ABAC when only --authorization-policy-file is given)", func(v string) error {
		cfg.AuthorizationModes = nil
		for _, m := range strings.Split(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				cfg.AuthorizationModes = append(cfg.AuthorizationModes, m)
			}
		}
		return nil
	})
	fs.StringVar(&cfg.AuthorizationPolicyFile, "authorization-policy-file", "", "ABAC policy file, one JSON policy per line, for --authorization-mode ABAC; re-read when it changes")
	fs.StringVar(&cfg.AuditLogPath, "audit-log-path", "", "audit log file, one audit.k8s.io/v1 Event of JSON per line (\"-\": standard output); needs --audit-policy-file")
	fs.StringVar(&cfg.AuditPolicyFile, "audit-policy-file", "", "audit policy (audit.k8s.io/v1 Policy, kube-apiserver's format): what is recorded of which requests")
	fs.IntVar(&cfg.AuditLogMaxSizeMB, "audit-log-maxsize", 0, "megabytes at which the audit log is rotated (0: 100)")
	fs.IntVar(&cfg.AuditLogMaxBackups, "audit-log-maxbackup", 0, "rotated audit log files kept (0: all)")
	fs.IntVar(&cfg.AuditLogMaxAgeDays, "audit-log-maxage", 0, "days rotated audit log files are kept (0: no limit)")
	fs.IntVar(&cfg.MaxRequestsInflight, "max-requests-inflight", httpserver.DefaultMaxRequestsInflight, "reads served at once, watches excepted; more are answered 429 (0: no limit)")
	fs.IntVar(&cfg.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", httpserver.DefaultMaxMutatingRequestsInflight, "writes served at once; more are answered 429 (0: no limit)")
	fs.IntVar(&cfg.MaxWatchesPerUser, "max-watches-per-user", 0, "open watches per user name, system:masters excepted; more are answered 429 (0: no limit)")
}

// checkSecurityFlags validates the security flags after parsing.
func checkSecurityFlags(cfg *server.Config) error {
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if cfg.MaxRequestsInflight < 0 || cfg.MaxMutatingRequestsInflight < 0 {
		return errors.New("--max-requests-inflight and --max-mutating-requests-inflight must not be negative")
	}
	if cfg.MaxWatchesPerUser < 0 {
		return errors.New("--max-watches-per-user must not be negative")
	}
	if _, _, err := server.AuthorizationModes(*cfg); err != nil {
		return err
	}
	if cfg.AuditLogMaxSizeMB < 0 || cfg.AuditLogMaxBackups < 0 || cfg.AuditLogMaxAgeDays < 0 {
		return errors.New("--audit-log-maxsize, --audit-log-maxbackup and --audit-log-maxage must not be negative")
	}
	return nil
}
