package cli

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/server"
)

func TestStorageFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    server.Config
		wantErr bool
	}{
		{
			name: "default: embedded",
			want: server.Config{Storage: "embedded", EtcdPrefix: "/registry", EtcdCompactInterval: 5 * time.Minute,
				StorageQuotaBytes: 2 << 30, StorageReserveBytes: 64 << 20, StorageCommitInterval: 2 * time.Millisecond},
		},
		{
			name: "embedded with a quota and a reserve",
			args: []string{"--storage-quota-bytes=500Mi", "--storage-reserve-bytes", "1000000"},
			want: server.Config{Storage: "embedded", EtcdPrefix: "/registry", EtcdCompactInterval: 5 * time.Minute,
				StorageQuotaBytes: 500 << 20, StorageReserveBytes: 1000000, StorageCommitInterval: 2 * time.Millisecond},
		},
		{
			name: "embedded without a quota or a reserve",
			args: []string{"--storage-quota-bytes=0", "--storage-reserve-bytes=0"},
			want: server.Config{Storage: "embedded", EtcdPrefix: "/registry", EtcdCompactInterval: 5 * time.Minute,
				StorageQuotaBytes: -1, StorageReserveBytes: -1, StorageCommitInterval: 2 * time.Millisecond},
		},
		{
			name: "embedded with commits paced otherwise",
			args: []string{"--storage-commit-interval=3ms"},
			want: server.Config{Storage: "embedded", EtcdPrefix: "/registry", EtcdCompactInterval: 5 * time.Minute,
				StorageQuotaBytes: 2 << 30, StorageReserveBytes: 64 << 20, StorageCommitInterval: 3 * time.Millisecond},
		},
		{
			name: "embedded with commits never paced",
			args: []string{"--storage-commit-interval=0"},
			want: server.Config{Storage: "embedded", EtcdPrefix: "/registry", EtcdCompactInterval: 5 * time.Minute,
				StorageQuotaBytes: 2 << 30, StorageReserveBytes: 64 << 20, StorageCommitInterval: -1},
		},
		{name: "negative commit interval", args: []string{"--storage-commit-interval=-1ms"}, wantErr: true},
		{name: "commit interval with etcd", args: []string{"--storage=etcd", "--etcd-servers=http://a:2379", "--storage-commit-interval=2ms"}, wantErr: true},
		{name: "negative quota", args: []string{"--storage-quota-bytes=-1"}, wantErr: true},
		{name: "quota that does not parse", args: []string{"--storage-quota-bytes=lots"}, wantErr: true},
		{name: "quota with etcd", args: []string{"--storage=etcd", "--etcd-servers=http://a:2379", "--storage-quota-bytes=1Gi"}, wantErr: true},
		{
			name: "etcd",
			args: []string{"--storage=etcd", "--etcd-servers", "https://a:2379, https://b:2379,", "--etcd-cafile=ca.crt",
				"--etcd-certfile=c.crt", "--etcd-keyfile=c.key", "--etcd-prefix=/leasehold", "--etcd-compaction-interval=1m"},
			want: server.Config{Storage: "etcd", EtcdServers: []string{"https://a:2379", "https://b:2379"}, EtcdCAFile: "ca.crt",
				EtcdCertFile: "c.crt", EtcdKeyFile: "c.key", EtcdPrefix: "/leasehold", EtcdCompactInterval: time.Minute},
		},
		{
			name: "compaction disabled",
			args: []string{"--storage=etcd", "--etcd-servers=http://a:2379", "--etcd-compaction-interval=0"},
			want: server.Config{Storage: "etcd", EtcdServers: []string{"http://a:2379"}, EtcdPrefix: "/registry", EtcdCompactInterval: -1},
		},
		{name: "etcd without servers", args: []string{"--storage=etcd"}, wantErr: true},
		{name: "etcd flags without --storage=etcd", args: []string{"--etcd-servers=http://a:2379"}, wantErr: true},
		{name: "negative compaction interval", args: []string{"--storage=etcd", "--etcd-servers=http://a:2379", "--etcd-compaction-interval=-1s"}, wantErr: true},
		{name: "unknown storage", args: []string{"--storage=bolt"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cfg server.Config
			servers := storageFlags(fs, &cfg)
			err := fs.Parse(tc.args)
			if err == nil {
				err = checkStorageFlags(fs, &cfg, *servers)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err == nil {
				if d := cmp.Diff(tc.want, cfg); d != "" {
					t.Errorf("config (-want +got):\n%s", d)
				}
			}
		})
	}
}
