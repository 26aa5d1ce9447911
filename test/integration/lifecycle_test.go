package integration

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

func TestRestartKeepsDataAndCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := testserver.StartIn(t, dir)
	info, err := os.Stat(s.Kubeconfig())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode: %v %v", info.Mode(), err)
	}
	kubeconfig := must[[]byte](t)(os.ReadFile(s.Kubeconfig()))
	ca := must[[]byte](t)(os.ReadFile(filepath.Join(dir, "pki", "ca.crt")))
	oldClient := s.Client(t)
	l := must[*coordinationv1.Lease](t)(oldClient.CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}))
	addr := s.Addr()
	s.Stop()

	s = testserver.StartIn(t, dir, func(c *server.Config) { c.Listen = addr })
	if !bytes.Equal(ca, must[[]byte](t)(os.ReadFile(filepath.Join(dir, "pki", "ca.crt")))) ||
		!bytes.Equal(kubeconfig, must[[]byte](t)(os.ReadFile(s.Kubeconfig()))) {
		t.Error("credentials changed across a restart")
	}
	// The client built before the restart still works.
	got := must[*coordinationv1.Lease](t)(oldClient.CoordinationV1().Leases("default").Get(t.Context(), "kept", metav1.GetOptions{}))
	if got.UID != l.UID || got.ResourceVersion != l.ResourceVersion {
		t.Errorf("after restart: %+v, want %+v", got.ObjectMeta, l.ObjectMeta)
	}
	next := must[*coordinationv1.Lease](t)(oldClient.CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "next"}}, metav1.CreateOptions{}))
	if mustAtoi(t, next.ResourceVersion) <= mustAtoi(t, l.ResourceVersion) {
		t.Errorf("resourceVersion went back after restart: %s <= %s", next.ResourceVersion, l.ResourceVersion)
	}
}

// TestRestartKeepsKubeconfigEntries: a user and a context added to
// admin.kubeconfig as kubectl config does (README, "Adding a user") survive
// restarts; a restart on the same address does not rewrite the file; one
// on a new address updates leasehold's cluster entry and keeps the rest.
func TestRestartKeepsKubeconfigEntries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := testserver.StartIn(t, dir)
	path, addr := s.Kubeconfig(), s.Addr()
	s.Stop()

	// kubectl --kubeconfig=path config set-credentials alice --token=...;
	// set-context alice ...; set-context --current --namespace=apps.
	po := clientcmd.NewDefaultPathOptions()
	po.LoadingRules.ExplicitPath = path
	kc := must[*clientcmdapi.Config](t)(po.GetStartingConfig())
	kc.AuthInfos["alice"] = &clientcmdapi.AuthInfo{Token: "alice-token"}
	kc.Contexts["alice"] = &clientcmdapi.Context{Cluster: "leasehold", AuthInfo: "alice", Namespace: "team-a"}
	kc.Contexts[kc.CurrentContext].Namespace = "apps"
	if err := clientcmd.ModifyConfig(po, *kc, true); err != nil {
		t.Fatal(err)
	}
	edited := must[[]byte](t)(os.ReadFile(path))
	before := must[os.FileInfo](t)(os.Stat(path))

	s = testserver.StartIn(t, dir, func(c *server.Config) { c.Listen = addr })
	after := must[os.FileInfo](t)(os.Stat(path))
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) ||
		!bytes.Equal(edited, must[[]byte](t)(os.ReadFile(path))) {
		t.Error("a restart on the same address rewrote admin.kubeconfig")
	}
	s.Stop()

	s = testserver.StartIn(t, dir) // a new port
	got := must[*clientcmdapi.Config](t)(clientcmd.LoadFromFile(path))
	if server := got.Clusters["leasehold"].Server; server != "https://"+s.Addr() {
		t.Errorf("cluster leasehold's server %s after moving to %s", server, s.Addr())
	}
	if u, c := got.AuthInfos["alice"], got.Contexts["alice"]; u == nil || u.Token != "alice-token" ||
		c == nil || c.Cluster != "leasehold" || c.AuthInfo != "alice" || c.Namespace != "team-a" {
		t.Errorf("alice's entries after a restart: user %+v, context %+v", u, c)
	}
	if ns := got.Contexts["leasehold"].Namespace; ns != "apps" {
		t.Errorf("context leasehold's namespace %q, want apps", ns)
	}
	// The admin entries still work: StartIn built its client from them.
	if _, err := s.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("the admin context after a restart: %v", err)
	}
}

func TestShutdownEndsWatchesCleanly(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	w := must[watch.Interface](t)(s.Client(t).CoordinationV1().Leases("").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "0", SendInitialEvents: ptr(false), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}))
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("got %s event at shutdown, want the stream to end", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch still open 10s after shutdown began")
	}
	<-stopped
}

