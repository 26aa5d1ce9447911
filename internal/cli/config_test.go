package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// everyKey gives every serve flag a value other than its default, with
// storage: etcd so that the etcd keys are allowed.
var everyKey = map[string]string{
	"data-dir":                       "/srv/leasehold",
	"listen":                         "0.0.0.0:7443",
	"coordinated-leader-election":    "false",
	"watch-window":                   "500",
	"event-ttl":                      "5m",
	"log-level":                      "debug",
	"storage":                        "etcd",
	"etcd-servers":                   "https://a:2379,https://b:2379",
	"etcd-cafile":                    "/etc/etcd/ca.crt",
	"etcd-certfile":                  "/etc/etcd/client.crt",
	"etcd-keyfile":                   "/etc/etcd/client.key",
	"etcd-prefix":                    "/leasehold",
	"etcd-compaction-interval":       "1m30s",
	"tls-cert-file":                  "/etc/leasehold/serving.crt",
	"tls-private-key-file":           "/etc/leasehold/serving.key",
	"client-ca-file":                 "/etc/leasehold/clients.crt",
	"token-auth-file":                "/etc/leasehold/tokens.csv",
	"anonymous-auth":                 "true",
	"authorization-mode":             "RBAC,ABAC",
	"audit-log-path":                 "/var/log/leasehold/audit.log",
	"audit-policy-file":              "/etc/leasehold/audit-policy.yaml",
	"audit-log-maxsize":              "50",
	"audit-log-maxbackup":            "3",
	"audit-log-maxage":               "7",
	"authorization-policy-file":      "/etc/leasehold/policy.jsonl",
	"max-requests-inflight":          "40",
	"max-mutating-requests-inflight": "20",
	"max-watches-per-user":           "7",
	"min-request-timeout":            "60",
	"http2-server":                   "go",
	"disable-admission-plugins":      "OwnerReferencesPermissionEnforcement",
}

