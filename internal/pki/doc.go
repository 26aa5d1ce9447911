// Package pki creates and keeps leasehold's certificates in the data
// directory: a CA, a serving certificate for the listen address, and the
// admin client certificate with the kubeconfig that uses it. Everything is
// generated on first start and reused afterwards; a certificate is renewed
// when it nears expiry or no longer covers the listen address.
package pki
