package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/leasehold/leasehold/internal/storage"
)

// Defaults for Options.
const (
	// DefaultDialTimeout is how long Open waits for the cluster to answer
	// (kube-apiserver's etcd dial timeout).
	DefaultDialTimeout = 20 * time.Second
	// DefaultRequestTimeout bounds a request whose ctx has no earlier
	// deadline. It is longer than etcd's own request timeout (5 s plus two
	// election timeouts by default) and than a leader election, so that a
	// failover delays requests rather than failing them.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultCompactInterval is kube-apiserver's --etcd-compaction-interval.
	DefaultCompactInterval = 5 * time.Minute
	// DefaultMaxValueSize matches the embedded engine and etcd's default
	// --max-request-bytes (1.5 MiB). etcd limits the whole request, key and
	// transaction included, so with etcd's default a value within about a
	// kilobyte of this size is refused by etcd, also as ErrTooLarge; raise
	// --max-request-bytes a little to accept every value up to this size.
	DefaultMaxValueSize = 1536 * 1024
)

const (
	// listPageSize is the number of keys per range request of a List:
	// kube-apiserver's page size when its watch cache lists etcd
	// (apiserver/pkg/storage/etcd3 maxLimit).
	listPageSize = 10000
	// keepAliveTime and keepAliveTimeout detect a dead connection to a
	// member that vanished without closing it (kube-apiserver's values).
	keepAliveTime    = 30 * time.Second
	keepAliveTimeout = 10 * time.Second
	// reconnectMaxDelay caps gRPC's backoff between attempts to reconnect
	// to a member (120 s by default), so that service resumes within a few
	// seconds of a cluster coming back after an outage.
	reconnectMaxDelay = 3 * time.Second
	// compactRevKey is kube-apiserver's compaction coordination key, so
	// that leasehold replicas and kube-apiservers sharing one cluster
	// coordinate with each other.
	compactRevKey = "compact_rev_key"
	// revisionProbeKey is the key Revision and Watch read (count only) to
	// learn the current revision or test a past one; any key does.
	revisionProbeKey = compactRevKey
)

// TLS names the PEM files for connecting to etcd over TLS. All empty means
// plain TCP (unless an endpoint is https://, then the system roots verify
// the server).
type TLS struct {
	// CAFile verifies the etcd members' serving certificates.
	CAFile string
	// CertFile and KeyFile are this client's certificate and key, for
	// clusters that require client certificates (--client-cert-auth).
	CertFile string
	KeyFile  string
}

// Options configure a Store.
type Options struct {
	// Endpoints are the etcd members' client URLs, such as
	// https://10.0.0.1:2379. Required.
	Endpoints []string
	TLS       TLS
	// DialTimeout bounds how long Open waits for the cluster to answer.
	// Default DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout bounds each request whose ctx has no earlier deadline;
	// it then fails with storage.ErrUnavailable. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// CompactInterval is how often the engine compacts etcd's history to
	// the revision seen one interval earlier (see the package
	// documentation). Zero means DefaultCompactInterval; negative disables
	// compaction (kube-apiserver's --etcd-compaction-interval=0).
	CompactInterval time.Duration
	// MaxValueSize is the largest value Put accepts; larger values fail
	// with storage.ErrTooLarge before reaching etcd. Default
	// DefaultMaxValueSize.
	MaxValueSize int
	// Logger receives the engine's and the etcd client's messages. Default:
	// discard.
	Logger *slog.Logger
	// OnRequest, when set, is told how long each request to etcd took,
	// whatever its outcome: op is get, list, create, update, delete or
	// revision (kube-apiserver's etcd_request_duration_seconds
	// operations, and the revision reads of consistent reads), key the
	// key or prefix. It must return quickly.
	OnRequest func(op, key string, took time.Duration)

	// pageSize replaces listPageSize; tests make it small.
	pageSize int64
}