// embeddedKeys are the keys of the embedded engine only, which --storage
// etcd refuses: tested on their own.
var embeddedKeys = map[string]string{
	"storage-quota-bytes":     "1Gi",
	"storage-reserve-bytes":   "100Mi",
	"storage-commit-interval": "5ms",
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFileEveryKey: every serve flag can be a key of the file, and
// the file gives the same configuration as the flags; a flag on the
// command line wins over the file.
func TestConfigFileEveryKey(t *testing.T) {
	// The table covers every flag, each with a value that is not its
	// default, so that a key without effect shows.
	newServeFlags(io.Discard).fs.VisitAll(func(f *flag.Flag) {
		v, ok := everyKey[f.Name]
		if ev, embedded := embeddedKeys[f.Name]; embedded {
			v, ok = ev, true
		}
		switch {
		case f.Name == configFlag:
		case !ok:
			t.Errorf("flag --%s is missing from everyKey", f.Name)
		case v == f.DefValue:
			t.Errorf("everyKey gives --%s its default %q", f.Name, v)
		}
	})

	var names []string
	for name := range everyKey {
		names = append(names, name)
	}
	sort.Strings(names)
	var yml strings.Builder
	var args []string
	for _, name := range names {
		v := everyKey[name]
		args = append(args, "--"+name+"="+v)
		if isListFlag(name) { // a YAML list
			fmt.Fprintf(&yml, "%s:\n", name)
			for _, s := range strings.Split(v, ",") {
				fmt.Fprintf(&yml, "  - %s\n", s)
			}
			continue
		}
		fmt.Fprintf(&yml, "%s: %s\n", name, v)
	}
	file := writeFile(t, "config.yaml", "# every key\n"+yml.String())

	wantCfg, wantLevel, err := parseServe(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	gotCfg, gotLevel, err := parseServe([]string{"--config", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantCfg, gotCfg); d != "" || gotLevel != wantLevel {
		t.Errorf("file vs flags (-flags +file):\n%s\nlevel %v, want %v", d, gotLevel, wantLevel)
	}
	var embeddedYAML strings.Builder
	var embeddedArgs []string
	for name, v := range embeddedKeys {
		fmt.Fprintf(&embeddedYAML, "%s: %s\n", name, v)
		embeddedArgs = append(embeddedArgs, "--"+name+"="+v)
	}
	wantEmbedded, _, err := parseServe(embeddedArgs, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	gotEmbedded, _, err := parseServe([]string{"--config", writeFile(t, "embedded.yaml", embeddedYAML.String())}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantEmbedded, gotEmbedded); d != "" || gotEmbedded.StorageQuotaBytes == 0 {
		t.Errorf("embedded keys, file vs flags (-flags +file):\n%s", d)
	}
	if gotLevel != slog.LevelDebug || gotCfg.Listen != "0.0.0.0:7443" || len(gotCfg.EtcdServers) != 2 || gotCfg.EtcdCompactInterval != 90*time.Second {
		t.Errorf("file not applied: %+v", gotCfg)
	}

	// The command line overrides the file, whether before or after --config.
	for _, args := range [][]string{
		{"--listen", "127.0.0.1:9443", "--config", file, "--max-watches-per-user=0"},
		{"--config", file, "--max-watches-per-user=0", "--listen", "127.0.0.1:9443"},
	} {
		cfg, _, err := parseServe(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Listen != "127.0.0.1:9443" || cfg.MaxWatchesPerUser != 0 || cfg.WatchWindow != 500 {
			t.Errorf("%v: listen %s, max watches %d, watch window %d", args, cfg.Listen, cfg.MaxWatchesPerUser, cfg.WatchWindow)
		}
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []string // in the error
	}{
		{name: "unknown key", file: "listen: 127.0.0.1:0\nlistn: 127.0.0.1:0\n", want: []string{`:2: unknown key "listn"`}},
		{name: "each unknown key", file: "datadir: x\nlisten: 127.0.0.1:0\nport: 1\n", want: []string{`:1: unknown key "datadir"`, `:3: unknown key "port"`}},
		{name: "key with dashes", file: "--listen: 127.0.0.1:0\n", want: []string{`unknown key "--listen" (write listen, without the dashes)`}},
		{name: "config in config", file: "config: other.yaml\n", want: []string{`unknown key "config"`}},
		{name: "bad value", file: "watch-window: many\n", want: []string{`:1: watch-window: invalid value "many"`}},
		{name: "bad duration", file: "storage: etcd\netcd-servers: http://a:2379\netcd-compaction-interval: 5\n", want: []string{`:3: etcd-compaction-interval: invalid value "5"`}},
		{name: "list for a single value", file: "listen:\n  - a\n  - b\n", want: []string{`:2: listen takes one value, not a list`}},
		{name: "no value", file: "data-dir:\n", want: []string{`data-dir: no value`}},
		{name: "mapping as value", file: "listen:\n  host: a\n", want: []string{`listen: want a value, found a mapping`}},
		{name: "not a mapping", file: "- listen\n", want: []string{`want keys and values`}},
		{name: "key twice", file: "listen: a:1\nlisten: b:1\n", want: []string{`:2: "listen" already given on line 1`}},
		{name: "etcd keys need storage etcd", file: "etcd-servers: [http://a:2379]\n", want: []string{`--etcd-servers given with --storage=embedded`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "config.yaml", tc.file)
			_, _, err := parseServe([]string{"--config", file}, io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if _, _, err := parseServe([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, io.Discard); err == nil {
		t.Error("missing file accepted")
	}
	// Comments only, or nothing: no keys, the defaults.
	if cfg, _, err := parseServe([]string{"--config", writeFile(t, "c.yaml", "# nothing yet\n")}, io.Discard); err != nil || cfg.Listen != "127.0.0.1:6443" {
		t.Errorf("empty file: %v, listen %s", err, cfg.Listen)
	}
}

// TestServeConfigFile starts serve with a configuration file under a
// service manager's notification socket: the keys take effect, a flag
// overrides the file (the file's listen address could not be bound), and
// the manager hears READY=1 once it serves and STOPPING=1 when it stops.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	t.Setenv("NOTIFY_SOCKET", sock.LocalAddr().String())
	messages := make(chan string, 10)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				close(messages)
				return
			}
			messages <- string(buf[:n])
		}
	}()

	data := filepath.Join(dir, "data")
	tokens := writeFile(t, "tokens.csv", "secret-token,carol,carol-uid\n")
	file := writeFile(t, "config.yaml", fmt.Sprintf(`# leasehold serve --config
data-dir: %s
listen: 256.0.0.1:0          # overridden on the command line
log-level: warn
coordinated-leader-election: false
token-auth-file: %s
anonymous-auth: true
`, data, tokens))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- Run(ctx, []string{"serve", "--config", file, "--listen", addr}, io.Discard, &stderr) }()

	select {
	case m := <-messages:
		if !strings.HasPrefix(m, "READY=1\n") || !strings.Contains(m, "STATUS=serving on https://"+addr) {
			t.Errorf("first notification %q, want READY=1 and the URL", m)
		}
	case err := <-done:
		t.Fatalf("serve ended: %v; stderr:\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no READY=1 after 30s; stderr:\n%s", stderr.String())
	}

	// data-dir and listen: the admin kubeconfig is in the file's data
	// directory and points at the command line's address.
	kc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(data, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if kc.Host != "https://"+addr {
		t.Errorf("admin.kubeconfig server %s, want https://%s", kc.Host, addr)
	}
	// log-level: warn leaves out the info line saying how to connect.
	if strings.Contains(stderr.String(), "leasehold is serving") {
		t.Errorf("info logged at log-level warn:\n%s", stderr.String())
	}
	// token-auth-file and anonymous-auth: the token is carol; no
	// credentials is system:anonymous, who may not read /api (403, not 401).
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(kc.CAData)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	for _, c := range []struct {
		token string
		want  int
	}{{"secret-token", http.StatusOK}, {"", http.StatusForbidden}, {"wrong", http.StatusUnauthorized}} {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/api", nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET /api with token %q: %d, want %d", c.token, resp.StatusCode, c.want)
		}
	}
	// coordinated-leader-election: false drops spec.strategy.
	cs, err := kubernetes.NewForConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	strategy := coordinationv1.OldestEmulationVersion
	l, err := cs.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l"},
		Spec:       coordinationv1.LeaseSpec{Strategy: &strategy},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.Strategy != nil {
		t.Errorf("spec.strategy kept with coordinated-leader-election: false")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-messages:
		if !strings.HasPrefix(m, "STOPPING=1\n") {
			t.Errorf("notification at shutdown %q, want STOPPING=1", m)
		}
	case <-time.After(10 * time.Second):
		t.Error("no STOPPING=1")
	}
}
