// Package auth identifies clients: x509 client certificates signed by a
// trusted CA (the common name is the user, the organizations its groups),
// as kube-apiserver's x509 authenticator does.
package auth
