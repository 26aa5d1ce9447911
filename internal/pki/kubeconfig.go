package pki

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"os"

	"sigs.k8s.io/yaml"
)

// kubeconfig is the subset of the kubeconfig format leasehold writes.
type kubeconfig struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type namedCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server                   string `json:"server"`
		CertificateAuthorityData []byte `json:"certificate-authority-data"`
	} `json:"cluster"`
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		ClientCertificateData []byte `json:"client-certificate-data"`
		ClientKeyData         []byte `json:"client-key-data"`
	} `json:"user"`
}

type namedContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster string `json:"cluster"`
		User    string `json:"user"`
	} `json:"context"`
}

// writeKubeconfig writes a kubeconfig for the admin client certificate,
// only when its content changes.
func writeKubeconfig(path, server string, caPEM []byte, admin tls.Certificate) error {
	keyPEM, err := pemKey(admin.PrivateKey.(crypto.Signer))
	if err != nil {
		return err
	}
	var kc kubeconfig
	kc.APIVersion, kc.Kind = "v1", "Config"
	var c namedCluster
	c.Name = "leasehold"
	c.Cluster.Server = server
	c.Cluster.CertificateAuthorityData = caPEM
	var u namedUser
	u.Name = adminUser
	u.User.ClientCertificateData = pemCert(admin.Leaf)
	u.User.ClientKeyData = keyPEM
	var ctx namedContext
	ctx.Name = "leasehold"
	ctx.Context.Cluster, ctx.Context.User = "leasehold", adminUser
	kc.Clusters, kc.Users, kc.Contexts = []namedCluster{c}, []namedUser{u}, []namedContext{ctx}
	kc.CurrentContext = "leasehold"
	data, err := yaml.Marshal(kc)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return os.Chmod(path, 0o600)
	}
	return writeFileAtomic(path, data, 0o600)
}
