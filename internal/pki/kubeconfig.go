package pki

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The names of leasehold's own entries in admin.kubeconfig. The README's
// "Adding a user" steps refer to the cluster by name.
const (
	kubeconfigCluster = "leasehold"
	kubeconfigContext = "leasehold"
)

// WriteKubeconfig makes the admin kubeconfig reach server (an https URL),
// trusting caPEM (nil: the system's roots) and authenticating with the
// admin client certificate.
//
// It owns only the cluster "leasehold", the user "leasehold-admin" and the
// context "leasehold", and within them only the fields it sets: other
// entries (users and contexts added with kubectl config), other fields (a
// context's namespace) and the current context stay as they are, except
// that the current context is set to "leasehold" when it names no context.
// The file is written (atomically, mode 0600) only when it is missing or
// when one of those fields changed, so a restart with the same address and
// credentials leaves it untouched. A file that does not parse is an error
// rather than replaced, since replacing it would lose what a user added.
func (b *Bundle) WriteKubeconfig(server string, caPEM []byte) error {
	path := b.AdminKubeconfig
	keyPEM, err := pemKey(b.admin.PrivateKey.(crypto.Signer))
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return err
	}
	kc := clientcmdapi.NewConfig()
	if !missing {
		if kc, err = clientcmd.Load(old); err != nil {
			return fmt.Errorf("pki: %s does not parse (fix or remove it): %w", path, err)
		}
	}
	// Serialize before and after the change: the same encoder on both sides
	// makes the comparison blind to the file's layout and to fields that
	// are not leasehold's.
	before, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}

	cluster := kc.Clusters[kubeconfigCluster]
	if cluster == nil {
		cluster = clientcmdapi.NewCluster()
		kc.Clusters[kubeconfigCluster] = cluster
	}
	cluster.Server = server
	cluster.CertificateAuthorityData = caPEM
	cluster.CertificateAuthority = "" // a file would override the data
	user := kc.AuthInfos[adminUser]
	if user == nil {
		user = clientcmdapi.NewAuthInfo()
		kc.AuthInfos[adminUser] = user
	}
	user.ClientCertificateData, user.ClientKeyData = pemCert(b.admin.Leaf), keyPEM
	user.ClientCertificate, user.ClientKey = "", ""
	kctx := kc.Contexts[kubeconfigContext]
	if kctx == nil {
		kctx = clientcmdapi.NewContext()
		kc.Contexts[kubeconfigContext] = kctx
	}
	kctx.Cluster, kctx.AuthInfo = kubeconfigCluster, adminUser
	if kc.Contexts[kc.CurrentContext] == nil {
		kc.CurrentContext = kubeconfigContext
	}

	after, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	if !missing && bytes.Equal(before, after) {
		// Unchanged: only make sure the keys are not readable by others.
		return os.Chmod(path, 0o600)
	}
	return writeFileAtomic(path, after, 0o600)
}
