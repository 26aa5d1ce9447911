package cli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/storage/embedded"
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
	cfg.StorageQuotaBytes, cfg.StorageReserveBytes = embedded.DefaultQuotaBytes, embedded.DefaultReserveBytes
	fs.Var((*bytesFlag)(&cfg.StorageQuotaBytes), "storage-quota-bytes",
		"most data the embedded store holds (keys and values of the current objects, such as 2Gi or 500M); beyond it, writes that add data are refused (0: no quota)")
	fs.Var((*bytesFlag)(&cfg.StorageReserveBytes), "storage-reserve-bytes",
		"free space the embedded store keeps on its filesystem; below it, writes other than deletes are refused (0: none, and a full disk stops the server)")
	fs.DurationVar(&cfg.StorageCommitInterval, "storage-commit-interval", embedded.DefaultCommitInterval,
		"after a group commit (one fsync) of four writes or more, the embedded store's next waits until as many are queued, at most until this long after the last began: fewer fsyncs, less CPU a write, for at most this much more latency (0: a commit starts as soon as the last one ends)")
	return servers
}

// bytesFlag is a size flag: a number of bytes, or a Kubernetes quantity
// such as 64Mi or 2G.
type bytesFlag int64

func (b *bytesFlag) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *bytesFlag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		q, qerr := resource.ParseQuantity(v)
		if qerr != nil {
			return fmt.Errorf("want a number of bytes or a quantity such as 64Mi: %w", qerr)
		}
		n = q.Value()
	}
	if n < 0 {
		return errors.New("must not be negative")
	}
	*b = bytesFlag(n)
	return nil
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
		if etcdFlags := setFlags(fs, "etcd-"); len(etcdFlags) > 0 {
			return fmt.Errorf("%s given with --storage=embedded; add --storage=etcd", strings.Join(etcdFlags, ", "))
		}
		// server.Config: negative means none.
		for _, v := range []*int64{&cfg.StorageQuotaBytes, &cfg.StorageReserveBytes} {
			if *v == 0 {
				*v = -1
			}
		}
		switch {
		case cfg.StorageCommitInterval < 0:
			return errors.New("--storage-commit-interval must not be negative")
		case cfg.StorageCommitInterval == 0:
			cfg.StorageCommitInterval = -1
		}
	case server.StorageEtcd:
		if len(cfg.EtcdServers) == 0 {
			return errors.New("--storage=etcd needs --etcd-servers")
		}
		if embeddedFlags := setFlags(fs, "storage-"); len(embeddedFlags) > 0 {
			return fmt.Errorf("%s given with --storage=etcd; they are the embedded store's (etcd has its own, such as its quota, --quota-backend-bytes)", strings.Join(embeddedFlags, ", "))
		}
		cfg.StorageQuotaBytes, cfg.StorageReserveBytes, cfg.StorageCommitInterval = 0, 0, 0
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

// setFlags returns the flags given on the command line whose names start
// with prefix, as "--name".
func setFlags(fs *flag.FlagSet, prefix string) []string {
	var names []string
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, prefix) {
			names = append(names, "--"+f.Name)
		}
	})
	return names
}
