package audit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/leasehold/leasehold/internal/auth"
)

// Options configures a Log.
type Options struct {
	// Path is the log file, "-" for standard output
	// (--audit-log-path).
	Path string
	// Policy decides what is recorded.
	Policy *Policy
	// MaxSizeMB is the size in megabytes at which the file is rotated;
	// 0 means 100 (--audit-log-maxsize, rotated by lumberjack as in
	// kube-apiserver).
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept; 0 keeps them all
	// (--audit-log-maxbackup).
	MaxBackups int
	// MaxAgeDays is how many days rotated files are kept; 0 keeps them
	// (--audit-log-maxage).
	MaxAgeDays int
	// BufferBytes bounds the events waiting to be written;
	// DefaultBufferBytes when 0.
	BufferBytes int
	Logger      *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Log records requests in an audit log. Requests call Begin; Run writes.
type Log struct {
	policy *Policy
	sink   *sink
	now    func() time.Time
	closer io.Closer
	// lines recycles the buffers events are encoded into.
	lines sync.Pool
}

// New opens the log file (created with mode 0600 when missing) and
// returns the Log.
func New(opts Options) (*Log, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = DefaultBufferBytes
	}
	var out io.Writer = os.Stdout
	l := &Log{policy: opts.Policy, now: opts.Now}
	l.lines.New = func() any { b := make([]byte, 0, 2048); return &b }
	if opts.Path != "-" {
		// kube-apiserver's ensureLogFile: fail at start, not at the first
		// event.
		f, err := os.OpenFile(opts.Path, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		f.Close()
		lj := &lumberjack.Logger{Filename: opts.Path, MaxSize: opts.MaxSizeMB, MaxBackups: opts.MaxBackups, MaxAge: opts.MaxAgeDays}
		out, l.closer = lj, lj
	}
	l.sink = newSink(out, opts.BufferBytes, opts.Logger)
	return l, nil
}

// Run writes the events until ctx ends, then what is left.
func (l *Log) Run(ctx context.Context) error {
	err := l.sink.Run(ctx, 5*time.Second)
	if l.closer != nil {
		l.closer.Close()
	}
	return err
}

// Record is the audit event of one request, filled in as the request
// goes on and written at each of its stages. A nil Record (a request the
// policy does not record) ignores every call. Its methods may be called
// from the goroutines of the request's handler and of the chain around
// it (a request that outlives its deadline).
type Record struct {
	log *Log
	cfg config
	// longRunning requests (watches) have a ResponseStarted stage.
	longRunning bool

	// mu guards ev and started.
	mu sync.Mutex
	ev auditv1.Event
	// started is set once the response status code is known.
	started bool
	// status is where ev.ResponseStatus points, and annotations the
	// authorization annotations, kept in the record rather than in
	// allocations of their own (ev.Annotations stays nil).
	status      metav1.Status
	annotations [2][2]string
}

// setStatus makes st the response status.
func (r *Record) setStatus(st metav1.Status) {
	r.status = st
	r.ev.ResponseStatus = &r.status
}

// Begin starts the record of a request, as kube-apiserver's audit filter
// does after authentication: a is what it asks, with the authenticated
// user (hasUser false when authentication failed). It writes the
// RequestReceived stage. The result is nil when the policy's level is
// None.
func (l *Log) Begin(req *http.Request, a *auth.Attributes, hasUser bool, auditID string, received time.Time, longRunning bool) *Record {
	if l == nil {
		return nil
	}
	cfg := l.policy.evaluate(a, hasUser)
	if cfg.level == auditv1.LevelNone {
		return nil
	}
	r := &Record{log: l, cfg: cfg, longRunning: longRunning}
	ev := &r.ev
	ev.Level = cfg.level
	ev.AuditID = types.UID(auditID)
	ev.RequestReceivedTimestamp = metav1.NewMicroTime(received)
	ev.Verb = a.Verb
	ev.RequestURI = req.URL.RequestURI()
	ev.UserAgent = req.UserAgent()
	if len(ev.UserAgent) > maxUserAgentLength {
		ev.UserAgent = ev.UserAgent[:maxUserAgentLength] + "...TRUNCATED"
	}
	ips := utilnet.SourceIPs(req)
	ev.SourceIPs = make([]string, len(ips))
	for i, ip := range ips {
		ev.SourceIPs[i] = ip.String()
	}
	if hasUser {
		ev.User = userInfo(a.User)
	}
	if a.ResourceRequest {
		ev.ObjectRef = &auditv1.ObjectReference{
			Namespace: a.Namespace, Name: a.Name, Resource: a.Resource, Subresource: a.Subresource,
			APIGroup: a.APIGroup, APIVersion: a.APIVersion,
		}
	}
	if hasUser {
		r.stage(auditv1.StageRequestReceived)
	}
	return r
}

// maxUserAgentLength is kube-apiserver's bound on a recorded User-Agent.
const maxUserAgentLength = 1024

func userInfo(u auth.User) authnv1.UserInfo {
	out := authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		out.Extra = make(map[string]authnv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			out.Extra[k] = v
		}
	}
	return out
}

