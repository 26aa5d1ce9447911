package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/server"
)

func TestSecurityFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    server.Config
		wantErr bool
	}{
		{
			name: "defaults: kube-apiserver's limits, no anonymous requests",
			want: server.Config{MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200},
		},
		{
			name: "everything",
			args: []string{"--tls-cert-file=s.crt", "--tls-private-key-file=s.key", "--client-ca-file=ca.crt", "--token-auth-file=t.csv",
				"--anonymous-auth", "--authorization-policy-file=p.jsonl", "--max-requests-inflight=10", "--max-mutating-requests-inflight=5",
				"--max-watches-per-user=100"},
			want: server.Config{TLSCertFile: "s.crt", TLSKeyFile: "s.key", ClientCAFile: "ca.crt", TokenAuthFile: "t.csv",
				AnonymousAuth: true, AuthorizationPolicyFile: "p.jsonl", MaxRequestsInflight: 10, MaxMutatingRequestsInflight: 5, MaxWatchesPerUser: 100},
		},
		{
			name: "0 disables the in-flight limits",
			args: []string{"--max-requests-inflight=0", "--max-mutating-requests-inflight=0"},
			want: server.Config{MaxRequestsInflight: 0, MaxMutatingRequestsInflight: 0},
		},
		{name: "certificate without key", args: []string{"--tls-cert-file=s.crt"}, wantErr: true},
		{name: "key without certificate", args: []string{"--tls-private-key-file=s.key"}, wantErr: true},
		{name: "negative limit", args: []string{"--max-requests-inflight=-1"}, wantErr: true},
		{name: "negative watch limit", args: []string{"--max-watches-per-user=-1"}, wantErr: true},
		{
			name: "authorization modes",
			args: []string{"--authorization-mode=RBAC, ABAC", "--authorization-policy-file=p.jsonl"},
			want: server.Config{AuthorizationModes: []string{"RBAC", "ABAC"}, AuthorizationPolicyFile: "p.jsonl", MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200},
		},
		{name: "ABAC without a policy file", args: []string{"--authorization-mode=ABAC"}, wantErr: true},
		{name: "a policy file without ABAC", args: []string{"--authorization-mode=RBAC", "--authorization-policy-file=p.jsonl"}, wantErr: true},
		{name: "an unknown mode", args: []string{"--authorization-mode=Magic"}, wantErr: true},
		{name: "a mode twice", args: []string{"--authorization-mode=RBAC,RBAC"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cfg server.Config
			securityFlags(fs, &cfg)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := checkSecurityFlags(&cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, cfg); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}
