package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/storage/embedded"
	"github.com/leasehold/leasehold/internal/testkit/etcdtest"
	"github.com/leasehold/leasehold/internal/testkit/testbin"
	"github.com/leasehold/leasehold/internal/testkit/testserver"
)

// embeddedOnly skips tests of the embedded store's snapshots when
// $LEASEHOLD_TEST_STORAGE puts every test server on etcd.
func embeddedOnly(t *testing.T) {
	t.Helper()
	if os.Getenv(testserver.StorageEnv) == server.StorageEtcd {
		t.Skip("snapshots are the embedded store's")
	}
}

// runCLI runs leasehold's command line in-process and returns its
// standard output.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(t.Context(), args, &stdout, &stderr)
	return stdout.String(), err
}

// TestSnapshotUnderWrites saves a snapshot from a server while 16 writers
// renew their own leases without pause, restores it into a new data
// directory and starts a server on it: every lease is there at the last
// resourceVersion acknowledged at or below the snapshot's revision, and a
// watch from a resourceVersion of the old server is answered 410 Gone, so
// that informers relist.
func TestSnapshotUnderWrites(t *testing.T) {
	embeddedOnly(t)
	srv := testserver.Start(t)
	leases := srv.Client(t).CoordinationV1().Leases("default")
	const writers = 16
	var (
		mu     sync.Mutex
		acked  = map[string][]int64{} // lease → acknowledged resourceVersions, in order
		writes atomic.Int64
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			ctx := context.Background()
			name := fmt.Sprintf("writer-%02d", w)
			l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			for n := int32(0); err == nil; n++ {
				rv, perr := strconv.ParseInt(l.ResourceVersion, 10, 64)
				if perr != nil {
					t.Error(perr)
					return
				}
				mu.Lock()
				acked[name] = append(acked[name], rv)
				mu.Unlock()
				writes.Add(1)
				if stop.Load() {
					return
				}
				l.Spec.LeaseTransitions = &n
				l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			t.Errorf("%s: %v", name, err)
		})
	}
	waitWrites := func(n int64) {
		for deadline := time.Now().Add(30 * time.Second); writes.Load() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d writes after 30s", writes.Load())
			}
		}
	}
	waitWrites(500)
	file := filepath.Join(t.TempDir(), "leasehold.snapshot")
	out, err := runCLI(t, "snapshot", "save", file, "--kubeconfig", srv.Kubeconfig())
	if err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	t.Log(strings.TrimSpace(out))
	waitWrites(writes.Load() + 200) // writes go on after the snapshot
	stop.Store(true)
	wg.Wait()
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp left after a save: %v", file, err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	info, err := embedded.CheckSnapshot(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	if out, err := runCLI(t, "snapshot", "restore", file, "--data-dir", dir); err != nil {
		t.Fatalf("snapshot restore: %v", err)
	} else {
		t.Log(strings.TrimSpace(out))
	}
	restored := testserver.StartIn(t, dir)
	list, err := restored.Client(t).CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range list.Items {
		got[l.Name] = l.ResourceVersion
	}
	var newest int64
	checked, after := 0, 0
	for name, rvs := range acked {
		var want int64
		for _, rv := range rvs {
			newest = max(newest, rv)
			if rv <= info.Revision {
				want = rv
				checked++
			} else {
				after++
			}
		}
		if want == 0 {
			continue // created after the snapshot
		}
		if got[name] != strconv.FormatInt(want, 10) {
			t.Errorf("%s restored at resourceVersion %q, want %d (its last write at or below the snapshot's revision %d)", name, got[name], want, info.Revision)
		}
	}
	if after == 0 {
		t.Errorf("no write after the snapshot's revision %d: the test proves nothing", info.Revision)
	}
	t.Logf("snapshot at revision %d: %d acknowledged writes at or below it checked, %d after it", info.Revision, checked, after)
	if rv, _ := strconv.ParseInt(list.ResourceVersion, 10, 64); rv < info.Revision+defaultBumpRevision {
		t.Errorf("restored list at resourceVersion %d, want at least %d (the snapshot's, bumped)", rv, info.Revision+defaultBumpRevision)
	}
	// An informer of the old server resumes from the newest revision it
	// saw, which the restored store never had: it must relist.
	// (kube-apiserver answers it inside the stream.)
	w, werr := restored.Client(t).CoordinationV1().Leases("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: strconv.FormatInt(newest, 10)})
	if werr == nil {
		ev := <-w.ResultChan()
		w.Stop()
		werr = apierrors.FromObject(ev.Object)
	}
	if !apierrors.IsResourceExpired(werr) && !apierrors.IsGone(werr) {
		t.Errorf("watch from resourceVersion %d of the old server: %v, want 410 Gone", newest, werr)
	}
}

