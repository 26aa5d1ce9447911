package server_test

import (
	"bytes"
	"strconv"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/etcdtest"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/testserver"
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
