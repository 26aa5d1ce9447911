//go:build unix

package lock_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leasehold/leasehold/internal/lock"
	"github.com/leasehold/leasehold/internal/testkit/locktest"
)

// TestRefused: a server that refuses the permission (403) or the
// credentials (401) is ExitRefused for lock, elect and register, not
// "could not reach the server", and the message says what was refused to
// whom: the server's Status message. The users are the admin
// impersonating them, under RBAC.
func TestRefused(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	// getter may get leases, creator get and create them; nobody nothing.
	for user, verbs := range map[string][]string{"getter": {"get"}, "creator": {"get", "create"}} {
		if _, err := e.client.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := rest.CopyConfig(e.srv.Config)
		cfg.Impersonate.UserName = user
		as, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		locktest.WaitFor(t, 30*time.Second, "the role binding to apply", func() bool {
			_, err := as.CoordinationV1().Leases("default").Get(ctx, "no-such-lease", metav1.GetOptions{})
			return !lock.Refused(err)
		})
	}
	// An unheld lease: creator's acquisition is an update.
	if _, err := e.client.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "unheld"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(user, token string) string {
		kc, err := clientcmd.LoadFromFile(e.srv.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range kc.AuthInfos {
			if token != "" {
				a.ClientCertificateData, a.ClientKeyData, a.Token = nil, nil, token
			}
			a.Impersonate = user
		}
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name  string
		user  string
		token string
		args  []string
		want  string
	}{
		{"lock, no get", "nobody", "", []string{"lock", "l", "--", e.bin.Child, "exit", "0"}, `User "nobody" cannot get resource "leases"`},
		{"lock, no create", "getter", "", []string{"lock", "l", "--", e.bin.Child, "exit", "0"}, `User "getter" cannot create resource "leases"`},
		{"lock, no update", "creator", "", []string{"lock", "unheld", "--", e.bin.Child, "exit", "0"}, `User "creator" cannot update resource "leases"`},
		{"lock, bad token", "", "not-a-token", []string{"lock", "l", "--", e.bin.Child, "exit", "0"}, "refused the credentials (401)"},
		{"elect, no get", "nobody", "", []string{"elect", "l"}, `User "nobody" cannot get resource "leases"`},
		{"elect, no create", "getter", "", []string{"elect", "l"}, `User "getter" cannot create resource "leases"`},
		{"elect --observe, no list", "getter", "", []string{"elect", "--observe", "l"}, `User "getter" cannot list resource "leases"`},
		{"register, no create", "getter", "", []string{"register", "--lease-duration=4s", "api", "10.0.0.1:80"}, `User "getter" cannot create resource "leases"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{tc.args[0], "--kubeconfig", kubeconfig(tc.user, tc.token)}, tc.args[1:]...)
			if tc.args[0] != "register" {
				args = append(args[:3:3], append(locktest.Fast, args[3:]...)...)
			}
			p := locktest.Start(t, e.bin.Leasehold, args...)
			code, exited := p.Wait(t, 30*time.Second)
			if code != lock.ExitRefused {
				t.Errorf("exit code %d, want %d", code, lock.ExitRefused)
			}
			if msg := p.Stderr.String(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "refused") {
				t.Errorf("stderr does not say %q was refused:\n%s", tc.want, msg)
			}
			t.Log(strings.TrimSpace(p.Stderr.String()))
			// At once, not after trying for the renew deadline.
			if d := exited.Sub(p.Started()); d > 2*time.Second {
				t.Errorf("exited after %v", d)
			}
		})
	}
}
