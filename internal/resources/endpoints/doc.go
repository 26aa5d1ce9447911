// Package endpoints describes core v1 Endpoints as kube-apiserver serves
// them: v1 defaulting (empty port protocol becomes TCP), the validation of
// pkg/apis/core/validation (ValidateEndpoints* and helpers), the IP-format
// warnings of pkg/registry/core/endpoint/strategy.go, and the printer of
// pkg/printers/internalversion/printers.go.
//
// Subsets are stored as sent: nothing is repacked, sorted or deduplicated.
// Unlike kube-apiserver, leasehold sends no "v1 Endpoints is deprecated"
// warning.
package endpoints