// Level is the record's level; None for a nil record.
func (r *Record) Level() auditv1.Level {
	if r == nil {
		return auditv1.LevelNone
	}
	return r.cfg.level
}

// Records reports whether the record keeps objects at level l: Request
// (the request's object) or RequestResponse (the response's too).
func (r *Record) Records(l auditv1.Level) bool {
	return r != nil && levelOrd(r.cfg.level) >= levelOrd(l)
}

// OmitManagedFields reports whether recorded objects drop their
// managedFields.
func (r *Record) OmitManagedFields() bool { return r != nil && r.cfg.omitManagedFields }

func levelOrd(l auditv1.Level) int {
	switch l {
	case auditv1.LevelMetadata:
		return 1
	case auditv1.LevelRequest:
		return 2
	case auditv1.LevelRequestResponse:
		return 3
	}
	return 0
}

// ImpersonatedUser records the user the request acts as, and the
// constrained impersonation verb that allowed it ("" for the legacy one).
func (r *Record) ImpersonatedUser(u auth.User, constraint string) {
	if r == nil {
		return
	}
	info := userInfo(u)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev.ImpersonatedUser = &info
	if constraint != "" {
		r.ev.AuthenticationMetadata = &auditv1.AuthenticationMetadata{ImpersonationConstraint: constraint}
	}
}