func (o *Options) setDefaults() error {
	if len(o.Endpoints) == 0 {
		return errors.New("etcd: no endpoints")
	}
	if o.DialTimeout < 0 || o.RequestTimeout < 0 || o.MaxValueSize < 0 {
		return errors.New("etcd: negative option")
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.CompactInterval == 0 {
		o.CompactInterval = DefaultCompactInterval
	}
	if o.MaxValueSize == 0 {
		o.MaxValueSize = DefaultMaxValueSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.pageSize == 0 {
		o.pageSize = listPageSize
	}
	return nil
}

func (t TLS) config() (*tls.Config, error) {
	if t == (TLS{}) {
		return nil, nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("etcd: a client certificate needs both a certificate and a key file")
	}
	info := transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd: TLS: %w", err)
	}
	return cfg, nil
}

// Store is the etcd storage engine. See the package documentation; all
// methods are safe for concurrent use.
type Store struct {
	client *clientv3.Client
	opts   Options
	log    *slog.Logger

	// mu guards closed. Requests and watches register in active under the
	// read lock, so that once Close (write lock) has set closed no new one
	// starts and active.Wait covers every one that did.
	mu     sync.RWMutex
	closed bool
	// active counts requests in flight and running goroutines (watches,
	// the progress requester, the compactor). Close waits for it.
	active sync.WaitGroup

	// ctx is not a request context: it is the store's stop signal, ended by
	// Close with errClosed as its cause. Every request and watch context is
	// cancelled with it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	progress  progress
	space     noSpace
	leases    leases
	revisions sharedReads
}

var (
	_ storage.Interface     = (*Store)(nil)
	_ storage.SpaceReporter = (*Store)(nil)
)

// Open connects to the etcd cluster and checks, within ctx and
// Options.DialTimeout, that it answers a linearizable read, so that a wrong
// address or credential fails here rather than on the first request. The
// error then wraps storage.ErrUnavailable when the cluster was out of reach.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	tlsConfig, err := opts.TLS.config()
	if err != nil {
		return nil, err
	}
	log := opts.Logger.With("component", "etcd")
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            opts.Endpoints,
		DialTimeout:          opts.DialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		TLS:                  tlsConfig,
		Logger:               zap.New(newSlogCore(log.Handler())),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMaxDelay},
			// gRPC's default: how long one connection attempt may take.
			MinConnectTimeout: 20 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: client for %v: %w", opts.Endpoints, err)
	}
	s := &Store{client: client, opts: opts, log: log}
	s.leases = leases{client: client, now: time.Now}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.progress.init()

	cctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if _, err := client.Get(cctx, revisionProbeKey, clientv3.WithCountOnly()); err != nil {
		err = s.mapErr(cctx, "connecting to "+fmt.Sprint(opts.Endpoints), err)
		s.cancel(errClosed)
		_ = client.Close()
		return nil, err
	}

	s.active.Add(1)
	go func() {
		defer s.active.Done()
		s.runProgress(s.ctx)
	}()
	if opts.CompactInterval > 0 {
		s.active.Add(1)
		go func() {
			defer s.active.Done()
			s.runCompactor(s.ctx)
		}()
	}
	return s, nil
}

// errClosed is the cause of the store's stop context once Close has begun.
var errClosed = fmt.Errorf("etcd: store closed: %w", storage.ErrUnavailable)

// errRequestTimeout is the cause of a request context that reached
// Options.RequestTimeout.
var errRequestTimeout = errors.New("etcd: request timeout")

// begin registers a request and returns its context: ctx, cancelled when the
// store closes, bounded by Options.RequestTimeout. end must be called when
// the request is over, after its error has been mapped.
func (s *Store) begin(ctx context.Context) (rctx context.Context, end func(), err error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, nil, errClosed
	}
	s.active.Add(1)
	s.mu.RUnlock()

	// One context a request (mapErr tells a close by the store's own):
	// every request pays for what is made here.
	rctx, cancel := context.WithTimeoutCause(ctx, s.opts.RequestTimeout, errRequestTimeout)
	stop := context.AfterFunc(s.ctx, cancel)
	return rctx, func() {
		stop()
		cancel()
		s.active.Done()
	}, nil
}

// observe reports a request that began at start to Options.OnRequest.
func (s *Store) observe(op, key string, start time.Time) {
	if s.opts.OnRequest != nil {
		s.opts.OnRequest(op, key, time.Since(start))
	}
}

// Size returns the size of etcd's database file, as the first member of
// Options.Endpoints that answers reports it (etcd's dbSize, what
// kube-apiserver's apiserver_storage_size_bytes reports).
func (s *Store) Size(ctx context.Context) (int64, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer end()
	var errs []error
	for _, ep := range s.opts.Endpoints {
		st, err := s.client.Status(ctx, ep)
		if err == nil {
			return st.DbSize, nil
		}
		errs = append(errs, err)
	}
	return 0, s.mapErr(ctx, "status", errors.Join(errs...))
}

// Close stops the engine: requests and watches in flight end with
// storage.ErrUnavailable (a write in flight may still be applied by etcd),
// every later call fails with it, and the client is closed once all of them
// have returned. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	s.cancel(errClosed)
	s.active.Wait()
	if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcd: closing the client: %w", err)
	}
	return nil
}
