package server

import (
	"github.com/leasehold/leasehold/internal/audit"
)

// openAuditLog opens the audit log cfg asks for: nil without one. As in
// kube-apiserver, events are recorded only with both a log path and a
// policy file; either alone is logged and ignored.
func openAuditLog(cfg Config) (*audit.Log, error) {
	log := cfg.Logger
	switch {
	case cfg.AuditLogPath == "" && cfg.AuditPolicyFile == "":
		return nil, nil
	case cfg.AuditPolicyFile == "":
		log.Warn("--audit-log-path without --audit-policy-file: no audit events are recorded, as in kube-apiserver")
		return nil, nil
	case cfg.AuditLogPath == "":
		log.Warn("--audit-policy-file without --audit-log-path: no audit events are recorded")
		return nil, nil
	}
	policy, warnings, err := audit.LoadPolicy(cfg.AuditPolicyFile)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn("audit policy: "+w, "path", cfg.AuditPolicyFile)
	}
	l, err := audit.New(audit.Options{
		Path: cfg.AuditLogPath, Policy: policy, Logger: log,
		MaxSizeMB: cfg.AuditLogMaxSizeMB, MaxBackups: cfg.AuditLogMaxBackups, MaxAgeDays: cfg.AuditLogMaxAgeDays,
	})
	if err != nil {
		return nil, err
	}
	log.Info("audit log: recording requests as the policy says", "path", cfg.AuditLogPath, "policy", cfg.AuditPolicyFile)
	return l, nil
}