// TestSnapshotRestoreRefuses: restore refuses truncated and corrupt
// files, an unfinished save's FILE.tmp, and data directories that are in
// use or not empty, and writes nothing.
func TestSnapshotRestoreRefuses(t *testing.T) {
	embeddedOnly(t)
	srv := testserver.Start(t)
	for i := range 20 {
		if _, err := srv.Client(t).CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	files := t.TempDir()
	good := filepath.Join(files, "good")
	if _, err := runCLI(t, "snapshot", "save", good, "--kubeconfig", srv.Kubeconfig()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 1
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, dir, want string
	}{
		{"truncated", write("truncated", data[:len(data)*2/3]), "", "truncated"},
		{"unfinished save", write("unfinished.tmp", data[:100]), "", "truncated"},
		{"corrupt", write("corrupt", flipped), "", "checksum mismatch"},
		{"not a snapshot", write("kubeconfig", []byte("apiVersion: v1\n")), "", "not a valid leasehold snapshot"},
		{"dir in use", good, srv.DataDir, "in use by another leasehold"},
		{"dir not empty", good, notEmpty, "is not empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := tc.dir
			if dir == "" {
				dir = filepath.Join(parent, "restored")
			}
			before := listTree(t, dir)
			_, err := runCLI(t, "snapshot", "restore", tc.file, "--data-dir", dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want an error saying %q", err, tc.want)
			}
			if after := listTree(t, dir); after != before {
				t.Errorf("restore changed %s:\nbefore: %s\nafter:  %s", dir, before, after)
			}
			if entries, _ := os.ReadDir(filepath.Dir(dir)); tc.dir == "" && len(entries) > 0 {
				t.Errorf("restore left %v beside %s", entries, dir)
			}
		})
	}
}

// listTree names the files under dir with their sizes ("" if dir does
// not exist).
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "%s:%d ", path, info.Size())
		}
		return nil
	})
	return b.String()
}

// TestSnapshotSaveFromDataDir: save reads the data directory of a stopped
// server, and refuses that of a running one.
func TestSnapshotSaveFromDataDir(t *testing.T) {
	embeddedOnly(t)
	srv := testserver.Start(t)
	l, err := srv.Client(t).CoordinationV1().Leases("default").Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "snap")
	if _, err := runCLI(t, "snapshot", "save", file, "--data-dir", srv.DataDir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("save from a running server's data directory: %v, want in use", err)
	}
	srv.Stop()
	if _, err := runCLI(t, "snapshot", "save", file, "--data-dir", srv.DataDir); err != nil {
		t.Fatalf("save from a stopped server's data directory: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := runCLI(t, "snapshot", "restore", file, "--data-dir", dir, "--bump-revision", "0"); err != nil {
		t.Fatal(err)
	}
	got, err := testserver.StartIn(t, dir).Client(t).CoordinationV1().Leases("default").Get(t.Context(), "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != l.ResourceVersion || got.UID != l.UID {
		t.Errorf("restored lease at resourceVersion %s, uid %s; want %s, %s", got.ResourceVersion, got.UID, l.ResourceVersion, l.UID)
	}
}

