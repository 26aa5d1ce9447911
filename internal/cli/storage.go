package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/internal/server"
)

// storageFlags defines the storage selection flags, named as
// kube-apiserver's (a public contract: keep the names). It returns the raw
// --etcd-servers value, which checkStorageFlags splits.
func storageFlags(fs *flag.FlagSet, cfg *server.Config) *string {
	fs.StringVar(&cfg.Storage, "storage", server.StorageEmbedded,
		"storage engine: embedded (a local store in --data-dir) or etcd (an etcd cluster shared by several replicas)")
	servers := fs.String("etcd-servers", "", "comma-separated etcd client URLs, such as https://10.0.0.1:2379,https://10.0.0.2:2379 (--storage=etcd)")
	fs.StringVar(&cfg.EtcdCAFile, "etcd-cafile", "", "PEM file of the CA that signs the etcd members' serving certificates")
	fs.StringVar(&cfg.EtcdCertFile, "etcd-certfile", "", "PEM client certificate for etcd")
	fs.StringVar(&cfg.EtcdKeyFile, "etcd-keyfile", "", "PEM private key of --etcd-certfile")
	fs.StringVar(&cfg.EtcdPrefix, "etcd-prefix", "/registry", "prefix of every key leasehold stores in etcd")
	fs.DurationVar(&cfg.EtcdCompactInterval, "etcd-compaction-interval", server.DefaultEtcdCompactInterval,
		"how often etcd's history is compacted, the replicas taking turns (0 disables compaction)")
	return servers
}

// checkStorageFlags validates the storage flags after parsing and fills
// cfg.EtcdServers.
func checkStorageFlags(fs *flag.FlagSet, cfg *server.Config, servers string) error {
	for _, s := range strings.Split(servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.EtcdServers = append(cfg.EtcdServers, s)
		}
	}
	switch cfg.Storage {
	case server.StorageEmbedded:
		var etcdFlags []string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "etcd-") {
				etcdFlags = append(etcdFlags, "--"+f.Name)
			}
		})
		if len(etcdFlags) > 0 {
			return fmt.Errorf("%s given with --storage=embedded; add --storage=etcd", strings.Join(etcdFlags, ", "))
		}
	case server.StorageEtcd:
		if len(cfg.EtcdServers) == 0 {
			return errors.New("--storage=etcd needs --etcd-servers")
		}
		if cfg.EtcdCompactInterval < 0 {
			return errors.New("--etcd-compaction-interval must not be negative")
		}
		if cfg.EtcdCompactInterval == 0 {
			cfg.EtcdCompactInterval = -1 // server.Config: negative disables
		}
	default:
		return fmt.Errorf("--storage=%q: want embedded or etcd", cfg.Storage)
	}
	return nil
}
