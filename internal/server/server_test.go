package server_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// TestEtcdStorage runs two servers (replicas) on one etcd cluster over TLS
// and checks that a lease written through one is read and watched through
// the other, and that it is stored as kube-apiserver stores it: under
// PREFIX/leases/NAMESPACE/NAME, in the protobuf storage encoding.
func TestEtcdStorage(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Config{TLS: true})
	const prefix = "/replicated"
	onEtcd := func(cfg *server.Config) {
		testserver.Etcd(c.Endpoints(), prefix+"/")(cfg) // the trailing slash is dropped
		cfg.EtcdCAFile, cfg.EtcdCertFile, cfg.EtcdKeyFile = c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile
	}
	a := testserver.Start(t, onEtcd)
	b := testserver.Start(t, onEtcd)
	ctx := t.Context()

	w, err := b.Client(t).CoordinationV1().Leases("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	holder := "a"
	created, err := a.Client(t).CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	if l, ok := ev.Object.(*coordinationv1.Lease); !ok || l.Name != "l" || l.ResourceVersion != created.ResourceVersion {
		t.Fatalf("watch through the other replica: %v %+v, want the creation at %s", ev.Type, ev.Object, created.ResourceVersion)
	}
	got, err := b.Client(t).CoordinationV1().Leases("default").Get(ctx, "l", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("Get through the other replica: %+v, %v", got, err)
	}

	resp, err := c.Client(t).Get(ctx, prefix+"/leases/default/l")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the lease in etcd: %v, %v", resp, err)
	}
	if v := resp.Kvs[0].Value; !bytes.HasPrefix(v, []byte("k8s\x00")) || !bytes.Contains(v, []byte("coordination.k8s.io/v1")) {
		t.Errorf("stored value is not kube-apiserver's protobuf encoding of a Lease: %q", v[:min(len(v), 64)])
	}
	if rv := created.ResourceVersion; rv != strconv.FormatInt(resp.Kvs[0].ModRevision, 10) {
		t.Errorf("resourceVersion %s, etcd ModRevision %d", rv, resp.Kvs[0].ModRevision)
	}
}

// TestDataDirInUse: a second server on a data directory in use changes no
// file in it (admin.kubeconfig above all: it would point kubectl away from
// the running server) and says who holds it; the first keeps serving.
func TestDataDirInUse(t *testing.T) {
	t.Parallel()
	first := testserver.Start(t)
	before := snapshot(t, first.DataDir)
	_, err := server.New(server.Config{DataDir: first.DataDir, Listen: "127.0.0.1:0", Logger: testserver.Logger()})
	want := fmt.Sprintf("%s is in use by another leasehold (pid %d)", first.DataDir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second server: %v, want %q", err, want)
	}
	if diff := cmp.Diff(before, snapshot(t, first.DataDir)); diff != "" {
		t.Errorf("the second server changed the data directory (-before +after):\n%s", diff)
	}
	if _, err := first.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("the first server after the attempt: %v", err)
	}
}

// snapshot records every file of dir: contents, mode and modification
// time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		files[path] = fmt.Sprintf("%s %v %x", info.Mode(), info.ModTime().UnixNano(), sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files[filepath.Join(dir, "admin.kubeconfig")]; !ok {
		t.Fatalf("no admin.kubeconfig in %s", dir)
	}
	return files
}