func TestDeleteCollection(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	ctx := t.Context()
	leases := s.ProtoClient(t).CoordinationV1().Leases("default")
	createLeases(t, s, "default", 6, func(i int) map[string]string { return map[string]string{"even": []string{"yes", "no"}[i%2]} })
	if err := leases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "even=yes"}); err != nil {
		t.Fatal(err)
	}
	left := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{}))
	if len(left.Items) != 3 {
		t.Fatalf("%d leases left, want 3", len(left.Items))
	}
	for _, l := range left.Items {
		if l.Labels["even"] != "no" {
			t.Errorf("%s should have been deleted", l.Name)
		}
	}
	// The answer is the list of what was deleted.
	r := do(t, s, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases?labelSelector=even%3Dno", nil, "")
	if r.code != 200 || !contains(string(r.body), `"kind":"LeaseList"`) || !contains(string(r.body), `"name":"l001"`) {
		t.Errorf("deletecollection answer: %d %s", r.code, r.body)
	}

	// With a limit, as in kube-apiserver, one page goes, and the answer
	// carries the continue token that deletes the next one.
	createLeases(t, s, "default", 10, nil)
	var page coordinationv1.LeaseList
	const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	r = do(t, s, "DELETE", path+"?limit=4", nil, "")
	if err := json.Unmarshal(r.body, &page); r.code != 200 || err != nil || len(page.Items) != 4 || page.Items[0].Name != "l000" || page.Continue == "" {
		t.Fatalf("deletecollection?limit=4: %d %v, %d items, continue %q", r.code, err, len(page.Items), page.Continue)
	}
	if left := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{})); len(left.Items) != 6 || left.Items[0].Name != "l004" {
		t.Fatalf("after deleting a page of 4: %d leases left, first %s", len(left.Items), left.Items[0].Name)
	}
	r = do(t, s, "DELETE", path+"?limit=4&continue="+url.QueryEscape(page.Continue), nil, "")
	if err := json.Unmarshal(r.body, &page); r.code != 200 || err != nil || len(page.Items) != 4 || page.Items[0].Name != "l004" {
		t.Fatalf("the next page: %d %v, %d items", r.code, err, len(page.Items))
	}
	if left := must[*coordinationv1.LeaseList](t)(leases.List(ctx, metav1.ListOptions{})); len(left.Items) != 2 {
		t.Fatalf("after the second page: %d leases left, want 2", len(left.Items))
	}
}

// TestStorageUnreachable: with its etcd gone, a write waits for the
// storage request timeout and answers kube-apiserver's 500 ServerTimeout
// with Retry-After 2 (client-go retries on it); reads that need no
// quorum go on from the watch cache; /readyz fails.
func TestStorageUnreachable(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Config{})
	s := testserver.Start(t, testserver.Etcd(cluster.Endpoints(), "/unreachable"))
	leases := s.Client(t).CoordinationV1().Leases("default")
	must[*coordinationv1.Lease](t)(leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}))
	const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	// The watch cache follows etcd: let it see the create before etcd goes,
	// or it never will.
	for deadline := time.Now().Add(10 * time.Second); do(t, s, "GET", path+"/before?resourceVersion=0", nil, "").code != 200; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch cache did not see the create within 10s")
		}
	}
	cluster.Kill()

	r := do(t, s, "POST", path, map[string]string{"Content-Type": "application/json"}, `{"metadata":{"name":"after"}}`)
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("%d %s: %v", r.code, r.body, err)
	}
	want := "The create operation against leases.coordination.k8s.io could not be completed at this time, please try again."
	if r.code != 500 || st.Reason != metav1.StatusReasonServerTimeout || st.Message != want ||
		st.Details == nil || st.Details.Name != "create" || st.Details.RetryAfterSeconds != 2 || r.header.Get("Retry-After") != "2" {
		t.Errorf("create with etcd gone: %d %s (Retry-After %q), want 500 ServerTimeout %q", r.code, r.body, r.header.Get("Retry-After"), want)
	}
	// resourceVersion=0 reads the cache, as kube-apiserver's does.
	if r := do(t, s, "GET", path+"/before?resourceVersion=0", nil, ""); r.code != 200 {
		t.Errorf("get at resourceVersion 0 with etcd gone: %d %s", r.code, r.body)
	}
	if r := do(t, s, "GET", "/readyz", nil, ""); r.code != 500 || !strings.Contains(string(r.body), "[-]storage failed: reason withheld") {
		t.Errorf("/readyz with etcd gone: %d %s", r.code, r.body)
	}
}