// Authorized records the authorization decision in the annotations
// authorization.k8s.io/decision ("allow" or "forbid") and
// authorization.k8s.io/reason.
func (r *Record) Authorized(allowed bool, reason string) {
	if r == nil {
		return
	}
	decision := "forbid"
	if allowed {
		decision = "allow"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// In the order of their keys, as encoded.
	r.annotations = [2][2]string{{"authorization.k8s.io/decision", decision}, {"authorization.k8s.io/reason", reason}}
}

// RequestObject records what the request's body says: the object's name,
// namespace, uid and resourceVersion complete the object reference (meta
// may be nil), and at level Request and above encode's JSON is kept.
func (r *Record) RequestObject(meta metav1.Object, encode func() ([]byte, error)) {
	if r == nil {
		return
	}
	var raw []byte
	if r.Records(auditv1.LevelRequest) {
		var err error
		if raw, err = encode(); err != nil {
			r.log.sink.log.Error("audit log: encoding the request object", "audit-id", r.ev.AuditID, "err", err)
			raw = nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref := r.ev.ObjectRef; ref != nil && meta != nil {
		if ref.Namespace == "" {
			ref.Namespace = meta.GetNamespace()
		}
		if ref.Name == "" {
			ref.Name = meta.GetName()
		}
		if ref.UID == "" {
			ref.UID = meta.GetUID()
		}
		if ref.ResourceVersion == "" {
			ref.ResourceVersion = meta.GetResourceVersion()
		}
	}
	if raw != nil {
		r.ev.RequestObject = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	}
}

// RequestPatch records a patch as the request's object, at level Request
// and above.
func (r *Record) RequestPatch(patch []byte) {
	if !r.Records(auditv1.LevelRequest) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev.RequestObject = &runtime.Unknown{Raw: patch, ContentType: runtime.ContentTypeJSON}
}

// ResponseObject records the response: a Status's fields as the
// response status (at every level), and at level RequestResponse
// encode's JSON of the object.
func (r *Record) ResponseObject(status *metav1.Status, encode func() ([]byte, error)) {
	if r == nil {
		return
	}
	var raw []byte
	if r.Records(auditv1.LevelRequestResponse) && encode != nil {
		var err error
		if raw, err = encode(); err != nil {
			r.log.sink.log.Error("audit log: encoding the response object", "audit-id", r.ev.AuditID, "err", err)
			raw = nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if status != nil {
		r.setStatus(metav1.Status{Status: status.Status, Message: status.Message, Reason: status.Reason, Details: status.Details, Code: status.Code})
	}
	if raw != nil {
		r.ev.ResponseObject = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	}
}

// ResponseStarted records the response's status code once; for a
// long-running request it writes the ResponseStarted stage.
func (r *Record) ResponseStarted(code int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started = true
	if r.ev.ResponseStatus == nil {
		r.setStatus(metav1.Status{})
	}
	r.ev.ResponseStatus.Code = int32(code)
	if r.longRunning {
		r.stageLocked(auditv1.StageResponseStarted)
	}
}

// FailedAuthentication writes the record of a request that failed
// authentication, as kube-apiserver does: its ResponseStarted stage, with
// the 401 status answered.
func (r *Record) FailedAuthentication(status *metav1.Status) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setStatus(metav1.Status{Status: status.Status, Message: status.Message, Reason: status.Reason, Details: status.Details, Code: status.Code})
	r.started = true
	r.stageLocked(auditv1.StageResponseStarted)
}

// Complete writes the ResponseComplete stage, once the handler is done.
// A request that answered nothing is recorded as kube-apiserver records
// it: 200, "Connection closed early".
func (r *Record) Complete() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ev.ResponseStatus == nil {
		r.setStatus(metav1.Status{Code: http.StatusOK, Status: metav1.StatusSuccess, Message: "Connection closed early"})
		if r.longRunning {
			r.stageLocked(auditv1.StageResponseStarted)
		}
	}
	r.stageLocked(auditv1.StageResponseComplete)
}

// Panic writes the Panic stage of a handler that panicked.
func (r *Record) Panic(p any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setStatus(metav1.Status{
		Code: http.StatusInternalServerError, Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("APIServer panic'd: %v", p),
	})
	r.stageLocked(auditv1.StagePanic)
}

func (r *Record) stage(s auditv1.Stage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stageLocked(s)
}

// stageLocked writes the event at stage s unless the policy omits it.
func (r *Record) stageLocked(s auditv1.Stage) {
	if r.cfg.omitStages&stageBit(s) != 0 {
		return
	}
	r.ev.Stage = s
	if s == auditv1.StageRequestReceived {
		r.ev.StageTimestamp = r.ev.RequestReceivedTimestamp
	} else {
		r.ev.StageTimestamp = metav1.NewMicroTime(r.log.now())
	}
	bp := r.log.lines.Get().(*[]byte)
	extra := r.annotations[:]
	if r.annotations[0][0] == "" {
		extra = nil
	}
	line := appendEventAnnotated((*bp)[:0], &r.ev, extra)
	r.log.sink.add(line)
	*bp = line
	r.log.lines.Put(bp)
}

type recordKey struct{}

// WithRecord returns ctx carrying r.
func WithRecord(ctx context.Context, r *Record) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, recordKey{}, r)
}

// RecordFrom returns the record of ctx's request; nil when it has none.
func RecordFrom(ctx context.Context) *Record {
	r, _ := ctx.Value(recordKey{}).(*Record)
	return r
}