// TestSnapshotSaveEtcd: with the etcd engine, save says to use etcdctl.
func TestSnapshotSaveEtcd(t *testing.T) {
	c, err := etcdtest.Shared()
	if err != nil {
		t.Skipf("no etcd: %v", err)
	}
	srv := testserver.Start(t, testserver.Etcd(c.Endpoints(), "/snapshot-test-"+strconv.FormatInt(time.Now().UnixNano(), 36)),
		func(c *server.Config) { c.Standalone = true })
	file := filepath.Join(t.TempDir(), "snap")
	_, err = runCLI(t, "snapshot", "save", file, "--kubeconfig", srv.Kubeconfig())
	if err == nil || !strings.Contains(err.Error(), "etcdctl snapshot save") {
		t.Fatalf("save from a server on etcd: %v, want an error naming etcdctl snapshot save", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) > 0 {
		t.Errorf("save left %v", entries)
	}
	_, err = runCLI(t, "snapshot", "save", file, "--data-dir", srv.DataDir)
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("save from the data directory of a running server on etcd: %v, want in use", err)
	}
}

// TestSnapshotSaveKilled: a save killed with SIGKILL half-way leaves no
// FILE, and restore refuses the FILE.tmp it leaves. The save (a real
// process) reads the server through a proxy that passes the first
// 128 KiB of the answer and then holds the rest, so that the kill comes
// in the middle, every time.
func TestSnapshotSaveKilled(t *testing.T) {
	embeddedOnly(t)
	bin, err := testbin.Build(testbin.Leasehold)
	if err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t)
	fill(t, srv.Client(t), 2000) // about 1 MB of snapshot
	proxy := stallingProxy(t, srv.Addr(), 128<<10)
	kc, err := clientcmd.LoadFromFile(srv.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + proxy
	}
	dir := t.TempDir()
	kcPath := filepath.Join(dir, "proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcPath); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "snap")
	var stderr bytes.Buffer
	save := exec.Command(bin, "snapshot", "save", file, "--kubeconfig", kcPath)
	save.Stderr = &stderr
	if err := save.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(file + ".tmp"); err == nil && fi.Size() >= 64<<10 {
			break
		}
		if time.Now().After(deadline) {
			save.Process.Kill()
			save.Wait()
			t.Fatalf("no %s.tmp after 30s; stderr:\n%s", file, stderr.String())
		}
	}
	save.Process.Signal(syscall.SIGKILL)
	if err := save.Wait(); err == nil {
		t.Fatal("the save finished before it was killed")
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a killed save left %s: %v", file, err)
	}
	restored := filepath.Join(dir, "restored")
	_, err = runCLI(t, "snapshot", "restore", file+".tmp", "--data-dir", restored)
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("restore of a killed save's %s.tmp: %v, want truncated", file, err)
	}
	if _, err := os.Stat(restored); !os.IsNotExist(err) {
		t.Errorf("a refused restore created %s", restored)
	}
}

// fill creates n leases, 16 at a time.
func fill(t *testing.T, c kubernetes.Interface, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			holder := strings.Repeat("h", 200)
			for i := w; i < n; i += 16 {
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fill-%05d", i)}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
				if _, err := c.CoordinationV1().Leases("default").Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// stallingProxy forwards TCP connections to target, passing at most
// limit bytes of each answer; it returns its address. It stops with the
// test.
func stallingProxy(t *testing.T, target string, limit int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			// Past limit, the answer is held: the client waits for the
			// rest until it is killed, which closes its connection and
			// ends the first copy.
			conns.Go(func() { io.Copy(out, in); out.Close(); in.Close() })
			conns.Go(func() { io.Copy(in, io.LimitReader(out, limit)) })
		}
	}()
	return ln.Addr().String()
}
